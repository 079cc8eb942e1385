package replica

import (
	"slices"
	"strings"
	"testing"
)

// TestInvariantsStopTheInputThatBreaksThem: each broken rule of
// checkInvariants panics at the next input, naming the rule.
func TestInvariantsStopTheInputThatBreaksThem(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(l *node)
		want   string
	}{
		{"waiter behind the HW", func(l *node) {
			l.p.acks.waiters = append(l.p.acks.waiters, ackWaiter{requestID: 7, requiredOffset: l.p.hw, deadlineMs: 1000})
		}, "still waits for offset"},
		{"unassigned follower tracked", func(l *node) {
			l.p.leader.followers = append(l.p.leader.followers, freshProgress(9, false, 0))
		}, "tracks 3 followers"},
		{"proposal without the leader", func(l *node) {
			l.p.leader.proposal = &proposal{request: AlterPartitionRequest{LeaderEpoch: 1, NewISR: []int32{2}, BrokerEpochs: []int64{-1}}}
		}, "lacks the leader"},
		{"ISR outside the replicas", func(l *node) {
			l.p.state.ISR = []int32{1, 2, 4}
		}, "applied state is invalid"},
		{"negative HW", func(l *node) {
			l.p.hw = -1
		}, "high watermark -1 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newNode(1, nil, 0, testConfig(1))
			l.apply(state(1, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}), 0)
			c.break_(l)
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, c.want) {
					t.Fatalf("panic %q, want one containing %q", r, c.want)
				}
			}()
			l.p.ExpireAcks(0)
		})
	}
}

// TestFollowerKeepsNoLeaderState: a follower holding leader state or acks
// waiters is caught.
func TestFollowerKeepsNoLeaderState(t *testing.T) {
	f := newNode(2, nil, 0, testConfig(2))
	f.apply(state(1, 1, 1, []int32{1, 2}, []int32{1, 2}), 0)
	f.p.acks.waiters = []ackWaiter{{requestID: 1, requiredOffset: 5}}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "wait on a follower") {
			t.Fatalf("panic %q, want the follower's waiters named", msg)
		}
	}()
	f.p.OnFollowerAppend(0)
}

// TestCommittedExpansionTakesTheReplicaOutOfTheELR: an AlterPartition
// answer that adds an ELR member to the ISR leaves it only in the ISR
// (KIP-966), as the controller's record does. Before, the replica stayed
// in both sets until the next pushed state.
func TestCommittedExpansionTakesTheReplicaOutOfTheELR(t *testing.T) {
	cfg := testConfig(1)
	cfg.MinInsyncReplicas = 1
	l := newNode(1, nil, 0, cfg)
	s := state(1, 1, 1, []int32{1, 2}, []int32{1})
	s.ELR = []int32{2}
	l.apply(s, 0)
	f := newNode(2, nil, 0, cfg)
	f.apply(s, 0)
	fetchOnce(f, l, 1)
	req, ok := l.p.PendingAlterPartition()
	if !ok || !slices.Equal(req.NewISR, []int32{1, 2}) {
		t.Fatalf("pending proposal %+v (%v), want ISR [1 2]", req, ok)
	}
	must(t, l.p.OnAlterPartitionResponse(AlterPartitionResponse{ProposalID: req.ProposalID, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2}}, 2))
	if got := l.p.State(); !slices.Equal(got.ISR, []int32{1, 2}) || len(got.ELR) != 0 {
		t.Fatalf("state after the expansion: ISR %v ELR %v, want ISR [1 2] and no ELR", got.ISR, got.ELR)
	}
}

// TestDuplicateWaiterCompletesWhenTheHWPassesItsBatch: an idempotent
// retry of a batch the log holds (the broker reports the batch's original
// offsets) waits behind later appends' waiters only as long as the HW has
// not passed its own batch. Before, waiters were kept in arrival order and
// the duplicate waited for the HW to pass every earlier-arrived waiter.
func TestDuplicateWaiterCompletesWhenTheHWPassesItsBatch(t *testing.T) {
	l := newNode(1, nil, 0, testConfig(1))
	f := newNode(2, nil, 0, testConfig(2))
	s := state(1, 1, 1, []int32{1, 2}, []int32{1, 2})
	l.apply(s, 0)
	f.apply(s, 0)
	must(t, l.produce(AcksAll, 1, 0, 1000, "a0", "a1", "a2", "a3", "a4"))
	fetchOnce(f, l, 1) // the follower copies offsets 0-4
	must(t, l.produce(AcksAll, 2, 1, 1000, "b5", "b6", "b7", "b8", "b9"))
	must(t, l.p.OnLeaderAppend(LeaderAppend{LastOffset: 4, Acks: AcksAll, RequestID: 3, DeadlineMs: 1000}, 2)) // a retry of batch a
	l.p.TakeAckResults()
	fetchOnce(f, l, 3) // fetches from 5: HW 5
	if hw := l.p.HighWatermark(); hw != 5 {
		t.Fatalf("HW %d, want 5", hw)
	}
	var done []uint64
	for _, r := range l.p.TakeAckResults() {
		done = append(done, r.RequestID)
	}
	if !slices.Equal(done, []uint64{1, 3}) {
		t.Fatalf("completed %v at HW 5, want [1 3]: the retry of batch a waits for offset 5 only", done)
	}
}
