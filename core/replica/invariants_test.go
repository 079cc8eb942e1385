package replica

import (
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
		}, "ISR [1 2 4] holds 4, not in replicas"},
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
