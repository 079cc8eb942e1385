package replica

// leaderState is what only the leader keeps (SPEC.md §4, leader side).
type leaderState struct {
	// epochStartOffset is the LEO when this replica became leader of the
	// current epoch: Kafka's leaderEpochStartOffsetOpt. It is the start
	// offset of this leader's epoch in the epoch cache, and the floor a
	// follower's LEO must reach to join the ISR (KAFKA-7128).
	epochStartOffset int64
	// followers holds the progress of every other assigned replica, sorted
	// by replica id.
	followers []followerProgress
	// proposal is the in-flight AlterPartition, or nil.
	proposal *proposal
	// refused holds replicas the controller refused to add to the ISR
	// (INELIGIBLE_REPLICA: fenced, shutting down or a stale broker epoch,
	// KIP-841/KIP-903). They are not proposed again until the controller
	// pushes a new state or refusedReplicaRetryMs has passed, so a refused
	// replica cannot loop the leader, nor stay out for good.
	refused []refusedReplica
}

// refusedReplicaRetryMs is how long the leader waits before proposing a
// refused replica again when nothing tells it the refusal is over. The
// leader's metadata image can miss the controller's reason altogether: a
// follower that restarts while the leader is cut off registers fenced and
// is unfenced again, both in one metadata batch the leader applies later,
// so the image shows the broker usable before and after, and the broker's
// unfencing hook (reconsiderUnfenced) never fires; nothing else changes the
// partition, and a refusal kept until a pushed state would keep the
// replica out of the ISR forever. Kafka's leader
// keeps no refusal: it retries at the next fetch once the answer is in,
// gated by its metadata cache; Strand waits as long as Kafka's
// replica.fetch.backoff.ms default.
const refusedReplicaRetryMs int64 = 1000

// refusedReplica is a replica the controller refused to add to the ISR and
// the time until which the leader does not propose it again.
type refusedReplica struct {
	replicaID int32
	untilMs   int64
}

// FetchRequest is one partition of a Fetch, as a follower sends it and as
// the leader reads it (KAFKA-NOTES.md, "Replication through fetch").
type FetchRequest struct {
	// ReplicaID is the fetching follower's broker id.
	ReplicaID int32
	// ReplicaEpoch is the follower's broker epoch (Fetch v15 ReplicaState),
	// or -1 for older versions.
	ReplicaEpoch int64
	// FetchOffset is the follower's LEO.
	FetchOffset int64
	// CurrentLeaderEpoch is the leader epoch the follower knows, or NoEpoch
	// for request versions without it.
	CurrentLeaderEpoch int32
	// LastFetchedEpoch is the epoch of the follower's last batch (Fetch
	// v12+), or NoEpoch when its log holds none.
	LastFetchedEpoch int32
	// LogStartOffset is the follower's log start offset: it feeds the low
	// watermark of DeleteRecords (LowWatermark).
	LogStartOffset int64
}

// FetchDecision is the leader's answer to one partition of a Fetch. The
// broker reads records [ReadFromOffset, ReadToOffset) from its log when
// ShouldRead; a follower hands the decision, as received, to OnFetchResponse.
type FetchDecision struct {
	// Error is a Kafka error code; 0 when the fetch is served.
	Error int16
	// Diverging is set, with no records, when the follower's log diverges
	// from the leader's at DivergingEpoch (Fetch v12+ DivergingEpoch).
	Diverging      bool
	DivergingEpoch EpochEndOffset
	// ReadFromOffset and ReadToOffset bound the records to send.
	ReadFromOffset int64
	ReadToOffset   int64
	// HighWatermark, LogStartOffset and LogEndOffset are the leader's. The
	// HW is the one after this fetch was recorded (Kafka sends the HW from
	// before; the later one is as safe and saves a round). The wire Fetch
	// response has no LogEndOffset; a wire follower that needs it
	// (OFFSET_OUT_OF_RANGE) asks ListOffsets for the latest offset, as
	// Kafka's AbstractFetcherThread.fetchOffsetAndTruncate does.
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
}

// ShouldRead reports whether the broker must read records for this decision.
func (d FetchDecision) ShouldRead() bool {
	return d.Error == codeNone && !d.Diverging && d.ReadFromOffset < d.ReadToOffset
}

// becomeLeader takes leadership of s. In a new leader epoch the epoch start
// offset is the current LEO and every follower's LEO becomes unknown, so the
// HW cannot advance until each ISR member has fetched in this epoch and
// passed the divergence check. (Kafka keeps a re-elected leader's follower
// LEOs; forgetting them costs one fetch round and makes no exception.)
//
// It returns the offset the broker must truncate the log to first, or
// NoOffset: see corruptEpochStart.
func (p *Partition) becomeLeader(s PartitionState, newEpoch bool, nowMs int64) int64 {
	truncateTo := p.corruptEpochStart(s.LeaderEpoch)
	if truncateTo != NoOffset {
		p.hw = min(p.hw, truncateTo)
	}
	if newEpoch || p.role != RoleLeader {
		p.leader = leaderState{
			epochStartOffset: p.log.LogEndOffset(),
			followers:        newFollowerProgress(s, p.cfg.ReplicaID, nowMs),
		}
		if truncateTo != NoOffset {
			p.leader.epochStartOffset = truncateTo
		}
	} else {
		p.leader.followers = reconcileFollowers(p.leader.followers, s, p.cfg.ReplicaID, nowMs)
	}
	// A pushed state supersedes any in-flight proposal: Kafka's
	// updateAssignmentAndIsr resets to a CommittedPartitionState. It may
	// also have changed which replicas are eligible.
	p.leader.proposal = nil
	p.leader.refused = nil
	p.state = s
	p.role = RoleLeader
	p.follower = followerState{}
	if truncateTo == NoOffset {
		// After a truncation the HW waits for the next fetch or append:
		// computed now, it would count the records about to go.
		p.maybeAdvanceHighWatermark(nowMs)
	}
	p.failAcksIfUnderMinISR()
	return truncateTo
}

// corruptEpochStart returns where the log's first batch from an epoch above
// leaderEpoch starts, or NoOffset when the log holds none. No leader has
// held such an epoch (the controller raises the epoch at every election,
// and this replica would refuse a state older than one it followed), so
// the batch's PartitionLeaderEpoch was corrupted on this replica's disk:
// the field lies outside the batch CRC, and recovery keeps such a batch when
// it is the log's last. The log refuses leader appends in an epoch below
// its latest, and followers copying the batch would fetch with a last
// fetched epoch above the leader's, get OFFSET_OUT_OF_RANGE and drop it
// again (follower.go onOutOfRange), forever, never reaching this epoch's
// start offset to join the ISR. So
// the new leader drops those batches, as a follower does. Kafka's makeLeader
// would only drop the entry from the epoch cache, keep the batch, and loop
// the same way: it trusts that field.
func (p *Partition) corruptEpochStart(leaderEpoch int32) int64 {
	if latest := p.log.LatestEpoch(); latest == NoEpoch || latest <= leaderEpoch {
		return NoOffset
	}
	_, futureEpochStart := p.log.EndOffsetForEpoch(leaderEpoch)
	return min(futureEpochStart, p.log.LogEndOffset())
}

// OnFollowerFetch decides the leader's answer to a follower's fetch and, when
// it is served, records the follower's progress, proposes an ISR expansion if
// it caught up, and advances the HW (Kafka's Partition.fetchRecords). The
// checks run in Kafka's order: leader epoch, leadership, replica membership,
// last fetched epoch (divergence), offset range.
func (p *Partition) OnFollowerFetch(req FetchRequest, nowMs int64) FetchDecision {
	defer p.checkInvariants()
	if code := p.checkRequestEpoch(req.CurrentLeaderEpoch); code != codeNone {
		return p.failedFetch(code)
	}
	if p.role != RoleLeader {
		return p.failedFetch(codeNotLeaderOrFollower)
	}
	f := p.leader.progress(req.ReplicaID)
	if f == nil {
		// Kafka's followerReplicaOrThrow: a replica not (yet) assigned.
		if req.CurrentLeaderEpoch != NoEpoch {
			return p.failedFetch(codeUnknownLeaderEpoch)
		}
		return p.failedFetch(codeNotLeaderOrFollower)
	}
	leo := p.log.LogEndOffset()
	d := p.checkFetchPosition(req.FetchOffset, req.LastFetchedEpoch, leo)
	if d.Error != codeNone || d.Diverging {
		return d
	}
	f.onFetch(req.FetchOffset, leo, nowMs)
	f.brokerEpoch, f.logStartOffset = req.ReplicaEpoch, req.LogStartOffset
	p.maybeProposeExpand(*f, nowMs)
	p.advanceHighWatermarkAt(leo, nowMs)
	d.HighWatermark = p.hw
	return d
}

// LowWatermark is the leader's answer to how far DeleteRecords has reached
// (Kafka's Partition.lowWatermarkIfLeader): the smallest log start offset
// among this replica's and those its followers reported in their latest
// fetch of this leader epoch; a follower that has not fetched yet holds it
// at NoOffset. alive says which brokers are registered and unfenced. A
// follower counts if it is alive, as in Kafka, or if it may lead without an
// unclean election (in the ISR or the ELR) even while fenced, unlike
// Kafka: an ELR member fenced with an older log start, elected once the
// leader fails, would serve the deleted records again after the
// DeleteRecords completed. Other dead followers do
// not hold DeleteRecords up. ok is false on a replica that is not the
// leader.
func (p *Partition) LowWatermark(alive func(replicaID int32) bool) (lowWatermark int64, ok bool) {
	if p.role != RoleLeader {
		return NoOffset, false
	}
	lowWatermark = p.log.LogStartOffset()
	for _, f := range p.leader.followers {
		if alive(f.replicaID) || p.mayLeadCleanly(f.replicaID) {
			lowWatermark = min(lowWatermark, f.logStartOffset)
		}
	}
	return lowWatermark, true
}

// mayLeadCleanly reports whether replica id may become leader without an
// unclean election: it is in the ISR or the ELR (Elect).
func (p *Partition) mayLeadCleanly(id int32) bool {
	return containsID(p.state.ISR, id) || containsID(p.state.ELR, id)
}

// OnConsumerFetch decides the answer to a fetch from a non-replica: only the
// leader serves it, and only below the HW (SPEC.md §4: consumers never see
// past HW). A fetch offset between HW and LEO is valid and reads nothing.
func (p *Partition) OnConsumerFetch(fetchOffset int64, currentLeaderEpoch int32) FetchDecision {
	return p.consumerFetch(fetchOffset, currentLeaderEpoch, false)
}

// OnConsumerFetchAnyReplica is OnConsumerFetch for a consumer's fetch that a
// follower may serve too (Fetch v11+, KIP-392: Kafka's
// FetchParams.fetchOnlyLeader is false for a consumer with client
// metadata). A follower answers as a leader would, below its own HW, which
// it learned from the leader's answers: every record below it is
// committed, so a consumer reads from a follower only what it could read
// from the leader. The answer's HW and log start are the follower's, as
// Kafka's.
func (p *Partition) OnConsumerFetchAnyReplica(fetchOffset int64, currentLeaderEpoch int32) FetchDecision {
	return p.consumerFetch(fetchOffset, currentLeaderEpoch, p.role == RoleFollower)
}

// consumerFetch is OnConsumerFetch, served by this replica as a follower
// too when asFollower.
func (p *Partition) consumerFetch(fetchOffset int64, currentLeaderEpoch int32, asFollower bool) FetchDecision {
	if code := p.checkRequestEpoch(currentLeaderEpoch); code != codeNone {
		return p.failedFetch(code)
	}
	if p.role != RoleLeader && !asFollower {
		return p.failedFetch(codeNotLeaderOrFollower)
	}
	d := p.failedFetch(codeNone)
	if asFollower && p.cfg.Bugs.FollowerPastHW {
		d.HighWatermark = d.LogEndOffset // planted bug: consumers read uncommitted records
	}
	if fetchOffset < d.LogStartOffset || fetchOffset > d.LogEndOffset {
		d.Error = codeOffsetOutOfRange
		return d
	}
	d.ReadFromOffset, d.ReadToOffset = fetchOffset, max(fetchOffset, d.HighWatermark)
	return d
}

// checkRequestEpoch compares a request's leader epoch with ours, as Kafka's
// Partition.checkCurrentLeaderEpoch: older → FENCED_LEADER_EPOCH, newer →
// UNKNOWN_LEADER_EPOCH, absent → accepted.
func (p *Partition) checkRequestEpoch(requestEpoch int32) int16 {
	if p.cfg.Bugs.NoFencing || requestEpoch == NoEpoch {
		return codeNone // planted bug no-fencing skips the comparison
	}
	switch {
	case requestEpoch < p.state.LeaderEpoch:
		return codeFencedLeaderEpoch
	case requestEpoch > p.state.LeaderEpoch:
		return codeUnknownLeaderEpoch
	}
	return codeNone
}

// checkFetchPosition is Kafka's Partition.readRecords without the read: the
// follower's (LastFetchedEpoch, FetchOffset) must be consistent with the
// leader's epoch cache, or the answer is DivergingEpoch with the largest
// epoch <= LastFetchedEpoch that the leader knows and where it ends.
func (p *Partition) checkFetchPosition(fetchOffset int64, lastFetchedEpoch int32, leo int64) FetchDecision {
	d := p.fetchDecisionAt(codeNone, leo)
	if lastFetchedEpoch != NoEpoch {
		epoch, end := p.leaderEndOffsetForEpoch(lastFetchedEpoch, leo)
		if epoch == NoEpoch || end == NoOffset || fetchOffset < d.LogStartOffset {
			d.Error = codeOffsetOutOfRange
			return d
		}
		if epoch < lastFetchedEpoch || end < fetchOffset {
			d.Diverging, d.DivergingEpoch = true, EpochEndOffset{Epoch: epoch, EndOffset: end}
			return d
		}
	}
	if fetchOffset < d.LogStartOffset || fetchOffset > leo {
		d.Error = codeOffsetOutOfRange
		return d
	}
	d.ReadFromOffset, d.ReadToOffset = fetchOffset, leo
	return d
}

// leaderEndOffsetForEpoch is the leader's epoch-cache lookup, leo the log's
// LEO. Kafka's
// makeLeader writes (leader epoch, LEO) into the cache at election so that a
// follower holding epochs this leader never saw gets a bounded answer
// (KIP-279). This package does not write the log, so it overlays that entry
// instead: until the first append in this epoch, the log's cache lacks it.
func (p *Partition) leaderEndOffsetForEpoch(requested int32, leo int64) (int32, int64) {
	current := p.state.LeaderEpoch
	switch {
	case requested == NoEpoch || requested > current:
		return NoEpoch, NoOffset
	case requested == current:
		return current, leo
	}
	epoch, end := p.log.EndOffsetForEpoch(requested)
	if epoch != NoEpoch {
		return epoch, end
	}
	// No cached epoch is larger than requested: the overlay entry is.
	if latest := p.log.LatestEpoch(); latest != NoEpoch {
		return latest, p.leader.epochStartOffset
	}
	return requested, p.leader.epochStartOffset
}

// failedFetch is a decision carrying code and the leader's offsets.
func (p *Partition) failedFetch(code int16) FetchDecision {
	return p.fetchDecisionAt(code, p.log.LogEndOffset())
}

// fetchDecisionAt is failedFetch for a caller that has read the log's LEO
// already: a follower's fetch runs for every partition it names, so it
// reads the LEO once.
func (p *Partition) fetchDecisionAt(code int16, leo int64) FetchDecision {
	return FetchDecision{
		Error: code,
		// A leader's HW never passes its LEO; a follower's may, until its
		// clamp after a truncation.
		HighWatermark:  min(p.hw, leo),
		LogStartOffset: p.log.LogStartOffset(),
		LogEndOffset:   leo,
	}
}
