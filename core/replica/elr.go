package replica

import "slices"

// Controller-side partition bookkeeping (KIP-966, eligible leader replicas),
// as pure functions over PartitionState. The minimal controller and the Raft
// controller both call these, so the replication proof does not depend on
// which controller drives it (CLARIFICATIONS.md, "The controller interface").
//
// KIP-966 in brief: the HW does not advance while the ISR is smaller than
// min.insync.replicas (hw.go), so a replica that leaves the ISR while the
// ISR is below min ISR still holds every committed record. The controller
// keeps such replicas in the ELR, and elects from it when the ISR is empty.
// A replica that restarts after an unclean shutdown may have lost unflushed
// records, so it leaves the ELR. With ELR, a partition with RF 3 and
// min.insync.replicas 2 survives an unclean shutdown of its last ISR member.
//
// Over the fault budget every replica that held the committed records may
// restart after an unclean shutdown: ISR and ELR are then empty, and the
// partition would stay offline forever. LastKnownELR remembers the last
// leader, as Kafka 4.x's last-known-leader recovery does: the replica that
// held every committed record last, and lost at most its own unflushed
// tail; Elect takes it once it is back (see Elect).

// ELRPolicy is the controller configuration these functions follow.
type ELRPolicy struct {
	// MinInsyncReplicas is the topic's min.insync.replicas.
	MinInsyncReplicas int
	// ELREnabled turns KIP-966 on (eligible.leader.replicas.version=1).
	ELREnabled bool
	// UncleanEnabled is unclean.leader.election.enable (default false).
	UncleanEnabled bool
}

// effectiveMinISR caps min.insync.replicas at the replication factor, as
// Kafka's ReplicationControlManager.getTopicEffectiveMinIsr and the broker
// (Partition.effectiveMinISR) do.
func (pol ELRPolicy) effectiveMinISR(s PartitionState) int {
	return min(pol.MinInsyncReplicas, len(s.Replicas))
}

// ChangeISR returns the state after the ISR becomes targetISR, with the
// partition epoch bumped and the ELR maintained as Kafka's
// PartitionChangeBuilder.maybePopulateTargetElr: at or above min ISR the ELR
// and last known ELR are cleared; below it, the old ISR and ELR members that
// leave the ISR join the ELR, except replicas known to have shut down
// uncleanly; when the ISR becomes empty, the last known ELR becomes the
// leader (maybeUpdateLastKnownLeader). The leader and leader epoch are
// unchanged: call Elect if the leader left the ISR.
func ChangeISR(cur PartitionState, targetISR, uncleanShutdown []int32, pol ELRPolicy) PartitionState {
	next := cur.clone()
	next.ISR = sortedCopy(targetISR)
	next.PartitionEpoch++
	next.ELR, next.LastKnownELR = nextELR(cur, next.ISR, uncleanShutdown, pol)
	return next
}

// nextELR computes ELR and LastKnownELR for a new ISR. LastKnownELR is
// the last leader once the ISR empties (Kafka's default balanced recovery,
// useLastKnownLeaderInBalancedRecovery), never the other ELR members: one
// of those may have lost every unflushed record before the controller took
// it out of the ISR (a power loss found only when its session expires),
// and electing it first would lose what the last leader still holds
// (testdata/elr_last_known_leader.txt).
func nextELR(cur PartitionState, targetISR, uncleanShutdown []int32, pol ELRPolicy) (elr, lastKnownELR []int32) {
	if !pol.ELREnabled || len(targetISR) >= pol.effectiveMinISR(cur) {
		return nil, nil
	}
	candidates := sortedCopy(append(slices.Clone(cur.ELR), cur.ISR...))
	candidates = slices.Compact(candidates)
	elr = withoutIDs(withoutIDs(candidates, targetISR), uncleanShutdown)
	lastKnownELR = slices.Clone(cur.LastKnownELR)
	if len(targetISR) == 0 && len(cur.ISR) > 0 && cur.LeaderID != NoLeader {
		lastKnownELR = []int32{cur.LeaderID}
	}
	return elr, lastKnownELR
}

// RecordUncleanShutdown returns the state after replica registered again
// following an unclean shutdown (a new broker epoch, KAFKA-15586): it may
// have lost unflushed records, so it leaves the ELR. It reports whether the
// state changed; the partition epoch is bumped only then.
func RecordUncleanShutdown(cur PartitionState, replica int32) (PartitionState, bool) {
	if !containsID(cur.ELR, replica) {
		return cur.clone(), false
	}
	next := cur.clone()
	next.ELR = withoutIDs(cur.ELR, []int32{replica})
	next.PartitionEpoch++
	return next, true
}

// ElectionKind says how Elect chose the leader.
type ElectionKind uint8

const (
	// ElectionNoLeader: no replica may lead; the partition is offline.
	ElectionNoLeader ElectionKind = iota
	// ElectionKept: the current leader is still a valid leader.
	ElectionKept
	// ElectionClean: a new leader from the ISR.
	ElectionClean
	// ElectionFromELR: the ISR was empty; a new leader from the ELR.
	ElectionFromELR
	// ElectionLastKnownELR: ISR and ELR were empty; a member of the last
	// known ELR leads. Records it lost in an unclean shutdown are lost.
	ElectionLastKnownELR
	// ElectionUnclean: an out-of-sync replica leads; records may be lost.
	ElectionUnclean
)

// Elect returns the state after a leader election, as Kafka's
// PartitionChangeBuilder.electAnyLeader. acceptable reports whether a
// replica may lead (registered, unfenced, not shutting down: KIP-841). The
// order:
//
//  1. keep a valid current leader;
//  2. the first valid replica in assignment order, valid meaning in the
//     ISR, or in the ELR when the ISR is empty;
//  3. with ELR enabled and both ISR and ELR empty: the first acceptable
//     member of LastKnownELR in assignment order (last-known-ELR recovery);
//  4. if unclean election is enabled, the first acceptable replica.
//
// A leader from the ELR gets ISR = {leader}; one from the last known ELR
// gets ISR = {leader}; an unclean leader gets ISR = {leader} and an empty
// ELR. Electing a leader clears the last known ELR, as Kafka's
// maybeUpdateLastKnownLeader does. Whenever the leader changes (to NoLeader
// too) both epochs are bumped.
//
// Step 3 is Kafka 4.x's last-known-leader election (canElectLastKnownLeader,
// "select the last known leader if it is unfenced"): nextELR keeps only the
// last leader in LastKnownELR, and the partition waits for that broker. It
// runs without unclean.leader.election.enable, as in Kafka: the last leader
// held every committed record and lost at most its unflushed tail.
func Elect(cur PartitionState, pol ELRPolicy, acceptable func(replica int32) bool) (PartitionState, ElectionKind) {
	valid := func(id int32) bool {
		eligible := containsID(cur.ISR, id) || (len(cur.ISR) == 0 && containsID(cur.ELR, id))
		return eligible && acceptable(id)
	}
	if cur.LeaderID != NoLeader && valid(cur.LeaderID) {
		return cur.clone(), ElectionKept
	}
	for _, id := range cur.Replicas {
		if valid(id) {
			kind := ElectionClean
			if !containsID(cur.ISR, id) {
				kind = ElectionFromELR
			}
			return withLeader(cur, id, kind), kind
		}
	}
	if pol.ELREnabled && len(cur.ISR) == 0 && len(cur.ELR) == 0 {
		lastKnown := func(id int32) bool { return containsID(cur.LastKnownELR, id) && acceptable(id) }
		if i := slices.IndexFunc(cur.Replicas, lastKnown); i >= 0 {
			return withLeader(cur, cur.Replicas[i], ElectionLastKnownELR), ElectionLastKnownELR
		}
	}
	if pol.UncleanEnabled {
		if i := slices.IndexFunc(cur.Replicas, acceptable); i >= 0 {
			return withLeader(cur, cur.Replicas[i], ElectionUnclean), ElectionUnclean
		}
	}
	if cur.LeaderID == NoLeader {
		return cur.clone(), ElectionNoLeader
	}
	return withLeader(cur, NoLeader, ElectionNoLeader), ElectionNoLeader
}

// withLeader is cur with a new leader chosen by kind, epochs bumped.
func withLeader(cur PartitionState, leader int32, kind ElectionKind) PartitionState {
	next := cur.clone()
	next.LeaderID = leader
	next.LeaderEpoch++
	next.PartitionEpoch++
	switch kind {
	case ElectionFromELR:
		next.ISR = []int32{leader}
		next.ELR = withoutIDs(cur.ELR, []int32{leader})
	case ElectionLastKnownELR:
		next.ISR = []int32{leader}
	case ElectionUnclean:
		next.ISR = []int32{leader}
		next.ELR = nil
	}
	if leader != NoLeader {
		next.LastKnownELR = nil
	}
	return next
}
