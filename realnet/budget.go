package realnet

import "sync"

// queueBudget bounds the requests read from all connections and not yet
// taken by the core: queued.max.requests and queued.max.request.bytes.
// Readers acquire before they read a frame's body and the loop releases when
// it hands the request to the core, as Kafka's request channel does; requests
// waiting in the core's purgatory no longer count, so parked long polls can
// never starve the requests that would wake them.
type queueBudget struct {
	mu          sync.Mutex
	cond        sync.Cond
	requests    int64
	bytes       int64
	requestsMax int64
	// bytesMax <= 0 is unbounded (queued.max.request.bytes, as in Kafka).
	bytesMax int64
	closed   bool
}

func newQueueBudget(requestsMax int32, bytesMax int64) *queueBudget {
	b := &queueBudget{requestsMax: int64(requestsMax), bytesMax: bytesMax}
	b.cond.L = &b.mu
	return b
}

// acquire waits until one request of n bytes fits, or the budget closes
// (false). A request larger than the whole byte budget still enters when the
// queue is empty; config refuses such settings anyway.
func (b *queueBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && !b.fits(n) {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.requests++
	b.bytes += n
	return true
}

func (b *queueBudget) fits(n int64) bool {
	if b.requests >= b.requestsMax {
		return false
	}
	return b.bytesMax <= 0 || b.requests == 0 || b.bytes+n <= b.bytesMax
}

// release returns one request of n bytes.
func (b *queueBudget) release(n int64) {
	b.mu.Lock()
	b.requests--
	b.bytes -= n
	if b.requests < 0 || b.bytes < 0 {
		b.mu.Unlock()
		panic("realnet: queue budget released more than acquired")
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

// close wakes every waiter with false, for shutdown.
func (b *queueBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
