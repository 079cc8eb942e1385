package replica

import (
	"log/slog"
	"slices"
)

// neverCaughtUpMs marks a follower that has not been caught up in this
// leader epoch. A sentinel rather than 0: the simulator's clock starts at 0,
// where "caught up at time 0" would wrongly count a silent replica as
// caught up for its first replica.lag.time.max.ms.
const neverCaughtUpMs int64 = -1

// noReplica is "no replica" where a replica id is expected.
const noReplica int32 = -1

// followerProgress is the leader's view of one follower (Kafka's
// ReplicaState), fed only by that follower's fetches.
type followerProgress struct {
	replicaID int32
	// logEndOffset is the follower's fetch offset, or NoOffset before its
	// first fetch in this leader epoch.
	logEndOffset int64
	// lastFetchTimeMs is when its last fetch arrived.
	lastFetchTimeMs int64
	// lastFetchLeaderLogEndOffset is the leader's LEO when that fetch arrived.
	lastFetchLeaderLogEndOffset int64
	// lastCaughtUpTimeMs is the latest time t at which the follower's fetch
	// offset was >= the leader's LEO at t, or neverCaughtUpMs.
	lastCaughtUpTimeMs int64
	// brokerEpoch is the broker epoch of its last fetch, or -1.
	brokerEpoch int64
	// logStartOffset is the log start offset its last fetch reported, or
	// NoOffset before its first fetch in this leader epoch: it feeds the
	// low watermark DeleteRecords waits on.
	logStartOffset int64
}

// newFollowerProgress starts a leader epoch: LEOs unknown; ISR members are
// deemed caught up now, so they have replica.lag.time.max.ms to fetch, and
// others never (Kafka's Replica.resetReplicaState).
func newFollowerProgress(s PartitionState, self int32, nowMs int64) []followerProgress {
	var out []followerProgress
	for _, id := range sortedCopy(s.Replicas) {
		if id != self {
			out = append(out, freshProgress(id, containsID(s.ISR, id), nowMs))
		}
	}
	return out
}

func freshProgress(id int32, inISR bool, nowMs int64) followerProgress {
	caughtUp := neverCaughtUpMs
	if inISR {
		caughtUp = nowMs
	}
	return followerProgress{replicaID: id, logEndOffset: NoOffset, lastFetchLeaderLogEndOffset: NoOffset, lastCaughtUpTimeMs: caughtUp, brokerEpoch: -1, logStartOffset: NoOffset}
}

// reconcileFollowers keeps the progress of replicas still assigned and adds
// fresh progress for new ones, within one leader epoch.
func reconcileFollowers(old []followerProgress, s PartitionState, self int32, nowMs int64) []followerProgress {
	var out []followerProgress
	for _, id := range sortedCopy(s.Replicas) {
		if id == self {
			continue
		}
		i := slices.IndexFunc(old, func(f followerProgress) bool { return f.replicaID == id })
		if i >= 0 {
			out = append(out, old[i])
		} else {
			out = append(out, freshProgress(id, containsID(s.ISR, id), nowMs))
		}
	}
	return out
}

// progress returns the follower's progress, or nil if it is not assigned.
func (l *leaderState) progress(id int32) *followerProgress {
	for i := range l.followers {
		if l.followers[i].replicaID == id {
			return &l.followers[i]
		}
	}
	return nil
}

// onFetch records a served fetch, with Kafka's caught-up rule
// (Replica.updateFetchStateOrThrow): the follower is caught up now if it
// fetched from the leader's current LEO, and was caught up at its previous
// fetch if it now fetches from at least the LEO the leader had then. The
// second clause lets a follower that always trails by one produce (small
// produces at high frequency) stay in the ISR.
func (f *followerProgress) onFetch(fetchOffset, leaderLogEndOffset, nowMs int64) {
	switch {
	case fetchOffset >= leaderLogEndOffset:
		f.lastCaughtUpTimeMs = max(f.lastCaughtUpTimeMs, nowMs)
	case f.lastFetchLeaderLogEndOffset != NoOffset && fetchOffset >= f.lastFetchLeaderLogEndOffset:
		f.lastCaughtUpTimeMs = max(f.lastCaughtUpTimeMs, f.lastFetchTimeMs)
	}
	f.logEndOffset = fetchOffset
	f.lastFetchLeaderLogEndOffset = max(f.lastFetchLeaderLogEndOffset, leaderLogEndOffset)
	f.lastFetchTimeMs = nowMs
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: at the leader's LEO now, or
// caught up within the last maxLagMs.
func (f followerProgress) caughtUp(leaderLogEndOffset, nowMs, maxLagMs int64) bool {
	if f.logEndOffset == leaderLogEndOffset {
		return true
	}
	return f.lastCaughtUpTimeMs != neverCaughtUpMs && nowMs-f.lastCaughtUpTimeMs <= maxLagMs
}

// proposal is an AlterPartition in flight: Kafka's PendingExpandIsr or
// PendingShrinkIsr.
type proposal struct {
	request AlterPartitionRequest
	// added is the replica an expansion adds, or noReplica for a shrink.
	added int32
	// handedOut is set once PendingAlterPartition has returned it, and
	// cleared when a retriable error asks for it to be sent again.
	handedOut bool
}

// AlterPartitionRequest is the leader's proposal of a new ISR to the
// controller (Kafka's AlterPartition, KIP-497).
type AlterPartitionRequest struct {
	// ProposalID identifies the proposal to this replica only; it is not on
	// the wire. Hand it back with the response.
	ProposalID     uint64
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// NewISR is the proposed ISR, sorted.
	NewISR []int32
	// BrokerEpochs holds, for each NewISR member in the same order, the
	// broker epoch the leader last saw from it, or -1 (KIP-903). The
	// controller refuses with INELIGIBLE_REPLICA a member whose epoch is
	// known and is not the broker's current one: a late fetch from an
	// incarnation that has since restarted and may have lost records.
	BrokerEpochs []int64
}

// AlterPartitionResponse is the controller's answer.
type AlterPartitionResponse struct {
	// ProposalID is the request's, handed back.
	ProposalID uint64
	// Error is a Kafka error code; 0 when the controller applied the change
	// (or the ISR already was NewISR).
	Error int16
	// LeaderEpoch, PartitionEpoch and ISR are the partition's state after
	// the request, when Error is 0.
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// maximalISR is the ISR the HW and acks=all count: the committed ISR plus a
// pending expansion's replica (KIP-497). Counting a replica not yet admitted
// is only stricter; a pending shrink still counts the replicas it removes,
// because the controller may refuse it.
func (p *Partition) maximalISR() []int32 {
	if pr := p.leader.proposal; pr != nil && pr.added != noReplica {
		return withID(p.state.ISR, pr.added)
	}
	return p.state.ISR
}

// maybeProposeExpand proposes adding f to the ISR when no proposal is in
// flight, f is assigned and not in the ISR, and f's LEO has reached both the
// HW and this leader epoch's start offset (Kafka's isFollowerInSync; the
// second bound is KAFKA-7128: a new leader's HW may lag, and a follower
// admitted below the epoch start could miss committed records).
func (p *Partition) maybeProposeExpand(f followerProgress, nowMs int64) {
	if p.leader.proposal != nil || containsID(p.state.ISR, f.replicaID) || !p.isrEligible(f.replicaID, nowMs) {
		return
	}
	if f.logEndOffset < p.hw || f.logEndOffset < p.leader.epochStartOffset {
		return
	}
	p.propose(withID(p.state.ISR, f.replicaID), f.replicaID)
	p.logISRChange("expanding ISR", p.leader.proposal.request.NewISR, slog.Int("replica", int(f.replicaID)),
		slog.Int64("replica_log_end_offset", f.logEndOffset))
}

// MaybeShrinkISR proposes removing the ISR members that are not caught up:
// those whose LEO is not the leader's and that have not been caught up within
// replica.lag.time.max.ms (Kafka's maybeShrinkIsr). The broker calls it
// periodically (Kafka: every replica.lag.time.max.ms / 2). It reports whether
// a proposal was made.
func (p *Partition) MaybeShrinkISR(nowMs int64) bool {
	defer p.checkInvariants()
	if p.role != RoleLeader || p.leader.proposal != nil {
		return false
	}
	leo := p.log.LogEndOffset()
	var outOfSync []int32
	for _, id := range p.state.ISR {
		f := p.leader.progress(id)
		if id != p.cfg.ReplicaID && (f == nil || !f.caughtUp(leo, nowMs, p.cfg.ReplicaLagTimeMaxMs)) {
			outOfSync = append(outOfSync, id)
		}
	}
	if len(outOfSync) == 0 {
		return false
	}
	p.propose(withoutIDs(p.state.ISR, outOfSync), noReplica)
	if p.cfg.Log.Enabled(slog.LevelInfo) {
		p.logISRChange("shrinking ISR", p.leader.proposal.request.NewISR,
			slog.String("out_of_sync", p.outOfSyncDetail(outOfSync, nowMs)),
			slog.Int64("replica_lag_time_max_ms", p.cfg.ReplicaLagTimeMaxMs),
			slog.String("reason", "not caught up to the leader's log end offset within replica.lag.time.max.ms"))
	}
	return true
}

func (p *Partition) propose(newISR []int32, added int32) {
	p.nextProposalID++
	p.leader.proposal = &proposal{
		added: added,
		request: AlterPartitionRequest{
			ProposalID:     p.nextProposalID,
			LeaderID:       p.cfg.ReplicaID,
			LeaderEpoch:    p.state.LeaderEpoch,
			PartitionEpoch: p.state.PartitionEpoch,
			NewISR:         newISR,
			BrokerEpochs:   p.brokerEpochs(newISR),
		},
	}
}

// brokerEpochs is the broker epoch of each of ids as last seen, or -1.
func (p *Partition) brokerEpochs(ids []int32) []int64 {
	epochs := make([]int64, len(ids))
	for i, id := range ids {
		epochs[i] = -1
		if id == p.cfg.ReplicaID {
			epochs[i] = p.cfg.BrokerEpoch
		} else if f := p.leader.progress(id); f != nil {
			epochs[i] = f.brokerEpoch
		}
	}
	return epochs
}

// PendingAlterPartition returns the proposal the broker must send to the
// controller now, if any. Each proposal is handed out once; it is handed out
// again only after a retriable error response. At most one proposal is in
// flight: no other ISR change is proposed until it is answered or a pushed
// state supersedes it.
func (p *Partition) PendingAlterPartition() (*AlterPartitionRequest, bool) {
	pr := p.leader.proposal
	if p.role != RoleLeader || pr == nil || pr.handedOut {
		return nil, false
	}
	pr.handedOut = true
	req := pr.request
	req.NewISR = slices.Clone(req.NewISR)
	req.BrokerEpochs = slices.Clone(req.BrokerEpochs)
	return &req, true
}

// OnAlterPartitionResponse applies the controller's answer to the in-flight
// proposal, as Kafka's Partition.submitAlterPartition callback:
//   - an answer to anything but the in-flight proposal is ignored (a pushed
//     state superseded it);
//   - OPERATION_NOT_ATTEMPTED and INELIGIBLE_REPLICA: the controller did not
//     apply it; back to the committed state; after INELIGIBLE_REPLICA the
//     replica an expansion adds is not proposed again for
//     refusedReplicaRetryMs or until a pushed state;
//   - FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_*,
//     INVALID_REQUEST, NEW_LEADER_ELECTED: stay pending until the controller
//     pushes a newer state;
//   - any other error: hand the same proposal out again;
//   - success in another leader epoch or an older partition epoch: ignored,
//     stays pending; otherwise the ISR and partition epoch are committed.
//
// It returns an error only for a malformed success (ISR outside Replicas).
func (p *Partition) OnAlterPartitionResponse(resp AlterPartitionResponse, nowMs int64) error {
	defer p.checkInvariants()
	pr := p.leader.proposal
	if p.role != RoleLeader || pr == nil || pr.request.ProposalID != resp.ProposalID {
		return nil
	}
	if resp.Error != codeNone {
		p.logAlterPartitionError(pr.request.NewISR, resp.Error)
		p.onAlterPartitionError(resp.Error, nowMs)
		return nil
	}
	if resp.LeaderEpoch != p.state.LeaderEpoch || resp.PartitionEpoch < p.state.PartitionEpoch {
		return nil
	}
	if id, out := firstNotIn(resp.ISR, p.state.Replicas); out {
		return errorf(codeInvalidRequest, "AlterPartition response ISR %v holds %d, not in Replicas %v", resp.ISR, id, p.state.Replicas)
	}
	if !containsID(resp.ISR, p.cfg.ReplicaID) {
		return errorf(codeInvalidRequest, "AlterPartition response ISR %v lacks the leader %d", resp.ISR, p.cfg.ReplicaID)
	}
	before := p.state.ISR
	p.state.ISR = sortedCopy(resp.ISR)
	// A replica that joins the ISR leaves the ELR (KIP-966), as the
	// controller's record of this change does; the answer carries no ELR.
	p.state.ELR = withoutIDs(p.state.ELR, p.state.ISR)
	p.state.PartitionEpoch = resp.PartitionEpoch
	p.leader.proposal = nil
	if !slices.Equal(before, p.state.ISR) {
		p.logISRUpdated()
	}
	p.maybeAdvanceHighWatermark(nowMs)
	p.failAcksIfUnderMinISR()
	return nil
}

func (p *Partition) onAlterPartitionError(code int16, nowMs int64) {
	switch code {
	case codeOperationNotAttempted, codeIneligibleReplica:
		if added := p.leader.proposal.added; code == codeIneligibleReplica && added != noReplica {
			p.leader.refused = slices.DeleteFunc(p.leader.refused, func(r refusedReplica) bool { return r.replicaID == added })
			p.leader.refused = append(p.leader.refused, refusedReplica{replicaID: added, untilMs: nowMs + refusedReplicaRetryMs})
		}
		p.leader.proposal = nil
	case codeFencedLeaderEpoch, codeInvalidUpdateVersion, codeUnknownTopicOrPartition,
		codeUnknownTopicID, codeInvalidRequest, codeNewLeaderElected:
		// Await the controller's next pushed state.
	default:
		p.leader.proposal.handedOut = false
	}
}
