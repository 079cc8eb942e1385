package replica

import (
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	good := testConfig(1)
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"ReplicaID", func(c *Config) { c.ReplicaID = -1 }},
		{"MinInsyncReplicas", func(c *Config) { c.MinInsyncReplicas = 0 }},
		{"ReplicaLagTimeMaxMs", func(c *Config) { c.ReplicaLagTimeMaxMs = 0 }},
		{"AckWaitersMax", func(c *Config) { c.AckWaitersMax = 0 }},
	}
	for _, c := range cases {
		cfg := good
		c.edit(&cfg)
		if _, err := New(cfg, &fakeLog{}, 0); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("bad %s: error %v, want one naming the field", c.field, err)
		}
	}
	if _, err := New(good, nil, 0); err == nil {
		t.Errorf("nil log accepted")
	}
}

func TestNewClampsHighWatermarkCheckpoint(t *testing.T) {
	log := &fakeLog{start: 3}
	log.append(0, "a", "b")
	for _, c := range []struct{ checkpoint, want int64 }{{0, 3}, {4, 4}, {9, 5}} {
		p, err := New(testConfig(1), log, c.checkpoint)
		must(t, err)
		if p.HighWatermark() != c.want {
			t.Errorf("checkpoint %d: HW %d, want %d", c.checkpoint, p.HighWatermark(), c.want)
		}
	}
}

func TestPartitionStateValidation(t *testing.T) {
	cases := []struct {
		name string
		s    PartitionState
		want string
	}{
		{"no replicas", PartitionState{LeaderID: NoLeader}, "Replicas is empty"},
		{"duplicate replica", state(1, 0, 0, []int32{1, 1}, []int32{1}), "repeats"},
		{"ISR outside replicas", state(1, 0, 0, []int32{1, 2}, []int32{1, 3}), "not in Replicas"},
		{"leader outside ISR", state(2, 0, 0, []int32{1, 2}, []int32{1}), "not in ISR"},
		{"ELR overlaps ISR", PartitionState{LeaderID: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, ELR: []int32{1}}, "both ISR"},
		{"self not a replica", state(2, 0, 0, []int32{2, 3}, []int32{2}), "must stop hosting"},
		{"negative epoch", state(1, -2, 0, []int32{1}, []int32{1}), "negative epoch"},
	}
	for _, c := range cases {
		n := newNode(1, nil, 0, testConfig(1))
		if _, err := n.p.ApplyState(c.s, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if n.p.Role() != RoleNone {
			t.Errorf("%s: a rejected state changed the role to %s", c.name, n.p.Role())
		}
	}
}

func TestStaleStatesRejected(t *testing.T) {
	n := newNode(1, nil, 0, testConfig(1))
	n.apply(state(1, 3, 7, []int32{1, 2}, []int32{1, 2}), 0)
	for _, s := range []PartitionState{
		state(2, 3, 6, []int32{1, 2}, []int32{2}), // older partition epoch
		state(2, 2, 8, []int32{1, 2}, []int32{2}), // older leader epoch
	} {
		if _, err := n.p.ApplyState(s, 1); err == nil || !strings.Contains(err.Error(), "stale") {
			t.Errorf("state %+v: error %v, want stale", s, err)
		}
		if n.p.Role() != RoleLeader || n.p.LeaderEpoch() != 3 {
			t.Errorf("a stale state changed the partition: role %s epoch %d", n.p.Role(), n.p.LeaderEpoch())
		}
	}
	// An equal partition epoch is accepted (an AlterPartition response may
	// have reached it first) and is not a new leader epoch.
	tr, err := n.p.ApplyState(state(1, 3, 7, []int32{1, 2}, []int32{1, 2}), 2)
	if err != nil || tr.NewLeaderEpoch || tr.Role != RoleLeader {
		t.Errorf("re-delivered state: %+v %v, want accepted, same epoch", tr, err)
	}
}

func TestTransitions(t *testing.T) {
	n := newNode(2, &fakeLog{}, 1, testConfig(2))
	n.log.append(0, "a", "b", "c")
	n.p.hw = 1
	tr := n.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0)
	if tr != (Transition{Role: RoleFollower, NewLeaderEpoch: true, TruncateToOffset: NoOffset}) {
		t.Errorf("first state as follower: %+v", tr)
	}
	if n.log.LogEndOffset() != 3 {
		t.Errorf("becoming follower truncated the log to %d; only divergence may truncate", n.log.LogEndOffset())
	}
	tr = n.apply(state(2, 1, 1, []int32{1, 2}, []int32{1, 2}), 1)
	if tr != (Transition{Role: RoleLeader, NewLeaderEpoch: true, TruncateToOffset: NoOffset}) || n.p.leader.epochStartOffset != 3 {
		t.Errorf("elected: %+v, epoch start %d; want leader from offset 3", tr, n.p.leader.epochStartOffset)
	}
	tr = n.apply(state(NoLeader, 2, 2, []int32{1, 2}, []int32{1, 2}), 2)
	if tr.Role != RoleFollower {
		t.Errorf("leaderless state: role %s, want follower", tr.Role)
	}
	if _, _, ok := n.p.NextFetch(); ok {
		t.Errorf("a follower without a leader fetches")
	}
}

func TestHWTruncationBugTruncatesOnNewEpoch(t *testing.T) {
	cfg := testConfig(2)
	cfg.Bugs.HWTruncation = true
	log := &fakeLog{}
	log.append(0, "a", "b", "c")
	n := newNode(2, log, 1, cfg)
	if tr := n.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0); tr.TruncateToOffset != 1 {
		t.Errorf("hw-truncation: %+v, want truncation to HW 1", tr)
	}
	if _, req, _ := n.p.NextFetch(); req.LastFetchedEpoch != NoEpoch {
		t.Errorf("hw-truncation: fetch carries last fetched epoch %d, want none", req.LastFetchedEpoch)
	}
}

func TestNoFencingBugKeepsDeposedLeader(t *testing.T) {
	cfg := testConfig(1)
	cfg.Bugs.NoFencing = true
	n := newNode(1, nil, 0, cfg)
	n.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0)
	n.apply(state(2, 1, 1, []int32{1, 2}, []int32{2}), 1)
	if _, err := n.p.AdmitProduce(AcksLeader); err != nil || n.p.Role() != RoleLeader {
		t.Errorf("no-fencing: deposed leader role %s, produce %v; want it still accepting writes", n.p.Role(), err)
	}
}

// TestLogBelowHighWatermarkIsClamped is sim finding F2: a log that ends
// below the HW this replica holds (a power loss dropped an unsynced tail,
// or a failed truncation left the log short) must clamp the HW, as Kafka's
// min(checkpoint, LEO), and never panic: the log's length came from disk.
func TestLogBelowHighWatermarkIsClamped(t *testing.T) {
	for _, c := range []struct {
		name   string
		leader int32
	}{{"leader", 1}, {"follower", 2}, {"leaderless", NoLeader}} {
		t.Run(c.name, func(t *testing.T) {
			log := &fakeLog{}
			log.appendN(0, 10, "r")
			n := newNode(1, log, 10, testConfig(1))
			if n.p.HighWatermark() != 10 {
				t.Fatalf("HW %d, want the checkpoint 10", n.p.HighWatermark())
			}
			log.truncateTo(9) // the log shrank under the replica
			isr := []int32{1, 2}
			if c.leader == NoLeader {
				isr = []int32{1}
			}
			n.apply(state(c.leader, 1, 1, []int32{1, 2}, isr), 0)
			if got := n.p.HighWatermark(); got != 9 {
				t.Errorf("HW %d after the log shrank to 9, want 9", got)
			}
		})
	}
}

// TestLeaderLogShrinkingUnderItDoesNotPanic: a leader whose log is cut
// below its HW (a failed disk rolled back, over the fault budget) keeps
// serving with HW = LEO instead of panicking in the next HW update.
func TestLeaderLogShrinkingUnderItDoesNotPanic(t *testing.T) {
	cfg := testConfig(0)
	cfg.MinInsyncReplicas = 1
	l := newNode(1, nil, 0, cfg)
	f := newNode(2, nil, 0, cfg)
	s := state(1, 0, 0, []int32{1, 2}, []int32{1, 2})
	l.apply(s, 0)
	f.apply(s, 0)
	must(t, l.produce(AcksLeader, 1, 0, 0, "a", "b", "c"))
	fetchOnce(f, l, 1)
	fetchOnce(f, l, 2)
	if l.p.HighWatermark() != 3 {
		t.Fatalf("HW %d, want 3", l.p.HighWatermark())
	}
	l.log.truncateTo(1)
	f.log.truncateTo(1)
	fetchOnce(f, l, 3)
	if got := l.p.HighWatermark(); got != 1 {
		t.Errorf("HW %d after the leader's log shrank to 1, want 1", got)
	}
}
