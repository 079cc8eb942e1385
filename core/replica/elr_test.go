package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

var elrOn = ELRPolicy{MinInsyncReplicas: 2, ELREnabled: true}

func alive(ids ...int32) func(int32) bool {
	return func(id int32) bool { return containsID(ids, id) }
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
