package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFormerLeaderEndingAtLeadersEnd is sim finding F9's scenario: the
// epoch-0 leader appended a producer's retry at offset 2 that never
// committed, lost leadership, and restarted; the epoch-1 leader took the
// same record again at offset 2 in epoch 1 and committed it. The former
// leader's log now ends where the leader's does (and at its HW), with the
// same value at 2, but in another epoch. Its first fetch (FetchOffset =
// the leader's LEO) must still get DivergingEpoch and truncate, and the
// leader must not take it into the ISR before its log matches.
func TestFormerLeaderEndingAtLeadersEnd(t *testing.T) {
	cfg := testConfig(0)
	leader, follower := newNode(1, &fakeLog{}, 0, cfg), newNode(2, &fakeLog{}, 0, cfg)
	old := &fakeLog{}
	for _, l := range []*fakeLog{leader.log, follower.log, old} {
		l.append(0, "m0", "m1")
	}
	old.append(0, "retry") // appended by the epoch-0 leader, never replicated
	s1 := state(1, 1, 1, []int32{1, 2, 3}, []int32{1, 2})
	leader.apply(s1, 0)
	follower.apply(s1, 0)
	must(t, leader.produce(AcksAll, 1, 0, 1000, "retry"))
	for now := int64(1); now <= 3; now++ {
		fetchOnce(follower, leader, now)
	}
	if leader.p.HighWatermark() != 3 {
		t.Fatalf("leader HW %d, want 3", leader.p.HighWatermark())
	}
	formerLeader := newNode(3, old, 2, cfg) // restarted with HW checkpoint 2
	formerLeader.apply(s1, 4)
	if formerLeader.log.LogEndOffset() != leader.log.LogEndOffset() {
		t.Fatalf("setup: former leader's LEO %d, leader's %d; want them equal", formerLeader.log.LogEndOffset(), leader.log.LogEndOffset())
	}
	d, act, ok := fetchOnce(formerLeader, leader, 5)
	if !ok || !d.Diverging || d.DivergingEpoch != (EpochEndOffset{Epoch: 0, EndOffset: 2}) {
		t.Fatalf("first fetch from the leader's LEO: leader answered %+v (sent %v), want DivergingEpoch{0, 2}", d, ok)
	}
	if act.Kind != ActionTruncate || act.Offset != 2 {
		t.Fatalf("follower action %+v, want truncate to 2", act)
	}
	if req, pending := leader.p.PendingAlterPartition(); pending {
		t.Fatalf("leader proposed ISR %v on a diverging fetch", req.NewISR)
	}
	for now := int64(6); now <= 8; now++ {
		fetchOnce(formerLeader, leader, now)
	}
	if diff := cmp.Diff(leader.log.entries, formerLeader.log.entries, cmp.AllowUnexported(entry{})); diff != "" {
		t.Fatalf("former leader's log differs (-leader +former leader):\n%s", diff)
	}
	req, pending := leader.p.PendingAlterPartition()
	if !pending || !cmp.Equal(req.NewISR, []int32{1, 2, 3}) {
		t.Fatalf("after the former leader caught up: proposal %+v (pending %v), want ISR [1 2 3]", req, pending)
	}
}
