package replica

import (
	"fmt"
	"log/slog"
)

// followerState is what only a follower keeps.
type followerState struct {
	// awaitingState is set after FENCED_LEADER_EPOCH: the follower's epoch
	// is old, so it stops fetching until the controller pushes a newer state
	// (Kafka's onPartitionFenced).
	awaitingState bool
}

// FollowerActionKind says what the broker must do with a fetch response.
type FollowerActionKind uint8

const (
	// ActionIgnore: the response answers a request this replica no longer
	// stands behind (another epoch, or the log moved); drop it.
	ActionIgnore FollowerActionKind = iota
	// ActionAppend: append the response's records (they start at the LEO),
	// advance the log start offset to LogStartOffset if it is larger, then
	// call OnFollowerAppend with the response's HighWatermark.
	ActionAppend
	// ActionTruncate: truncate the log to Offset, then fetch again.
	ActionTruncate
	// ActionTruncateFullyAndStartAt: drop the whole log and restart it
	// empty at Offset, then fetch again.
	ActionTruncateFullyAndStartAt
	// ActionBackoff: fetch again after the replica fetch backoff.
	ActionBackoff
	// ActionAwaitState: stop fetching until ApplyState brings a newer state.
	ActionAwaitState
)

// FollowerAction is the follower's decision on one fetch response.
type FollowerAction struct {
	Kind FollowerActionKind
	// Offset is the truncation offset (ActionTruncate*).
	Offset int64
	// LogStartOffset is the leader's log start offset (ActionAppend).
	LogStartOffset int64
}

// becomeFollower follows s.LeaderID (possibly NoLeader). Waiting acks=all
// produces fail with NOT_LEADER_OR_FOLLOWER. The correct protocol does not
// truncate here: truncation waits for the leader's DivergingEpoch answer
// (KIP-101). Planted bug hw-truncation truncates to the local HW instead.
func (p *Partition) becomeFollower(s PartitionState, newEpoch bool) Transition {
	p.failAllAcks(codeNotLeaderOrFollower)
	p.leader = leaderState{}
	p.state = s
	p.role = RoleFollower
	p.follower = followerState{}
	t := Transition{Role: RoleFollower, NewLeaderEpoch: newEpoch, TruncateToOffset: NoOffset}
	if p.cfg.Bugs.HWTruncation && newEpoch && p.hw < p.log.LogEndOffset() {
		t.TruncateToOffset = p.hw
	}
	return t
}

// NextFetch returns the fetch to send to the leader, if this replica should
// fetch now: a follower of a live leader, not fenced. FetchOffset is the LEO
// and LastFetchedEpoch the epoch of the last batch (SPEC.md §4, follower).
func (p *Partition) NextFetch() (leaderID int32, req FetchRequest, ok bool) {
	if p.role != RoleFollower || p.state.LeaderID == NoLeader || p.follower.awaitingState {
		return NoLeader, FetchRequest{}, false
	}
	req = FetchRequest{
		ReplicaID:          p.cfg.ReplicaID,
		ReplicaEpoch:       p.cfg.BrokerEpoch,
		FetchOffset:        p.log.LogEndOffset(),
		CurrentLeaderEpoch: p.state.LeaderEpoch,
		LastFetchedEpoch:   p.log.LatestEpoch(),
		LogStartOffset:     p.log.LogStartOffset(),
	}
	if p.cfg.Bugs.HWTruncation {
		req.LastFetchedEpoch = NoEpoch // pre-KIP-101: no epochs, no divergence check
	}
	return p.state.LeaderID, req, true
}

// OnFetchResponse decides what to do with the leader's answer to req
// (Kafka's AbstractFetcherThread.processFetchRequest). A response to a
// request made in another leader epoch, or from an offset that is no longer
// the LEO, is ignored. When it says to truncate, the replica lowers its own
// HW to the truncation offset at once.
func (p *Partition) OnFetchResponse(req FetchRequest, resp FetchDecision) FollowerAction {
	defer p.checkInvariants()
	if p.role != RoleFollower || req.CurrentLeaderEpoch != p.state.LeaderEpoch || req.FetchOffset != p.log.LogEndOffset() {
		return FollowerAction{Kind: ActionIgnore}
	}
	switch resp.Error {
	case codeNone:
		if resp.Diverging {
			return p.truncate(divergenceTruncationOffset(resp.DivergingEpoch, p.log),
				"the leader reports a diverging epoch (KIP-101/KIP-279)",
				slog.Int("diverging_epoch", int(resp.DivergingEpoch.Epoch)),
				slog.Int64("diverging_epoch_end_offset", resp.DivergingEpoch.EndOffset))
		}
		return FollowerAction{Kind: ActionAppend, LogStartOffset: resp.LogStartOffset}
	case codeOffsetOutOfRange:
		return p.onOutOfRange(req, resp)
	case codeFencedLeaderEpoch:
		p.follower.awaitingState = true
		return FollowerAction{Kind: ActionAwaitState}
	}
	// UNKNOWN_LEADER_EPOCH (the leader has not caught up with the
	// controller), NOT_LEADER_OR_FOLLOWER, and the rest: retry later.
	return FollowerAction{Kind: ActionBackoff}
}

// OnFollowerAppend advances the follower's HW after an ActionAppend:
// HW = min(leader's HW, own LEO), never backwards (Kafka's
// maybeUpdateHighWatermark on the follower).
func (p *Partition) OnFollowerAppend(leaderHighWatermark int64) {
	defer p.checkInvariants()
	if p.role != RoleFollower {
		return
	}
	p.clampHighWatermarkToLog()
	p.hw = max(p.hw, min(leaderHighWatermark, p.log.LogEndOffset()))
}

// divergenceTruncationOffset is where a follower truncates on
// DivergingEpoch{E, O} (Kafka's AbstractFetcherThread.getOffsetTruncationState):
//   - the follower also has epoch E: min(O, its own end offset for E, LEO).
//     Its own end offset can be smaller than the leader's: it may have moved
//     to a later epoch the leader never saw (KIP-279);
//   - the follower does not have E: the end of its largest epoch below E,
//     and the next fetch checks again with that epoch;
//   - the follower knows no epoch <= E: min(O, LEO).
func divergenceTruncationOffset(d EpochEndOffset, log Log) int64 {
	leo := log.LogEndOffset()
	epoch, end := log.EndOffsetForEpoch(d.Epoch)
	switch {
	case epoch == NoEpoch || end == NoOffset:
		return min(d.EndOffset, leo)
	case epoch != d.Epoch:
		return min(end, leo)
	}
	return min(end, d.EndOffset, leo)
}

// onOutOfRange handles OFFSET_OUT_OF_RANGE as Kafka's fetchOffsetAndTruncate:
// behind the leader's log start, drop everything and start there; ahead of
// the leader's LEO (only after an unclean election, or without epochs),
// truncate to it; otherwise the leader's range moved under us: retry.
//
// One case Kafka does not have: the last fetched epoch is above the current
// leader epoch. No leader has held that epoch yet, so the batch carrying it
// was corrupted on this replica's disk (the PartitionLeaderEpoch field lies
// outside the batch CRC, so recovery keeps such a batch when it is the last
// one). The leader answers it with OFFSET_OUT_OF_RANGE and would forever:
// truncate to where the first epoch above the leader's starts, so the next
// fetch asks about an epoch the leader knows.
func (p *Partition) onOutOfRange(req FetchRequest, resp FetchDecision) FollowerAction {
	leo := p.log.LogEndOffset()
	switch {
	case leo < resp.LogStartOffset:
		p.hw = resp.LogStartOffset
		p.logTruncation(resp.LogStartOffset, "out of range: the log ends below the leader's log start offset; dropping it and starting there")
		return FollowerAction{Kind: ActionTruncateFullyAndStartAt, Offset: resp.LogStartOffset}
	case req.LastFetchedEpoch > req.CurrentLeaderEpoch:
		_, futureEpochStart := p.log.EndOffsetForEpoch(req.CurrentLeaderEpoch)
		return p.truncate(min(futureEpochStart, leo),
			"out of range: the log holds batches of an epoch above the leader's, corrupted on this disk",
			slog.Int("last_fetched_epoch", int(req.LastFetchedEpoch)))
	case leo > resp.LogEndOffset:
		return p.truncate(resp.LogEndOffset, "out of range: the log ends above the leader's (an unclean election)")
	}
	return FollowerAction{Kind: ActionBackoff}
}

// truncate decides a truncation to offset and lowers the HW with it. An
// offset below the log start drops the whole log (as Kafka's truncateTo
// does); a negative one can only come from a malformed response: retry.
// reason and attrs say why, in the log line.
func (p *Partition) truncate(offset int64, reason string, attrs ...slog.Attr) FollowerAction {
	if offset > p.log.LogEndOffset() {
		panic(fmt.Sprintf("replica %d: truncation offset %d above LEO %d", p.cfg.ReplicaID, offset, p.log.LogEndOffset()))
	}
	if offset < 0 {
		return FollowerAction{Kind: ActionBackoff}
	}
	p.logTruncation(offset, reason, attrs...)
	p.hw = min(p.hw, offset)
	if offset < p.log.LogStartOffset() {
		return FollowerAction{Kind: ActionTruncateFullyAndStartAt, Offset: offset}
	}
	return FollowerAction{Kind: ActionTruncate, Offset: offset}
}
