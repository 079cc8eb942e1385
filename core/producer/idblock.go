package producer

import "fmt"

// IDBlock hands out the producer ids of the blocks this broker got from the
// controller (AllocateProducerIds), for InitProducerId without a
// transactional id, as Kafka's RPCProducerIdManager does: ids come from the
// current block; once 90% of it is used the next block is requested ahead
// (PID_PREFETCH_THRESHOLD); when both are used up, InitProducerId answers
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry. A producer id starts at
// epoch 0 (TransactionCoordinator.handleInitProducerId).
//
// It is pure: the broker sends the request when ShouldRequest says so and
// reports the answer with AddBlock or RequestFailed.
type IDBlock struct {
	current, next idRange
	hasNext       bool
	inFlight      bool
	// retryAtMs is when a failed request may be retried.
	retryAtMs int64
}

// idRange is a block: ids [first, first+size), next the one to hand out.
type idRange struct{ first, size, next int64 }

func (r idRange) remaining() int64 { return r.first + r.size - r.next }

// IDBlockRetryBackoffMs is how long after a failed request the next one may
// go (RPCProducerIdManager.RETRY_BACKOFF_MS).
const IDBlockRetryBackoffMs = 50

// idPrefetchPercent is PID_PREFETCH_THRESHOLD, in percent of a block.
const idPrefetchPercent = 90

// Next hands out the next producer id, moving to the prefetched block when
// the current one is used up. ok is false when no id is available: answer
// COORDINATOR_LOAD_IN_PROGRESS, and send the request ShouldRequest asks for.
func (b *IDBlock) Next() (producerID int64, ok bool) {
	if b.current.remaining() == 0 && b.hasNext {
		b.current, b.next, b.hasNext = b.next, idRange{}, false
	}
	if b.current.remaining() == 0 {
		return 0, false
	}
	producerID = b.current.next
	b.current.next++
	return producerID, true
}

// ShouldRequest reports whether to send AllocateProducerIds now: no request
// is in flight, no block waits, the backoff after a failure has passed, and
// the current block is at least 90% used. The caller then calls
// RequestStarted.
func (b *IDBlock) ShouldRequest(nowMs int64) bool {
	if b.inFlight || b.hasNext || nowMs < b.retryAtMs {
		return false
	}
	used := b.current.size - b.current.remaining()
	return b.current.size == 0 || used*100 >= b.current.size*idPrefetchPercent
}

// RequestStarted records that AllocateProducerIds was sent.
func (b *IDBlock) RequestStarted() { b.inFlight = true }

// RequestFailed records a failed request (an error code, or no answer): the
// next may go IDBlockRetryBackoffMs later.
func (b *IDBlock) RequestFailed(nowMs int64) {
	b.inFlight = false
	b.retryAtMs = nowMs + IDBlockRetryBackoffMs
}

// AddBlock records the controller's answer: ids [start, start+length). The
// block must be non-empty and lie above every id handed out so far, since
// the controller allocates blocks in increasing order; anything else is
// refused with an error, and the request counts as failed.
func (b *IDBlock) AddBlock(start int64, length int32, nowMs int64) error {
	b.inFlight = false
	highest := b.current.first + b.current.size
	if start < 0 || length <= 0 || start < highest {
		b.retryAtMs = nowMs + IDBlockRetryBackoffMs
		return fmt.Errorf("producer id block [%d, +%d): must be non-empty and start at or above %d", start, length, highest)
	}
	block := idRange{first: start, size: int64(length), next: start}
	if b.current.remaining() == 0 {
		b.current = block
	} else {
		b.next, b.hasNext = block, true
	}
	return nil
}
