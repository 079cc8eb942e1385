package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

var elrOn = ELRPolicy{MinInsyncReplicas: 2, ELREnabled: true}

func alive(ids ...int32) func(int32) bool {
	return func(id int32) bool { return containsID(ids, id) }
}

func TestChangeISRMaintainsELR(t *testing.T) {
	s := state(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2, 3})
	s = ChangeISR(s, []int32{1, 2}, nil, elrOn) // still at min ISR: no ELR
	if len(s.ELR) != 0 || s.PartitionEpoch != 1 || s.LeaderEpoch != 0 {
		t.Fatalf("ISR [1 2]: %+v, want no ELR, partition epoch 1, leader epoch 0", s)
	}
	s = ChangeISR(s, []int32{1}, nil, elrOn) // below min: 2 becomes eligible
	if !cmp.Equal(s.ELR, []int32{2}) {
		t.Fatalf("ISR [1]: ELR %v, want [2]", s.ELR)
	}
	s = ChangeISR(s, nil, []int32{2}, elrOn) // 1 leaves too; 2 shut down uncleanly
	if !cmp.Equal(s.ELR, []int32{1}) || !cmp.Equal(s.LastKnownELR, []int32{2}) {
		t.Fatalf("ISR []: ELR %v last known %v, want [1] and [2]", s.ELR, s.LastKnownELR)
	}
	s = ChangeISR(s, []int32{1, 3}, nil, elrOn) // back at min ISR
	if len(s.ELR) != 0 || len(s.LastKnownELR) != 0 {
		t.Fatalf("ISR [1 3]: ELR %v last known %v, want both cleared", s.ELR, s.LastKnownELR)
	}
	off := ChangeISR(state(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2}), []int32{1}, nil, ELRPolicy{MinInsyncReplicas: 2})
	if len(off.ELR) != 0 {
		t.Errorf("ELR disabled: ELR %v, want none", off.ELR)
	}
}

func TestElect(t *testing.T) {
	base := PartitionState{LeaderID: 1, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}}
	noISR := PartitionState{LeaderID: NoLeader, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int32{3, 1, 2}, ELR: []int32{1, 2}}
	unclean := elrOn
	unclean.UncleanEnabled = true
	cases := []struct {
		name   string
		cur    PartitionState
		pol    ELRPolicy
		alive  []int32
		leader int32
		kind   ElectionKind
		isr    []int32
	}{
		{"current leader valid", base, elrOn, []int32{1, 2, 3}, 1, ElectionKept, []int32{1, 2}},
		{"from ISR, assignment order", base, elrOn, []int32{2, 3}, 2, ElectionClean, []int32{1, 2}},
		{"ISR dead, no unclean", base, elrOn, []int32{3}, NoLeader, ElectionNoLeader, []int32{1, 2}},
		{"ISR dead, unclean", base, unclean, []int32{3}, 3, ElectionUnclean, []int32{3}},
		{"empty ISR: from ELR", noISR, elrOn, []int32{2, 3}, 2, ElectionFromELR, []int32{2}},
		{"empty ISR, ELR dead", noISR, elrOn, []int32{3}, NoLeader, ElectionNoLeader, nil},
	}
	for _, c := range cases {
		next, kind := Elect(c.cur, c.pol, alive(c.alive...))
		if next.LeaderID != c.leader || kind != c.kind || !cmp.Equal(next.ISR, c.isr, cmpEmpty) {
			t.Errorf("%s: leader %d kind %d ISR %v; want %d, %d, %v", c.name, next.LeaderID, kind, next.ISR, c.leader, c.kind, c.isr)
		}
		changed := next.LeaderID != c.cur.LeaderID
		if changed != (next.LeaderEpoch == c.cur.LeaderEpoch+1) || changed != (next.PartitionEpoch == c.cur.PartitionEpoch+1) {
			t.Errorf("%s: epochs %d/%d from %d/%d; bumped iff the leader changed", c.name, next.LeaderEpoch, next.PartitionEpoch, c.cur.LeaderEpoch, c.cur.PartitionEpoch)
		}
		if kind == ElectionFromELR && containsID(next.ELR, next.LeaderID) {
			t.Errorf("%s: the leader stayed in ELR %v", c.name, next.ELR)
		}
		if kind == ElectionUnclean && len(next.ELR) != 0 {
			t.Errorf("%s: unclean election kept ELR %v", c.name, next.ELR)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []int32) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal([]int32(a), []int32(b)) })

// TestLastReplicaStanding is KIP-966's motivating case, with RF 3 and
// min.insync.replicas 2: the ISR shrinks to one member, which then shuts down
// uncleanly. Without ELR the only electable replica is the one that lost
// data; with ELR the replica that left the ISR last, clean, is elected.
func TestLastReplicaStanding(t *testing.T) {
	s := state(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2, 3})
	s = ChangeISR(s, []int32{1, 2}, nil, elrOn) // 3 falls behind
	s = ChangeISR(s, []int32{1}, nil, elrOn)    // 2 falls behind: HW frozen from here
	s = ChangeISR(s, nil, nil, elrOn)           // leader 1 fenced
	s, _ = Elect(s, elrOn, alive(2, 3))
	if s.LeaderID != 2 {
		t.Fatalf("ELR %v: elected %d, want 2 (in the ISR when the HW froze)", s.ELR, s.LeaderID)
	}
	// Had 1 stayed alone and come back after losing unflushed data:
	u := state(NoLeader, 1, 3, []int32{1, 2, 3}, nil)
	u.ELR = []int32{1, 2}
	u, changed := RecordUncleanShutdown(u, 1)
	if !changed || !cmp.Equal(u.ELR, []int32{2}) {
		t.Fatalf("after 1's unclean shutdown: ELR %v, want [2]", u.ELR)
	}
	if u, _ = Elect(u, elrOn, alive(1, 3)); u.LeaderID != NoLeader {
		t.Errorf("elected %d with only the unclean 1 and the never-eligible 3 alive, want none", u.LeaderID)
	}
}

// TestElectFromLastKnownELR: over the fault budget every replica that held
// the committed records restarted after an unclean shutdown, so ISR and ELR
// are empty. The partition must not stay offline forever (CLARIFICATIONS.md,
// the fault budget): the first live member of LastKnownELR in assignment
// order leads, as Kafka 4.x elects its last known leader. It holds as much
// as anyone left can; records it lost are lost.
func TestElectFromLastKnownELR(t *testing.T) {
	// RF 1: the only replica was fenced, then restarted uncleanly.
	one := state(1, 3, 5, []int32{1}, []int32{1})
	one = ChangeISR(one, nil, nil, ELRPolicy{MinInsyncReplicas: 1, ELREnabled: true})
	one, _ = Elect(one, elrOn, alive())
	one, _ = RecordUncleanShutdown(ChangeISR(one, nil, []int32{1}, elrOn), 1)
	if len(one.ISR) != 0 || len(one.ELR) != 0 || !cmp.Equal(one.LastKnownELR, []int32{1}) || one.LeaderID != NoLeader {
		t.Fatalf("RF 1 after an unclean restart: %+v, want no leader, empty ISR and ELR, last known ELR [1]", one)
	}
	if s, kind := Elect(one, elrOn, alive()); kind != ElectionNoLeader || s.LeaderID != NoLeader {
		t.Errorf("while 1 is fenced: leader %d kind %d, want none", s.LeaderID, kind)
	}
	s, kind := Elect(one, elrOn, alive(1))
	if kind != ElectionLastKnownELR || s.LeaderID != 1 || !cmp.Equal(s.ISR, []int32{1}) || len(s.LastKnownELR) != 0 || s.LeaderEpoch != one.LeaderEpoch+1 {
		t.Errorf("1 unfenced: %+v kind %d, want leader 1 with ISR [1], last known ELR cleared, new leader epoch", s, kind)
	}

	// RF 3: 3 never held the committed records; 1 and 2 did and both lost
	// their unflushed tails. 3 alone alive must not lead; 2 alive leads.
	lost := PartitionState{LeaderID: NoLeader, LeaderEpoch: 7, PartitionEpoch: 9, Replicas: []int32{3, 2, 1}, LastKnownELR: []int32{1, 2}}
	if s, _ := Elect(lost, elrOn, alive(3)); s.LeaderID != NoLeader {
		t.Errorf("only 3 alive: elected %d, want none (3 is not in the last known ELR)", s.LeaderID)
	}
	if s, kind := Elect(lost, elrOn, alive(1, 2, 3)); s.LeaderID != 2 || kind != ElectionLastKnownELR || !cmp.Equal(s.LastKnownELR, []int32{1}) {
		t.Errorf("all alive: leader %d kind %d last known %v, want 2 (assignment order), last known [1]", s.LeaderID, kind, s.LastKnownELR)
	}
	// While an ELR member may still come back, the last known ELR waits.
	waiting := lost
	waiting.ELR = []int32{3}
	if s, _ := Elect(waiting, elrOn, alive(1, 2)); s.LeaderID != NoLeader {
		t.Errorf("ELR [3] fenced: elected %d from the last known ELR, want none until the ELR is empty", s.LeaderID)
	}
	// Without ELR the controller keeps the last ISR member in the ISR
	// instead, so this path is ELR's only.
	if s, _ := Elect(lost, ELRPolicy{MinInsyncReplicas: 2}, alive(1, 2)); s.LeaderID != NoLeader {
		t.Errorf("ELR disabled: elected %d, want none", s.LeaderID)
	}
}
