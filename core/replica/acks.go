package replica

import (
	"fmt"
	"slices"
)

// Produce acks values (Kafka's acks / RequiredAcks).
const (
	// AcksNone: the producer gets no response.
	AcksNone int16 = 0
	// AcksLeader: answered once the leader has appended.
	AcksLeader int16 = 1
	// AcksAll: answered once the HW passes the batch.
	AcksAll int16 = -1
)

// AckResult completes one acks=all produce: Error 0 is success.
type AckResult struct {
	RequestID uint64
	Error     int16
}

// LeaderAppend describes a batch the leader has just appended.
type LeaderAppend struct {
	// LastOffset is the offset of the batch's last record.
	LastOffset int64
	// Acks is the produce's acks value.
	Acks int16
	// RequestID is the broker's token for the produce; AckResult carries it.
	RequestID uint64
	// DeadlineMs is when an acks=all wait times out (request timeout).
	DeadlineMs int64
}

// ackWaiter is an acks=all produce waiting for the HW (Kafka's
// DelayedProduce for one partition).
type ackWaiter struct {
	requestID      uint64
	requiredOffset int64 // the HW must reach it: last offset + 1
	deadlineMs     int64
}

// ackTracker is the purgatory of one partition: waiters sorted by
// requiredOffset, and results not yet taken.
type ackTracker struct {
	waiters []ackWaiter
	results []AckResult
}

// addWaiter inserts w after every waiter whose requiredOffset is not above
// its own. Appends come in offset order, so w usually goes last; but an
// idempotent producer's retry of a batch the log already holds (a
// duplicate) waits for the batch's original offsets, which may lie below
// later appends. completeAcks stops at the first waiter the HW has not
// passed, so the order is what lets a duplicate complete as soon as the HW
// passes its batch.
func (a *ackTracker) addWaiter(w ackWaiter) {
	i := len(a.waiters)
	for i > 0 && a.waiters[i-1].requiredOffset > w.requiredOffset {
		i--
	}
	a.waiters = slices.Insert(a.waiters, i, w)
}

// ackOutcome is Kafka's Partition.checkEnoughReplicasReachOffset: once the
// HW has reached the batch, it succeeds if the maximal ISR is at least
// min.insync.replicas and fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND if not.
func ackOutcome(hw, requiredOffset int64, maximalISRSize, minISR int, ignoreMinISR bool) (done bool, code int16) {
	if hw < requiredOffset {
		return false, codeNone
	}
	if maximalISRSize < minISR && !ignoreMinISR {
		return true, codeNotEnoughReplicasAfterAppend
	}
	return true, codeNone
}

// AdmitProduce checks, before the append, that this replica may take a
// produce with the given acks, and returns the leader epoch to stamp into
// the batch. Kafka's order: leadership, acks value, then for acks=all the
// committed ISR against min.insync.replicas (NOT_ENOUGH_REPLICAS) and the
// purgatory bound. A full purgatory answers REQUEST_TIMED_OUT: nothing was
// appended, and every client retries it.
func (p *Partition) AdmitProduce(acks int16) (leaderEpoch int32, err error) {
	if p.role != RoleLeader {
		return NoEpoch, errorf(codeNotLeaderOrFollower, "replica %d is %s for leader epoch %d", p.cfg.ReplicaID, p.role, p.state.LeaderEpoch)
	}
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		return NoEpoch, errorf(codeInvalidRequiredAcks, "acks %d is not 0, 1 or -1", acks)
	}
	if acks != AcksAll {
		return p.state.LeaderEpoch, nil
	}
	if p.underMinISR() && !p.cfg.Bugs.ISRMinIgnored {
		return NoEpoch, errorf(codeNotEnoughReplicas, "ISR %v is smaller than min.insync.replicas %d", p.state.ISR, p.effectiveMinISR())
	}
	if len(p.acks.waiters) >= p.cfg.AckWaitersMax {
		return NoEpoch, errorf(codeRequestTimedOut, "%d acks=all produces already wait on this partition (AckWaitersMax)", len(p.acks.waiters))
	}
	return p.state.LeaderEpoch, nil
}

// OnLeaderAppend tells the leader that a batch admitted by AdmitProduce is in
// the log. An acks=all batch waits until the HW passes it; acks 0 and 1 are
// the broker's to answer now. The HW may advance (an ISR of one), completing
// waiters; collect them with TakeAckResults.
func (p *Partition) OnLeaderAppend(a LeaderAppend, nowMs int64) error {
	defer p.checkInvariants()
	if p.role != RoleLeader {
		return fmt.Errorf("replica %d: append reported while %s", p.cfg.ReplicaID, p.role)
	}
	if leo := p.log.LogEndOffset(); a.LastOffset >= leo || a.LastOffset < p.hw {
		return fmt.Errorf("replica %d: appended last offset %d is not in [HW %d, LEO %d)", p.cfg.ReplicaID, a.LastOffset, p.hw, leo)
	}
	if a.Acks == AcksAll {
		w := ackWaiter{requestID: a.RequestID, requiredOffset: a.LastOffset + 1, deadlineMs: a.DeadlineMs}
		if p.cfg.Bugs.EarlyAck {
			// Planted bug early-ack: acknowledged on the leader's append alone.
			p.acks.results = append(p.acks.results, AckResult{RequestID: w.requestID})
		} else {
			p.acks.addWaiter(w)
		}
	}
	p.maybeAdvanceHighWatermark(nowMs)
	return nil
}

// completeAcks completes, in order, the waiters the HW has passed.
func (p *Partition) completeAcks() {
	minISR, isrSize := p.effectiveMinISR(), len(p.maximalISR())
	n := 0
	for _, w := range p.acks.waiters {
		done, code := ackOutcome(p.hw, w.requiredOffset, isrSize, minISR, p.cfg.Bugs.ISRMinIgnored)
		if !done {
			break // waiters are in increasing requiredOffset
		}
		p.acks.results = append(p.acks.results, AckResult{RequestID: w.requestID, Error: code})
		n++
	}
	p.acks.waiters = p.acks.waiters[n:]
}

// failAcksIfUnderMinISR fails every waiter with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND once the committed ISR is below
// min.insync.replicas. Kafka would let them wait for the timeout: its HW no
// longer advances below min ISR, so checkEnoughReplicasReachOffset returns
// this error only in a race. Strand answers at once, as the replication
// issue's table requires; the records stay in the log and may still commit,
// exactly as after a timeout.
func (p *Partition) failAcksIfUnderMinISR() {
	if !p.underMinISR() || p.cfg.Bugs.ISRMinIgnored {
		return
	}
	p.failAllAcks(codeNotEnoughReplicasAfterAppend)
}

// failAllAcks completes every waiter with code.
func (p *Partition) failAllAcks(code int16) {
	for _, w := range p.acks.waiters {
		p.acks.results = append(p.acks.results, AckResult{RequestID: w.requestID, Error: code})
	}
	p.acks.waiters = nil
}

// ExpireAcks completes with REQUEST_TIMED_OUT every waiter whose deadline is
// at or before nowMs. The broker owns the timer; see NextAckDeadlineMs.
func (p *Partition) ExpireAcks(nowMs int64) {
	defer p.checkInvariants()
	kept := p.acks.waiters[:0]
	for _, w := range p.acks.waiters {
		if w.deadlineMs <= nowMs {
			p.acks.results = append(p.acks.results, AckResult{RequestID: w.requestID, Error: codeRequestTimedOut})
		} else {
			kept = append(kept, w)
		}
	}
	p.acks.waiters = kept
}

// NextAckDeadlineMs returns the earliest waiter deadline, if any waits.
func (p *Partition) NextAckDeadlineMs() (int64, bool) {
	if len(p.acks.waiters) == 0 {
		return 0, false
	}
	earliest := p.acks.waiters[0].deadlineMs
	for _, w := range p.acks.waiters[1:] {
		earliest = min(earliest, w.deadlineMs)
	}
	return earliest, true
}

// AckWaiters is the number of acks=all produces waiting.
func (p *Partition) AckWaiters() int { return len(p.acks.waiters) }

// TakeAckResults returns the acks=all completions since the last call, in
// completion order, and forgets them.
func (p *Partition) TakeAckResults() []AckResult {
	out := p.acks.results
	p.acks.results = nil
	return out
}
