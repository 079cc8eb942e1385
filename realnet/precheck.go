package realnet

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/core/wire"
)

// requestChecks is what a connection reader applies to a request before it
// posts it to the loop: the limits a request is walked against before it
// is decoded, and the core's newest pre-check with the buffers its
// decompression may hold (SPEC.md §7.3 and
// §7.4).
type requestChecks struct {
	// limits are core/wire's, from config.Limits.
	limits wire.RequestLimits
	// prechecker is the core's newest env.Prechecker, an immutable value
	// the loop publishes (Network.SetPrechecker) and readers load.
	prechecker atomic.Pointer[prechecker]
	// buffers bounds the decompression buffers the pre-checks of all
	// connections hold at once
	// (strand.produce.decompression.buffer.bytes.max).
	buffers *bufferBudget
}

// prechecker boxes an env.Prechecker for atomic.Pointer.
type prechecker struct{ env.Prechecker }

func newRequestChecks(limits config.Limits) *requestChecks {
	return &requestChecks{
		limits: wire.RequestLimits{
			TopicsMax:       int(limits.RequestTopicsMax),
			PartitionsMax:   int(limits.RequestPartitionsMax),
			EntriesMax:      int(limits.RequestEntriesMax),
			TaggedFieldsMax: int(limits.RequestTaggedFieldsMax),
		},
		buffers: newBufferBudget(limits.ProduceDecompressionBufferBytesMax),
	}
}

// SetPrechecker keeps the core's newest prechecker for the readers
// (env.Network). It runs on the loop.
func (n *Network) SetPrechecker(p env.Prechecker) {
	n.checks.prechecker.Store(&prechecker{p})
}

// precheck runs the core's newest pre-check on req, on the calling
// connection reader; before the core published one, req is handed on as
// it is and the loop checks it in full.
func (c *requestChecks) precheck(hdr env.RequestHeader, req kmsg.Request) kmsg.Request {
	p := c.prechecker.Load()
	if p == nil {
		return req
	}
	return p.Precheck(hdr, req, c.buffers)
}

// bufferBudget is env.BufferBudget over goroutines: bytes held at once,
// waited for.
type bufferBudget struct {
	mu       sync.Mutex
	cond     sync.Cond
	bytes    int64
	bytesMax int64
	// bytesPeak is the most held at once, for tests and diagnostics.
	bytesPeak int64
	closed    bool
}

var _ env.BufferBudget = (*bufferBudget)(nil)

func newBufferBudget(bytesMax int64) *bufferBudget {
	if bytesMax <= 0 {
		panic("realnet: buffer budget must be positive") // config refuses it
	}
	b := &bufferBudget{bytesMax: bytesMax}
	b.cond.L = &b.mu
	return b
}

// Acquire waits until bytes fit beside what is held; more than the whole
// budget is granted once nothing is held. False once the budget closed.
func (b *bufferBudget) Acquire(bytes int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.bytes > 0 && b.bytes+bytes > b.bytesMax {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.bytes += bytes
	b.bytesPeak = max(b.bytesPeak, b.bytes)
	return true
}

// peak is the most bytes held at once so far.
func (b *bufferBudget) peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytesPeak
}

// Release returns bytes an Acquire took.
func (b *bufferBudget) Release(bytes int64) {
	b.mu.Lock()
	b.bytes -= bytes
	if b.bytes < 0 {
		b.mu.Unlock()
		panic("realnet: buffer budget released more than acquired")
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

// close wakes every waiter with false, for shutdown.
func (b *bufferBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
