package realnet

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"strand/diskio"
)

// Request frame recycling. Every request is read into a frame buffer that
// its decoded fields alias (kmsg). Under a produce load a fresh buffer per
// frame cost more CPU than anything the broker does with the records: the Go
// heap hands out the big frames, the runtime zeroes them, and after the
// scavenger returned their pages the kernel faults them in and zeroes them
// again (SPEC.md §7.1). So frames come from framePool, and a Produce frame
// goes back to it once nothing refers to it:
//
//   - core/broker keeps nothing of a Produce request after HandleRequest
//     returns except the batches it appended to a log (its responses are
//     built from copies, and a delayed acks=all answer holds only its
//     response); and
//   - diskio's write worker keeps an appended batch, without copying it,
//     until it is written: the frame waits in the pool's pending queue
//     until diskio.WrittenThrough the mark taken after the request was
//     handled, which is usually at once or within one pwritev.
//
// Frames of every other request are left to the garbage collector: the
// group coordinator, for one, keeps JoinGroup metadata slices.

// framePoolClassMin and framePoolClassMax bound the pooled buffer sizes, as
// powers of two: smaller frames are cheap to allocate, and larger ones (up
// to socket.request.max.bytes) rare enough not to keep around.
const (
	framePoolClassMin = 12 // 4 KiB
	framePoolClassMax = 24 // 16 MiB
)

// poisonRecycledFrames, set by the package's tests, overwrites a frame when
// it is recycled, so that anything still referring to it reads garbage
// (a record batch then fails its CRC) instead of passing by luck.
var poisonRecycledFrames bool

// framePoisonByte is what recycled frames are overwritten with.
const framePoisonByte = 0xdb

// produceFrames is the process's pool of Produce frames, shared by every
// connection of every node in it.
var produceFrames framePool

// pendingFramesMax bounds the frames waiting for their appends to be
// written (64 MiB of the largest usual frames, a full default write queue);
// past it a handled frame is left to the garbage collector, which keeps it
// as long as diskio refers to it.
const pendingFramesMax = 64

// framePool recycles request frame buffers by power-of-two size class.
type framePool struct {
	classes [framePoolClassMax + 1]sync.Pool
	// recycled counts the frames put back, for tests.
	recycled atomic.Int64

	mu sync.Mutex
	// pending are handled frames whose appends may still be queued in
	// diskio, oldest first.
	pending []pendingFrame
}

// pendingFrame is a handled frame and the diskio.AppendMark taken after
// it was handled.
type pendingFrame struct {
	fb   *frameBuf
	mark uint64
}

// release takes back a pooled frame whose request the core has handled: at
// once if diskio has written every append made so far, else once it has
// (reclaim). It runs on the event loop right after HandleRequest.
func (p *framePool) release(fb *frameBuf) {
	mark := diskio.AppendMark()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reclaimLocked()
	if len(p.pending) == 0 && diskio.WrittenThrough(mark) {
		p.put(fb)
		return
	}
	if len(p.pending) < pendingFramesMax {
		p.pending = append(p.pending, pendingFrame{fb: fb, mark: mark})
	}
}

// reclaim puts back the pending frames whose appends are written, oldest
// first. Marks from several nodes' loops need not rise along the queue;
// a frame behind a later mark just waits a little longer.
func (p *framePool) reclaim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reclaimLocked()
}

func (p *framePool) reclaimLocked() {
	n := 0
	for n < len(p.pending) && diskio.WrittenThrough(p.pending[n].mark) {
		p.put(p.pending[n].fb)
		p.pending[n] = pendingFrame{}
		n++
	}
	if n > 0 {
		p.pending = append(p.pending[:0], p.pending[n:]...)
	}
}

// frameBuf is a frame's buffer; the pointer travels with the frame so that
// putting it back allocates nothing.
type frameBuf struct {
	buf []byte
	// pooled is set for a buffer of a pooled size, which put takes back.
	pooled bool
}

// get returns a frame of length bytes: its buffer, whose first length bytes
// are the frame, comes from the pool when its size class has one. The
// frame's bytes are not zeroed: the caller reads the whole frame into it.
func (p *framePool) get(length int) *frameBuf {
	p.reclaim()
	class := sizeClass(length)
	if class < 0 {
		return &frameBuf{buf: make([]byte, length)}
	}
	if fb, ok := p.classes[class].Get().(*frameBuf); ok {
		fb.buf = fb.buf[:length]
		return fb
	}
	return &frameBuf{buf: make([]byte, length, 1<<class), pooled: true}
}

// put recycles fb, a buffer get made pooled, whose frame nothing refers to
// any more; release and reclaim call it.
func (p *framePool) put(fb *frameBuf) {
	class := sizeClass(cap(fb.buf))
	if !fb.pooled || cap(fb.buf) != 1<<class {
		panic("realnet: a frame buffer of no pooled size was recycled")
	}
	if poisonRecycledFrames {
		poison(fb.buf[:cap(fb.buf)])
	}
	p.recycled.Add(1)
	p.classes[class].Put(fb)
}

// sizeClass is the power of two a buffer of n bytes is pooled at, or -1 when
// n is outside the pooled sizes.
func sizeClass(n int) int {
	if n <= 0 {
		return -1
	}
	class := max(bits.Len(uint(n-1)), framePoolClassMin)
	if class > framePoolClassMax {
		return -1
	}
	return class
}

// poison overwrites b with framePoisonByte.
func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = framePoisonByte
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}
