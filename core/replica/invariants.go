package replica

import (
	"cmp"
	"fmt"
	"slices"
)

// checkInvariants panics if the partition's state breaks a rule SPEC.md §4
// states. Every exported method that takes an input (a pushed state, a
// fetch, an append, a response, a tick) defers it, as core/log checks its
// own after every operation: a broken rule stops the run at the input that
// broke it, with the simulator's seed, instead of surfacing as a wrong
// answer much later.
//
// The rules hold under every planted bug (Bugs): a planted bug breaks a
// protocol rule the simulator's checkers must catch from what clients
// observe, never this state's own consistency.
func (p *Partition) checkInvariants() {
	// The HW is not checked against the LEO: the log may shrink under the
	// replica (a failed disk rolled back, over the fault budget), and each
	// input that moves the HW clamps it first (clampHighWatermarkToLog).
	p.assert(p.hw >= 0, "high watermark %d is negative", p.hw)
	p.assert(slices.IsSorted(p.ineligibleReplicas), "ineligible replicas %v are not sorted", p.ineligibleReplicas)
	switch p.role {
	case RoleNone:
		p.assert(p.state.LeaderEpoch == NoEpoch, "no role, yet leader epoch %d", p.state.LeaderEpoch)
		p.checkNotLeading()
	case RoleLeader:
		p.checkState()
		p.assert(p.state.LeaderID == p.cfg.ReplicaID, "leads, yet the state names leader %d", p.state.LeaderID)
		p.checkLeaderState()
	case RoleFollower:
		p.checkState()
		p.assert(p.state.LeaderID != p.cfg.ReplicaID, "follows, yet the state names this replica leader")
		p.checkNotLeading()
	default:
		p.assert(false, "unknown role %d", p.role)
	}
}

// checkState: the applied state is one ApplyState accepts (ISR and ELR
// within the replicas, disjoint, the leader in the ISR), with its sets
// sorted as clone leaves them.
func (p *Partition) checkState() {
	if err := p.state.validate(p.cfg.ReplicaID); err != nil {
		p.assert(false, "applied state is invalid: %v", err)
	}
	p.assert(slices.IsSorted(p.state.ISR), "ISR %v is not sorted", p.state.ISR)
	p.assert(slices.IsSorted(p.state.ELR), "ELR %v is not sorted", p.state.ELR)
}

// checkLeaderState: the leader tracks exactly the other assigned replicas,
// its one proposal is a well-formed ISR of its own epoch, and no acks=all
// produce waits for an offset the HW has passed.
func (p *Partition) checkLeaderState() {
	others := withoutIDs(p.state.Replicas, []int32{p.cfg.ReplicaID})
	p.assert(len(p.leader.followers) == len(others), "tracks %d followers for replicas %v", len(p.leader.followers), p.state.Replicas)
	for i, f := range p.leader.followers {
		p.assert(i < len(others) && f.replicaID == others[i], "follower progress %d out of order or unassigned (replicas %v)", f.replicaID, p.state.Replicas)
		p.assert(f.logEndOffset >= NoOffset, "follower %d has log end offset %d", f.replicaID, f.logEndOffset)
	}
	if pr := p.leader.proposal; pr != nil {
		r := pr.request
		p.assert(r.LeaderEpoch == p.state.LeaderEpoch, "proposal of leader epoch %d in epoch %d", r.LeaderEpoch, p.state.LeaderEpoch)
		p.assert(slices.IsSorted(r.NewISR), "proposed ISR %v is not sorted", r.NewISR)
		p.assert(containsID(r.NewISR, p.cfg.ReplicaID), "proposed ISR %v lacks the leader", r.NewISR)
		_, dup := firstDuplicate(r.NewISR)
		_, out := firstNotIn(r.NewISR, p.state.Replicas)
		p.assert(!dup && !out, "proposed ISR %v repeats a replica or holds one not in %v", r.NewISR, p.state.Replicas)
		p.assert(len(r.BrokerEpochs) == len(r.NewISR), "proposal has %d broker epochs for ISR %v", len(r.BrokerEpochs), r.NewISR)
	}
	if len(p.acks.waiters) > 0 {
		head := p.acks.waiters[0]
		p.assert(head.requiredOffset > p.hw, "acks=all produce %d still waits for offset %d, below HW %d", head.requestID, head.requiredOffset, p.hw)
		p.assert(slices.IsSortedFunc(p.acks.waiters, func(a, b ackWaiter) int { return cmp.Compare(a.requiredOffset, b.requiredOffset) }),
			"acks=all waiters are not sorted by required offset")
	}
}

// checkNotLeading: a replica that does not lead keeps no leader state and
// no acks=all produce waits on it (becomeFollower failed them).
func (p *Partition) checkNotLeading() {
	p.assert(p.leader.followers == nil && p.leader.proposal == nil && p.leader.refused == nil,
		"keeps leader state as %v", p.role)
	p.assert(len(p.acks.waiters) == 0, "%d acks=all produces wait on a %v", len(p.acks.waiters), p.role)
}

// assert panics with the replica, topic-independent state and the broken
// rule when ok is false.
func (p *Partition) assert(ok bool, format string, args ...any) {
	if ok {
		return
	}
	panic(fmt.Sprintf("replica %d (%v, leader epoch %d, partition epoch %d, HW %d): %s", p.cfg.ReplicaID, p.role,
		p.state.LeaderEpoch, p.state.PartitionEpoch, p.hw, fmt.Sprintf(format, args...)))
}
