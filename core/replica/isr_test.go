package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cluster3 is leader 1 with followers 2 and 3 over replicas {1,2,3}.
func cluster3(cfg Config, isr []int32) (l, f2, f3 *node) {
	l, f2, f3 = newNode(1, nil, 0, cfg), newNode(2, nil, 0, cfg), newNode(3, nil, 0, cfg)
	s := state(1, 0, 0, []int32{1, 2, 3}, isr)
	for _, n := range []*node{l, f2, f3} {
		n.apply(s, 0)
	}
	return l, f2, f3
}

// answer commits or refuses the pending proposal as a controller would.
func answer(t *testing.T, l *node, code int16, nowMs int64) *AlterPartitionRequest {
	t.Helper()
	req, ok := l.p.PendingAlterPartition()
	if !ok {
		t.Fatalf("no AlterPartition to send")
	}
	resp := AlterPartitionResponse{ProposalID: req.ProposalID, Error: code, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, ISR: req.NewISR}
	must(t, l.p.OnAlterPartitionResponse(resp, nowMs))
	return req
}

// TestCaughtUpRuleForTrailingFollower is Kafka's case for the second clause
// of the caught-up rule: a follower always one produce behind the LEO, but
// at least at the LEO the leader had at its previous fetch, stays caught up.
func TestCaughtUpRuleForTrailingFollower(t *testing.T) {
	f := freshProgress(2, true, 0)
	leo := int64(0)
	for now := int64(100); now <= 1000; now += 100 {
		leo++                      // one produce arrives before each fetch
		f.onFetch(leo-1, leo, now) // the follower fetches from the previous LEO
		if now > 100 && f.lastCaughtUpTimeMs != now-100 {
			t.Fatalf("at %d: lastCaughtUpTimeMs %d, want the previous fetch time %d", now, f.lastCaughtUpTimeMs, now-100)
		}
	}
	if !f.caughtUp(leo, 1000, 150) {
		t.Errorf("trailing follower not caught up")
	}
	stuck := freshProgress(3, true, 0)
	stuck.onFetch(0, 5, 100)
	stuck.onFetch(0, 6, 200) // never reaches any earlier leader LEO
	if stuck.lastCaughtUpTimeMs != 0 || stuck.caughtUp(6, 200, 150) {
		t.Errorf("stuck follower: lastCaughtUpTimeMs %d, caught up %v; want 0 and false", stuck.lastCaughtUpTimeMs, stuck.caughtUp(6, 200, 150))
	}
	if never := freshProgress(4, false, 0); never.caughtUp(1, 0, 150) {
		t.Errorf("a follower that never fetched counts as caught up at time 0")
	}
}

func TestShrinkAfterLagThenCommit(t *testing.T) {
	cfg := testConfig(0)
	l, f2, _ := cluster3(cfg, []int32{1, 2, 3})
	must(t, l.produce(AcksLeader, 1, 0, 0, "a"))
	for now := int64(1000); now <= 10_000; now += 1000 {
		fetchOnce(f2, l, now) // follower 3 never fetches
		if l.p.MaybeShrinkISR(now) {
			t.Fatalf("shrank at %d, within replica.lag.time.max.ms", now)
		}
	}
	if l.p.HighWatermark() != 0 {
		t.Fatalf("HW %d while ISR member 3 has fetched nothing, want 0", l.p.HighWatermark())
	}
	fetchOnce(f2, l, 10_001)
	if !l.p.MaybeShrinkISR(10_001) {
		t.Fatalf("no shrink after replica.lag.time.max.ms")
	}
	if l.p.HighWatermark() != 0 {
		t.Errorf("HW %d during the pending shrink, want 0: the shrink is not committed", l.p.HighWatermark())
	}
	req := answer(t, l, 0, 10_002)
	if !cmp.Equal(req.NewISR, []int32{1, 2}) {
		t.Errorf("proposed ISR %v, want [1 2]", req.NewISR)
	}
	if got := l.p.State(); !cmp.Equal(got.ISR, []int32{1, 2}) || got.PartitionEpoch != 1 {
		t.Errorf("after commit: ISR %v partition epoch %d, want [1 2] and 1", got.ISR, got.PartitionEpoch)
	}
	if l.p.HighWatermark() != 1 {
		t.Errorf("HW %d after the shrink committed, want 1", l.p.HighWatermark())
	}
}

// TestExpandNeedsEpochStartOffset is KAFKA-7128: a new leader's HW may lag
// the true committed offset, so a follower joins the ISR only once its LEO
// reaches this leader epoch's start offset, not merely the HW.
func TestExpandNeedsEpochStartOffset(t *testing.T) {
	cfg := testConfig(0)
	cfg.MinInsyncReplicas = 1
	log := &fakeLog{}
	log.appendN(0, 10, "old")
	l := newNode(1, log, 4, cfg) // HW checkpoint 4, LEO 10
	l.apply(state(1, 1, 1, []int32{1, 2}, []int32{1}), 0)
	f := newNode(2, &fakeLog{}, 0, cfg)
	f.log.entries = log.slice(0, 6)
	f.apply(state(1, 1, 1, []int32{1, 2}, []int32{1}), 0)
	fetchOnce(f, l, 1) // follower at 6 >= HW but < epoch start 10; then appends to 10
	if _, ok := l.p.PendingAlterPartition(); ok {
		t.Fatalf("expansion proposed with follower LEO 6 below the epoch start offset 10")
	}
	fetchOnce(f, l, 2) // now at 10
	req, ok := l.p.PendingAlterPartition()
	if !ok || !cmp.Equal(req.NewISR, []int32{1, 2}) {
		t.Fatalf("after reaching the epoch start: proposal %v %v, want ISR [1 2]", req, ok)
	}
}

func TestOneProposalInFlight(t *testing.T) {
	cfg := testConfig(0)
	cfg.MinInsyncReplicas = 1
	l, f2, f3 := cluster3(cfg, []int32{1})
	fetchOnce(f2, l, 1)
	fetchOnce(f3, l, 1)
	req, ok := l.p.PendingAlterPartition()
	if !ok || !cmp.Equal(req.NewISR, []int32{1, 2}) {
		t.Fatalf("first proposal %v %v, want ISR [1 2]", req, ok)
	}
	if _, again := l.p.PendingAlterPartition(); again {
		t.Errorf("the same proposal was handed out twice")
	}
	if l.p.MaybeShrinkISR(1_000_000) {
		t.Errorf("a shrink was proposed while an expansion is in flight")
	}
	// A retriable error hands the same proposal out again.
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: req.ProposalID, Error: codeRequestTimedOut}, 2))
	again, ok := l.p.PendingAlterPartition()
	if !ok || again.ProposalID != req.ProposalID {
		t.Fatalf("after a retriable error: %v %v, want proposal %d again", again, ok, req.ProposalID)
	}
	// INELIGIBLE_REPLICA: back to the committed state, free to propose anew.
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: req.ProposalID, Error: codeIneligibleReplica}, 3))
	fetchOnce(f3, l, 4)
	next, ok := l.p.PendingAlterPartition()
	if !ok || next.ProposalID == req.ProposalID || !cmp.Equal(next.NewISR, []int32{1, 3}) {
		t.Fatalf("after INELIGIBLE_REPLICA: %v %v, want a new proposal with ISR [1 3]", next, ok)
	}
	// FENCED_LEADER_EPOCH: stays pending, not resent, until a pushed state.
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: next.ProposalID, Error: codeFencedLeaderEpoch}, 5))
	fetchOnce(f2, l, 6)
	if _, ok := l.p.PendingAlterPartition(); ok {
		t.Errorf("a proposal was handed out while a fenced one is pending")
	}
	l.apply(state(1, 0, 1, []int32{1, 2, 3}, []int32{1}), 7)
	fetchOnce(f2, l, 8)
	if _, ok := l.p.PendingAlterPartition(); !ok {
		t.Errorf("no proposal after the pushed state cleared the fenced one")
	}
}

func TestIgnoredAlterPartitionResponses(t *testing.T) {
	cfg := testConfig(0)
	l, f2, _ := cluster3(cfg, []int32{1, 3})
	fetchOnce(f2, l, 1)
	req, _ := l.p.PendingAlterPartition()
	for _, resp := range []AlterPartitionResponse{
		{ProposalID: req.ProposalID + 7, LeaderEpoch: 0, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}, // not ours
		{ProposalID: req.ProposalID, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2, 3}},     // other leader epoch
	} {
		must(t, l.p.OnAlterPartitionResponse(resp, 2))
		if got := l.p.State().ISR; !cmp.Equal(got, []int32{1, 3}) {
			t.Errorf("response %+v changed the ISR to %v", resp, got)
		}
	}
	bad := AlterPartitionResponse{ProposalID: req.ProposalID, LeaderEpoch: 0, PartitionEpoch: 1, ISR: []int32{1, 2, 9}}
	if err := l.p.OnAlterPartitionResponse(bad, 3); err == nil {
		t.Errorf("an ISR outside the replicas was accepted")
	}
}

// TestPendingExpansionHoldsHighWatermark: while an expansion is pending the
// HW counts the replica being added (the maximal ISR, KIP-497).
func TestPendingExpansionHoldsHighWatermark(t *testing.T) {
	cfg := testConfig(0)
	cfg.MinInsyncReplicas = 1
	cfg.ReplicaLagTimeMaxMs = 10 // so the caught-up rule alone would not hold the HW
	l, f2, _ := cluster3(cfg, []int32{1, 3})
	fetchOnce(f2, l, 1) // f2 at 0 = HW: expansion proposed
	if _, ok := l.p.PendingAlterPartition(); !ok {
		t.Fatalf("no expansion proposed")
	}
	must(t, l.produce(AcksLeader, 1, 100, 0, "a", "b"))
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 2, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 100)
	if got := l.p.HighWatermark(); got != 0 {
		t.Errorf("HW %d with pending member 2 at LEO 0, want 0", got)
	}
}

func TestHighWatermarkFrozenUnderMinISR(t *testing.T) {
	cfg := testConfig(0) // min.insync.replicas 2
	l, f2, _ := cluster3(cfg, []int32{1})
	must(t, l.produce(AcksLeader, 1, 0, 0, "a", "b"))
	fetchOnce(f2, l, 1)
	fetchOnce(f2, l, 2)
	if got := l.p.HighWatermark(); got != 0 {
		t.Fatalf("HW %d with ISR [1] under min.insync.replicas 2, want 0", got)
	}
	answer(t, l, 0, 3) // ISR {1,2} committed
	if got := l.p.HighWatermark(); got != 2 {
		t.Errorf("HW %d once the ISR reached min.insync.replicas, want 2", got)
	}
}

// TestIneligibleReplicaNotReproposed: after INELIGIBLE_REPLICA the leader
// does not propose that replica again until the controller pushes a state,
// and every proposal carries the broker epochs it saw (KIP-903).
func TestIneligibleReplicaNotReproposed(t *testing.T) {
	cfg := testConfig(0)
	cfg.BrokerEpoch = 70
	l, _, _ := cluster3(cfg, []int32{1, 3})
	fetch := FetchRequest{ReplicaID: 2, ReplicaEpoch: 81, FetchOffset: 0, CurrentLeaderEpoch: 0, LastFetchedEpoch: NoEpoch}
	l.p.OnFollowerFetch(fetch, 1)
	req, ok := l.p.PendingAlterPartition()
	if !ok || !cmp.Equal(req.NewISR, []int32{1, 2, 3}) || !cmp.Equal(req.BrokerEpochs, []int64{70, 81, -1}) {
		t.Fatalf("proposal %+v %v, want ISR [1 2 3] with broker epochs [70 81 -1]", req, ok)
	}
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: req.ProposalID, Error: codeIneligibleReplica}, 2))
	l.p.OnFollowerFetch(fetch, 3)
	if again, ok := l.p.PendingAlterPartition(); ok {
		t.Fatalf("replica 2 proposed again after INELIGIBLE_REPLICA: %+v", again)
	}
	l.apply(state(1, 0, 1, []int32{1, 2, 3}, []int32{1, 3}), 4)
	l.p.OnFollowerFetch(fetch, 5)
	if _, ok := l.p.PendingAlterPartition(); !ok {
		t.Errorf("replica 2 not proposed after a pushed state")
	}
}

// TestRefusedReplicaProposedAgainAfterRetry is simulator seed 205
// (elections shape): the controller refused an expansion with
// INELIGIBLE_REPLICA because the follower had just re-registered fenced;
// the leader's image only ever showed it usable (registration and
// unfencing arrived in one metadata batch), and nothing changed the
// partition afterwards, so no state was pushed. The leader must propose the
// caught-up follower again once refusedReplicaRetryMs has passed, and not
// before.
func TestRefusedReplicaProposedAgainAfterRetry(t *testing.T) {
	l, f2, _ := cluster3(testConfig(0), []int32{1, 3})
	must(t, l.produce(1, 1, 0, 1000, "a"))
	fetchOnce(f2, l, 1)
	req, ok := l.p.PendingAlterPartition()
	if !ok || !cmp.Equal(req.NewISR, []int32{1, 2, 3}) {
		t.Fatalf("proposal %+v %v, want ISR [1 2 3]", req, ok)
	}
	const refusedAtMs = 2
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: req.ProposalID, Error: codeIneligibleReplica}, refusedAtMs))
	for _, now := range []int64{refusedAtMs + 1, refusedAtMs + refusedReplicaRetryMs - 1} {
		fetchOnce(f2, l, now)
		if again, ok := l.p.PendingAlterPartition(); ok {
			t.Fatalf("at %d ms, %d ms after the refusal: replica 2 proposed again: %+v", now, now-refusedAtMs, again)
		}
	}
	fetchOnce(f2, l, refusedAtMs+refusedReplicaRetryMs)
	again, ok := l.p.PendingAlterPartition()
	if !ok || again.ProposalID == req.ProposalID || !cmp.Equal(again.NewISR, []int32{1, 2, 3}) {
		t.Fatalf("%d ms after the refusal, with no pushed state: %+v %v; want a new proposal with ISR [1 2 3]", refusedReplicaRetryMs, again, ok)
	}
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: again.ProposalID, LeaderEpoch: 0, PartitionEpoch: 1, ISR: again.NewISR}, refusedAtMs+refusedReplicaRetryMs+1))
	if isr := l.p.State().ISR; !cmp.Equal(isr, []int32{1, 2, 3}) {
		t.Errorf("ISR %v after the controller accepted, want [1 2 3]", isr)
	}
}

// TestFencedReplicaOutsideISRDoesNotHoldHighWatermark: a follower crashes
// while caught up; the controller fences it and pushes an ISR without it.
// Kafka's maybeIncrementLeaderHW holds the HW for a caught-up replica
// outside the ISR only while it is ISR-eligible (isReplicaIsrEligible: not
// fenced, not shutting down), so once the leader learns of the fencing the
// HW advances at once instead of stalling acks=all until the crashed
// replica's replica.lag.time.max.ms runs out.
func TestFencedReplicaOutsideISRDoesNotHoldHighWatermark(t *testing.T) {
	cfg := testConfig(0) // min.insync.replicas 2, replica.lag.time.max.ms 10 s
	l, f2, f3 := cluster3(cfg, []int32{1, 2, 3})
	fetchOnce(f2, l, 1)
	fetchOnce(f3, l, 1)                                         // 3 is caught up at time 1, then crashes
	l.apply(state(1, 0, 1, []int32{1, 2, 3}, []int32{1, 2}), 2) // the controller fenced 3
	must(t, l.produce(AcksAll, 7, 3, 5_000, "a"))
	fetchOnce(f2, l, 4)
	fetchOnce(f2, l, 5)
	if got := l.p.HighWatermark(); got != 0 {
		t.Fatalf("HW %d: a caught-up, still eligible replica outside the ISR must hold it (Kafka's shouldWaitForReplicaToJoinIsr), want 0", got)
	}
	l.p.SetIneligibleReplicas([]int32{3}, 6)
	if got := l.p.HighWatermark(); got != 1 {
		t.Fatalf("HW %d after replica 3 was fenced, want 1: only ISR members and eligible replicas hold it", got)
	}
	if res := l.p.TakeAckResults(); len(res) != 1 || res[0].RequestID != 7 || res[0].Error != codeNone {
		t.Errorf("ack results %+v, want request 7 acknowledged", res)
	}
	// A fenced replica is not proposed for the ISR either, even when it
	// fetches (a late fetch from before the crash).
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 1, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 7)
	if req, ok := l.p.PendingAlterPartition(); ok {
		t.Fatalf("fenced replica proposed: %+v", req)
	}
	// Unfenced again (a pushed state does not reset the set): proposed.
	l.apply(state(1, 0, 2, []int32{1, 2, 3}, []int32{1, 2}), 8)
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 1, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 9)
	if _, ok := l.p.PendingAlterPartition(); ok {
		t.Fatalf("replica 3 proposed while the image still says it is fenced")
	}
	l.p.SetIneligibleReplicas(nil, 10)
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 1, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 11)
	if req, ok := l.p.PendingAlterPartition(); !ok || !cmp.Equal(req.NewISR, []int32{1, 2, 3}) {
		t.Errorf("after unfencing: proposal %+v %v, want ISR [1 2 3]", req, ok)
	}
}
