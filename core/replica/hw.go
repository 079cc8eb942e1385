package replica

import "fmt"

// The high watermark rules (SPEC.md §4, high watermark), after Kafka's
// Partition.maybeIncrementLeaderHW with KIP-966's strict min ISR:
//
//   - HW = min LEO over the maximal ISR (leader included), and over any
//     replica that is caught up, not yet in the ISR, and ISR-eligible: not
//     fenced or shutting down in the metadata image (SetIneligibleReplicas)
//     and not refused by the controller since the last pushed state. This
//     is Kafka's shouldWaitForReplicaToJoinIsr (caught up and
//     isReplicaIsrEligible): the HW waits for a replica about to join, so
//     that it can ever join, but not for one that cannot, such as a
//     crashed follower the controller has fenced;
//   - HW never moves backwards on the leader;
//   - HW does not advance while the committed ISR is smaller than
//     min.insync.replicas (capped at the replication factor);
//   - a new leader starts from the HW it had as a follower or from its
//     checkpoint, and can only advance once every ISR member has fetched in
//     its epoch, because followers' LEOs are unknown until then.
//
// Kafka has no Raft-style "commit an entry of your own epoch first" rule for
// partition data, and needs none: the HW is a minimum over the whole ISR, a
// follower's LEO counts only after its fetch passed the divergence check in
// this epoch, and only ISR (or ELR, frozen HW) members can be elected, so
// every record below the HW is on every future leader. What Kafka does
// require of a new leader is the expansion floor: a follower joins the ISR
// only with LEO >= the leader epoch's start offset (KAFKA-7128), see
// maybeProposeExpand.

// highWatermarkCandidate is the smallest of the leader's LEO and the LEOs of
// the replicas holding the HW back; an unknown LEO (NoOffset) holds it at -1.
func highWatermarkCandidate(leaderLogEndOffset int64, holderLogEndOffsets []int64) int64 {
	candidate := leaderLogEndOffset
	for _, leo := range holderLogEndOffsets {
		candidate = min(candidate, leo)
	}
	return candidate
}

// nextHighWatermark applies the monotonicity and min-ISR rules to a candidate.
func nextHighWatermark(current, candidate int64, isrSize, minISR int, ignoreMinISR bool) int64 {
	if isrSize < minISR && !ignoreMinISR {
		return current
	}
	return max(current, candidate)
}

// hwHolders appends to holders the LEOs of the followers that hold the HW
// back: members of the maximal ISR, and caught-up, ISR-eligible assigned
// replicas outside it; leo is the leader's. (The caller passes a small
// stack buffer: this runs on every follower fetch and every append.)
func (p *Partition) hwHolders(holders []int64, leo, nowMs int64) []int64 {
	isr := p.maximalISR()
	for _, f := range p.leader.followers {
		waitToJoin := f.caughtUp(leo, nowMs, p.cfg.ReplicaLagTimeMaxMs) && p.isrEligible(f.replicaID, nowMs)
		if containsID(isr, f.replicaID) || waitToJoin {
			holders = append(holders, f.logEndOffset)
		}
	}
	return holders
}

// maybeAdvanceHighWatermark recomputes the leader's HW and completes the
// acks=all waiters it passes. It reports whether the HW moved.
func (p *Partition) maybeAdvanceHighWatermark(nowMs int64) bool {
	if p.role != RoleLeader {
		return false
	}
	return p.advanceHighWatermarkAt(p.log.LogEndOffset(), nowMs)
}

// advanceHighWatermarkAt is maybeAdvanceHighWatermark on a leader whose
// log's LEO is leo, for a caller that has read it already (OnFollowerFetch).
func (p *Partition) advanceHighWatermarkAt(leo, nowMs int64) bool {
	if p.role != RoleLeader {
		panic(fmt.Sprintf("replica %d: high watermark advanced as %v", p.cfg.ReplicaID, p.role))
	}
	p.hw = min(p.hw, leo) // clampHighWatermarkToLog, with the LEO read once
	var holdersBuf [8]int64
	candidate := highWatermarkCandidate(leo, p.hwHolders(holdersBuf[:0], leo, nowMs))
	next := nextHighWatermark(p.hw, candidate, len(p.state.ISR), p.effectiveMinISR(), p.cfg.Bugs.ISRMinIgnored)
	if next < p.hw || next > leo {
		panic(fmt.Sprintf("replica %d: high watermark would move from %d to %d with LEO %d", p.cfg.ReplicaID, p.hw, next, leo))
	}
	if next == p.hw {
		return false
	}
	p.hw = next
	p.completeAcks()
	return true
}
