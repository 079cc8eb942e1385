package replica

import (
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
	if p.hw < 0 {
		p.fail("high watermark %d is negative", p.hw)
	}
	if !slices.IsSorted(p.ineligibleReplicas) {
		p.fail("ineligible replicas %v are not sorted", p.ineligibleReplicas)
	}
	switch p.role {
	case RoleNone:
		if p.state.LeaderEpoch != NoEpoch {
			p.fail("no role, yet leader epoch %d", p.state.LeaderEpoch)
		}
		p.checkNotLeading()
	case RoleLeader:
		p.checkState()
		if p.state.LeaderID != p.cfg.ReplicaID {
			p.fail("leads, yet the state names leader %d", p.state.LeaderID)
		}
		p.checkLeaderState()
	case RoleFollower:
		p.checkState()
		if p.state.LeaderID == p.cfg.ReplicaID {
			p.fail("follows, yet the state names this replica leader")
		}
		p.checkNotLeading()
	default:
		p.fail("unknown role %d", p.role)
	}
}

// checkState: the applied state is one ApplyState accepts (ISR and ELR
// within the replicas, disjoint, the leader in the ISR), with its sets
// sorted as clone leaves them. It allocates nothing: it runs after every
// input, and validate's copies cost a tenth of a simulated run.
func (p *Partition) checkState() {
	s, self := p.state, p.cfg.ReplicaID
	if s.LeaderEpoch < 0 || s.PartitionEpoch < 0 {
		p.fail("negative epoch in the applied state")
	}
	for i, id := range s.Replicas {
		if containsID(s.Replicas[:i], id) {
			p.fail("replicas %v repeat %d", s.Replicas, id)
		}
	}
	if !containsID(s.Replicas, self) {
		p.fail("replicas %v lack this replica", s.Replicas)
	}
	p.checkSortedSubset("ISR", s.ISR)
	p.checkSortedSubset("ELR", s.ELR)
	for _, id := range s.ELR {
		if containsID(s.ISR, id) {
			p.fail("replica %d is in both ISR %v and ELR %v", id, s.ISR, s.ELR)
		}
	}
	if s.LeaderID != NoLeader && !containsID(s.ISR, s.LeaderID) {
		p.fail("leader %d is not in ISR %v", s.LeaderID, s.ISR)
	}
}

// checkSortedSubset: ids are strictly increasing (sorted, no repeats) and
// each is a replica.
func (p *Partition) checkSortedSubset(name string, ids []int32) {
	for i, id := range ids {
		if i > 0 && ids[i-1] >= id {
			p.fail("%s %v is not sorted without repeats", name, ids)
		}
		if !containsID(p.state.Replicas, id) {
			p.fail("%s %v holds %d, not in replicas %v", name, ids, id, p.state.Replicas)
		}
	}
}

// checkLeaderState: the leader tracks exactly the other assigned replicas,
// in id order, its one proposal is a well-formed ISR of its own epoch, and
// no acks=all produce waits for an offset the HW has passed.
func (p *Partition) checkLeaderState() {
	if len(p.leader.followers) != len(p.state.Replicas)-1 {
		p.fail("tracks %d followers for replicas %v", len(p.leader.followers), p.state.Replicas)
	}
	for i, f := range p.leader.followers {
		if i > 0 && p.leader.followers[i-1].replicaID >= f.replicaID {
			p.fail("follower progress out of id order at %d", f.replicaID)
		}
		if f.replicaID == p.cfg.ReplicaID || !containsID(p.state.Replicas, f.replicaID) {
			p.fail("follower progress for %d, not another of replicas %v", f.replicaID, p.state.Replicas)
		}
		if f.logEndOffset < NoOffset {
			p.fail("follower %d has log end offset %d", f.replicaID, f.logEndOffset)
		}
	}
	if pr := p.leader.proposal; pr != nil {
		r := pr.request
		if r.LeaderEpoch != p.state.LeaderEpoch {
			p.fail("proposal of leader epoch %d in epoch %d", r.LeaderEpoch, p.state.LeaderEpoch)
		}
		p.checkSortedSubset("proposed ISR", r.NewISR)
		if !containsID(r.NewISR, p.cfg.ReplicaID) {
			p.fail("proposed ISR %v lacks the leader", r.NewISR)
		}
		if len(r.BrokerEpochs) != len(r.NewISR) {
			p.fail("proposal has %d broker epochs for ISR %v", len(r.BrokerEpochs), r.NewISR)
		}
	}
	if n := len(p.acks.waiters); n > 0 {
		head, tail := p.acks.waiters[0], p.acks.waiters[n-1]
		if head.requiredOffset <= p.hw {
			p.fail("acks=all produce %d still waits for offset %d, below HW %d", head.requestID, head.requiredOffset, p.hw)
		}
		// addWaiter keeps them sorted; the ends are a cheap witness.
		if head.requiredOffset > tail.requiredOffset {
			p.fail("acks=all waiters are not sorted by required offset")
		}
	}
}

// checkNotLeading: a replica that does not lead keeps no leader state and
// no acks=all produce waits on it (becomeFollower failed them).
func (p *Partition) checkNotLeading() {
	if p.leader.followers != nil || p.leader.proposal != nil || p.leader.refused != nil {
		p.fail("keeps leader state as %v", p.role)
	}
	if len(p.acks.waiters) != 0 {
		p.fail("%d acks=all produces wait on a %v", len(p.acks.waiters), p.role)
	}
}

// fail panics with the replica, its epochs and HW, and the broken rule.
// Callers test the rule first, so that a check that holds builds no
// arguments (boxing them allocates, and the checks run after every input).
func (p *Partition) fail(format string, args ...any) {
	panic(fmt.Sprintf("replica %d (%v, leader epoch %d, partition epoch %d, HW %d): %s", p.cfg.ReplicaID, p.role,
		p.state.LeaderEpoch, p.state.PartitionEpoch, p.hw, fmt.Sprintf(format, args...)))
}
