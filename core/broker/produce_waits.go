package broker

// What a produce waits for, and until when. A produce that cannot be
// answered at its append waits in one place at a time, under one deadline,
// the request's (pendingProduce.deadlineMs: the first whole millisecond by
// which its TimeoutMillis has passed, so it never times out early), as
// Kafka's DelayedProduce has one timeout:
//
//   - acks=all waits for the HW in its replica's ack tracker
//     (replica.Partition: the one purgatory of that wait, which holds the
//     deadline and fails the waiter on a leadership change or an ISR below
//     min.insync.replicas); the partition's ackWaits maps the waiter's id
//     to where its answer goes;
//   - on a flush.messages=1 topic, acks=1 and a committed acks=all wait
//     for the leader's recovery point in the partition's durableWaits
//     (durable.go), under the same deadline.
//
// Each partition has one timer for both, at the earliest deadline among
// them (replica.NextAckDeadlineMs and the durable waits' own), as
// core/quorum's driver arms one timer for its Raft's NextDeadlineMs. It
// fires at that millisecond, expires what is due, and arms itself for the
// next; a timer whose waiters were all answered fires once more for
// nothing.

import "math"

// deadlineMs is the monotonic millisecond by which timeoutMs will have
// passed from now: the first whole millisecond at or after it, so that a
// timer armed for the deadline never fires before timeoutMs has passed.
func (e *nodeEnv) deadlineMs(timeoutMs int64) int64 {
	return (e.clock.MonotonicNs()+1e6-1)/1e6 + timeoutMs
}

// armProduceExpiry arms p's produce timer for the earliest deadline of
// what waits on p, unless it is armed for that deadline or an earlier one.
func (pm *partitionManager) armProduceExpiry(p *partition) {
	next, ok := p.nextProduceDeadlineMs()
	if !ok || (p.produceExpiry != nil && p.produceExpiryAtMs <= next) {
		return
	}
	p.stopProduceExpiry()
	// Fired at or after next in whole milliseconds, nowMs (the
	// milliseconds floored) has reached the deadline.
	delayNs := max(next*1e6-pm.clock.MonotonicNs(), 0)
	p.produceExpiryAtMs = next
	p.produceExpiry = pm.clock.SetTimer(delayNs, func() {
		p.produceExpiry = nil
		pm.expireProduces(p)
	})
}

// expireProduces answers the produces waiting on p whose deadline has
// passed, REQUEST_TIMED_OUT (KAFKA_STORAGE_ERROR for a durable wait on a
// failed log), and arms the timer for the rest.
func (pm *partitionManager) expireProduces(p *partition) {
	now := pm.nowMs()
	waiting := p.replica.AckWaiters()
	p.replica.ExpireAcks(now)
	if p.replica.AckWaiters() != waiting {
		pm.afterReplicaChange(p)
	}
	pm.expireDurableWaits(p, now)
	pm.armProduceExpiry(p)
}

// nextProduceDeadlineMs is the earliest deadline of the produces waiting on
// p; false if none waits.
func (p *partition) nextProduceDeadlineMs() (int64, bool) {
	next, ok := p.replica.NextAckDeadlineMs()
	if !ok {
		next = math.MaxInt64
	}
	for _, slot := range p.durableWaits {
		next, ok = min(next, slot.pending.deadlineMs), true
	}
	return next, ok
}

// stopProduceExpiry stops p's produce timer, if armed.
func (p *partition) stopProduceExpiry() {
	if p.produceExpiry != nil {
		p.produceExpiry.Stop()
		p.produceExpiry = nil
	}
}
