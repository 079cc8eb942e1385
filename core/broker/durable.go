package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topics with flush.messages=1 promise that no acknowledged record is lost
// whatever crashes (CLARIFICATIONS.md, "Syncing every batch"). Kafka flushes
// synchronously on every append, on the leader and on followers before they
// fetch again. Strand's Syncs are asynchronous, so the broker waits instead:
//
//   - the leader answers a produce (acks=1, or acks=all once the HW has
//     passed it) only when its own recovery point has passed the batch;
//   - a follower fetches again only when its recovery point has reached its
//     LEO, so the LEO it reports to the leader, which moves the HW, is
//     durable.
//
// Together: an acknowledged record is durable on the leader and on every
// ISR member.

// awaitDurable holds an acks=1 produce until the batch is durable, when
// the topic asks for it, at most until the request's deadline.
func (pm *partitionManager) awaitDurable(slot *produceSlot) {
	p := slot.p
	if !p.syncAcks || p.log.RecoveryPoint() > slot.lastOffset {
		return
	}
	slot.pending.remaining++
	p.durableWaits = append(p.durableWaits, slot)
	pm.armProduceExpiry(p)
}

// parkUntilDurable holds a committed acks=all produce until the leader's
// copy is durable, at most until the request's deadline, the one its wait
// for the HW had. It reports whether the slot was parked.
func (pm *partitionManager) parkUntilDurable(slot *produceSlot) bool {
	p := slot.p
	if !p.syncAcks || p.log.RecoveryPoint() > slot.lastOffset {
		return false
	}
	p.durableWaits = append(p.durableWaits, slot)
	pm.armProduceExpiry(p)
	return true
}

// onDurable runs when a partition's recovery point advances: it answers the
// produces now durable, and lets a follower fetch again.
func (pm *partitionManager) onDurable(p *partition) {
	kept := p.durableWaits[:0]
	for _, slot := range p.durableWaits {
		if p.log.RecoveryPoint() > slot.lastOffset {
			pm.releaseProduce(slot.pending)
			continue
		}
		kept = append(kept, slot)
	}
	p.durableWaits = kept
	if f := pm.fetchers.fetcherOf(p); f != nil {
		pm.fetchers.runFetcher(f)
	}
}

// expireDurableWaits answers the produces whose batch did not become
// durable by their deadline (at or before nowMs): the log failed
// (KAFKA_STORAGE_ERROR) or its Sync is slow (REQUEST_TIMED_OUT).
func (pm *partitionManager) expireDurableWaits(p *partition, nowMs int64) {
	kept := p.durableWaits[:0]
	var expired []*produceSlot
	for _, slot := range p.durableWaits {
		if slot.pending.deadlineMs <= nowMs {
			expired = append(expired, slot)
			continue
		}
		kept = append(kept, slot)
	}
	p.durableWaits = kept
	for _, slot := range expired {
		slot.part.ErrorCode, slot.part.BaseOffset = kerr.RequestTimedOut.Code, -1
		if p.storageFailed() {
			slot.part.ErrorCode = kerr.KafkaStorageError.Code
		}
		pm.releaseProduce(slot.pending)
	}
}

// awaitingSync reports whether a follower must wait for its Sync before
// fetching again. After a restart the recovered records are not yet known
// to be durable (the recovery point is the checkpointed one), and no append
// will flush them: it asks for the flush itself, once.
func (rf *replicaFetchers) awaitingSync(p *partition) bool {
	if !p.syncAcks || p.log.RecoveryPoint() >= p.log.LogEndOffset() {
		return false
	}
	if !p.flushRequested {
		p.flushRequested = true
		p.log.Flush(p.log.LogEndOffset(), func(error) {
			// A truncation meanwhile keeps the recovery point where it
			// was: ask again on the next fetch round.
			p.flushRequested = false
			rf.parts.onDurable(p)
		})
	}
	// The Flush may have completed at once, with nothing left to sync:
	// then nothing would run the fetcher again.
	return p.log.RecoveryPoint() < p.log.LogEndOffset()
}
