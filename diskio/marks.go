package diskio

import (
	"math"
	"sync"
	"sync/atomic"
)

// Append marks tell a caller outside the event loop when the bytes it
// handed to File.Append are no longer referenced. Append keeps p, without
// copying, until the write worker has written it (env.File's ownership
// rule); realnet recycles each Produce request's frame, which the appended
// batches alias, and so must know when every append made while the request
// was handled is written. It takes AppendMark after handling the request
// and recycles the frame once WrittenThrough(mark).
//
// Every queued append of the process gets the next number of appendSeq.
// A writer numbers its appends under its lock, so its queue holds them in
// rising order, and it publishes the number of its oldest unwritten append
// in oldestUnwritten; WrittenThrough asks every live writer.

// appendSeq numbers queued appends across every Disk of the process.
var appendSeq atomic.Uint64

// noneUnwritten is a writer's oldestUnwritten with no append queued.
const noneUnwritten = math.MaxUint64

// liveWriters are the writers that have not exited.
var liveWriters struct {
	mu  sync.Mutex
	all map[*writer]struct{}
}

// AppendMark returns a mark covering every append queued so far, by any
// Disk of the process: precisely, every File.Append that returned before
// the call (on the calling goroutine, or one synchronized with it). An
// Append still running on another goroutine may be numbered within the
// mark before its writer publishes it, so a mark promises nothing about
// appends that race with it; realnet takes its marks on the event loop
// that made the appends it waits for.
func AppendMark() uint64 { return appendSeq.Load() }

// WrittenThrough reports whether every append the mark covers has left
// its write queue: written, or dropped after its file failed. Their bytes
// are no longer referenced then. It may be called on any goroutine.
func WrittenThrough(mark uint64) bool {
	liveWriters.mu.Lock()
	defer liveWriters.mu.Unlock()
	for w := range liveWriters.all { // order-independent: all must agree
		if w.oldestUnwritten.Load() <= mark {
			return false
		}
	}
	return true
}

// register adds w to liveWriters; unregister removes it once it exits.
func (w *writer) register() {
	w.oldestUnwritten.Store(noneUnwritten)
	liveWriters.mu.Lock()
	defer liveWriters.mu.Unlock()
	if liveWriters.all == nil {
		liveWriters.all = map[*writer]struct{}{}
	}
	liveWriters.all[w] = struct{}{}
}

func (w *writer) unregister() {
	liveWriters.mu.Lock()
	defer liveWriters.mu.Unlock()
	delete(liveWriters.all, w)
}

// publishOldest updates oldestUnwritten after the queue changed; mu held.
// Syncs carry no number; the first append in the queue is the oldest.
func (w *writer) publishOldest() {
	for _, job := range w.queue {
		if job.p != nil {
			w.oldestUnwritten.Store(job.seq)
			return
		}
	}
	w.oldestUnwritten.Store(noneUnwritten)
}
