package diskio

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// WriteQueueBytesMaxDefault is the default bound on the bytes a Disk's write
// worker holds queued (Options.WriteQueueBytesMax).
const WriteQueueBytesMaxDefault = 64 << 20

// writer is a Disk's write worker: one goroutine that performs the appends
// the event loop queued (File.Append), in the order they were queued, so that
// a pwrite blocked by dirty-page throttling stalls this goroutine and never
// the loop (CLARIFICATIONS.md, "Environment interfaces ... Disk").
//
// Appends are the only queued writes. WriteAt, Truncate and Close first wait
// for the file's queued appends and then run on the caller's goroutine, as
// before: they are rare (recovery, truncation), and keeping them in place
// means the queued writes of a file are always one contiguous run at its end,
// from fileWrites.writtenEnd to fileWrites.queuedEnd.
//
// The queue is bounded by WriteQueueBytesMax: an Append that would exceed it
// waits for room, which is the backpressure of a disk slower than its input.
// That wait cannot deadlock, because the writer never waits for the loop.
//
// A Sync of a file with queued appends is queued here too, behind them, and
// handed to the sync worker only when they are written, so the fsync covers
// them (see syncAfterWrites).
//
// Consecutive queued appends to one file are written by a single pwritev
// (nextRun): under a produce load the loop appends many small batches, and a
// system call per batch was the worker's main cost.
//
// A file that grows by appends gets disk space allocated ahead of its end
// (preallocateAhead), so that its appends land in allocated blocks.
//
// Everything below mu, and every File's writes field but the two of
// preallocateAhead (see fileWrites), is guarded by mu; changed signals any
// change of the queue, of a file's written end, or of its error.
type writer struct {
	mu      sync.Mutex
	changed sync.Cond
	queue   []writeJob
	// queuedBytes counts the bytes of the appends in queue.
	queuedBytes    int64
	queuedBytesMax int64
	stopping       bool
	// pwritev writes iovecs at an offset; internal tests replace it to
	// inject errors or block a write.
	pwritev func(fd int, iovs [][]byte, off int64) (int, error)
	// fallocate allocates [off, off+length) of a file without changing its
	// size; internal tests replace it to inject errors.
	fallocate func(fd int, off, length int64) error
	// syncFile hands a Sync to the sync worker once the writes before it
	// are done; it must not block.
	syncFile func(f *File, done func(error))
	// onExit runs on the writer goroutine once it has stopped and drained:
	// it stops the sync worker, which must outlive the Syncs queued here.
	onExit func()

	// run and iovs are the writer goroutine's scratch space for the jobs
	// it is writing and their bytes.
	run  []writeJob
	iovs [][]byte

	// oldestUnwritten is the number (appendSeq) of the oldest queued
	// append, or noneUnwritten; written under mu, read by WrittenThrough.
	oldestUnwritten atomic.Uint64
}

// iovecsMax bounds the appends one pwritev writes: Linux's IOV_MAX.
const iovecsMax = 1024

// writeJob is one queued append (p != nil) or a Sync waiting behind the
// file's appends (done != nil).
type writeJob struct {
	f    *File
	p    []byte
	off  int64
	done func(error)
	// seq numbers an append in appendSeq (marks.go).
	seq uint64
}

// fileWrites is a File's share of its writer's state, guarded by writer.mu.
type fileWrites struct {
	// writtenEnd is the end of the bytes that are in the file (page
	// cache); queuedEnd the end of the bytes appended, written or queued.
	// Bytes in [writtenEnd, queuedEnd) are in queued, in order.
	writtenEnd int64
	queuedEnd  int64
	queued     []writeJob
	// err is the first failed queued write, for good: every later write,
	// Sync and read of bytes at or past writtenEnd reports it.
	err error
	// failed mirrors err != nil, so Size can tell without the lock.
	failed atomic.Bool

	// allocateAhead is set for files preallocateAhead serves: not memory
	// mapped, and not yet refused by the file system. preallocatedEnd is
	// where the file's allocated space ends, as far as this File knows:
	// its size at open, or what PreallocateBytes or preallocateAhead
	// allocated. preallocateAhead reads and writes both without mu on the
	// writer goroutine, which owns them while the file has queued
	// appends; the event loop changes them only under mu with the file
	// drained, and mu orders the two.
	allocateAhead   bool
	preallocatedEnd int64
}

// Space allocated ahead of a file's end (preallocateAhead): a file is served
// once its appends pass allocateAheadFromBytes, so that small files (a
// checkpoint, a snapshot) never hold more space than they use, and then
// keeps a quarter of its size allocated past its end, at least
// allocateAheadFromBytes and at most allocateAheadBytesMax.
const (
	allocateAheadFromBytes = 1 << 20
	allocateAheadBytesMax  = 8 << 20
)

// fallocateKeepSize allocates disk space without changing the file's size.
func fallocateKeepSize(fd int, off, length int64) error {
	return ignoringEINTR(func() error { return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, length) })
}

func newWriter(queuedBytesMax int64, pwritev func(int, [][]byte, int64) (int, error), syncFile func(*File, func(error)), onExit func()) *writer {
	w := &writer{queuedBytesMax: queuedBytesMax, pwritev: pwritev, fallocate: fallocateKeepSize, syncFile: syncFile, onExit: onExit}
	w.changed.L = &w.mu
	w.register()
	go w.runLoop()
	return w
}

// startFile records the size of a file just opened, whether space is to be
// allocated ahead of its appends, and where its allocated space ends (past
// size if it was opened with OpenOptions.PreallocateBytes).
func (w *writer) startFile(f *File, size int64, allocateAhead bool, preallocatedEnd int64) {
	w.mu.Lock()
	f.writes.writtenEnd, f.writes.queuedEnd = size, size
	f.writes.allocateAhead, f.writes.preallocatedEnd = allocateAhead, preallocatedEnd
	w.mu.Unlock()
}

// appendAt queues p for f at offset off, the file's logical end, waiting for
// room in the queue. It reports false, queueing nothing, if the writer is
// stopping (the Disk was closed): the caller then writes in place.
func (w *writer) appendAt(f *File, p []byte, off int64) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.stopping && w.queuedBytes > 0 && w.queuedBytes+int64(len(p)) > w.queuedBytesMax && f.writes.err == nil {
		w.changed.Wait()
	}
	if f.writes.err != nil {
		return true, f.writes.err
	}
	if w.stopping {
		return false, nil
	}
	if off != f.writes.queuedEnd {
		panic(fmt.Sprintf("diskio: append to %s at %d, but its queued writes end at %d", f.path, off, f.writes.queuedEnd))
	}
	job := writeJob{f: f, p: p, off: off, seq: appendSeq.Add(1)}
	w.queue = append(w.queue, job)
	if w.oldestUnwritten.Load() == noneUnwritten {
		w.publishOldest()
	}
	w.queuedBytes += int64(len(p))
	f.writes.queued = append(f.writes.queued, job)
	f.writes.queuedEnd = off + int64(len(p))
	w.changed.Broadcast()
	return true, nil
}

// syncAfterWrites queues done as a Sync of f behind f's queued appends and
// reports true, or reports false when f has none queued (nor a failed one):
// then the caller hands the Sync to the sync worker itself.
func (w *writer) syncAfterWrites(f *File, done func(error)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(f.writes.queued) == 0 && f.writes.err == nil {
		return false
	}
	job := writeJob{f: f, done: done}
	w.queue = append(w.queue, job)
	f.writes.queued = append(f.writes.queued, job)
	w.changed.Broadcast()
	return true
}

// waitWritten blocks until f's bytes below end are in the file, and returns
// f's write error if they never will be.
func (w *writer) waitWritten(f *File, end int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for f.writes.writtenEnd < end && f.writes.err == nil && end <= f.writes.queuedEnd {
		w.changed.Wait()
	}
	switch {
	case f.writes.writtenEnd >= end:
		return nil
	case f.writes.err != nil:
		return f.writes.err
	}
	return fmt.Errorf("diskio: wait for %s to be written to %d: only %d bytes were appended: %w", f.path, end, f.writes.queuedEnd, io.ErrUnexpectedEOF)
}

// drain blocks until f has nothing queued, and returns its write error.
func (w *writer) drain(f *File) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(f.writes.queued) > 0 {
		w.changed.Wait()
	}
	return f.writes.err
}

// wroteInPlace records a write made on the caller's goroutine (WriteAt,
// Truncate, an Append after the Disk closed) with f drained: the file now
// ends at size. A truncation released the space allocated past size.
func (w *writer) wroteInPlace(f *File, size int64) {
	w.mu.Lock()
	f.writes.writtenEnd, f.writes.queuedEnd = size, size
	f.writes.preallocatedEnd = min(f.writes.preallocatedEnd, size)
	w.mu.Unlock()
}

// allocatedPastEnd reports whether preallocateAhead allocated space past
// f's end, size; f is drained.
func (w *writer) allocatedPastEnd(f *File, size int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f.writes.err == nil && f.writes.preallocatedEnd > size
}

// readQueued fills the part of p (read at off) that lies at or past f's
// written end from f's queued appends, and returns the written end: the
// caller reads the part before it from the file. Both parts are taken under
// one lock, so a write completing meanwhile cannot slip between them. Past a
// failed write there is nothing to read: it returns the write error.
func (w *writer) readQueued(f *File, p []byte, off int64) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	writtenEnd := f.writes.writtenEnd
	end := off + int64(len(p))
	if end <= writtenEnd {
		return writtenEnd, nil
	}
	if f.writes.err != nil {
		return writtenEnd, f.writes.err
	}
	from := max(off, writtenEnd)
	for _, job := range f.writes.queued {
		if from == end {
			break
		}
		if job.p == nil || from < job.off || from >= job.off+int64(len(job.p)) {
			continue
		}
		from += int64(copy(p[from-off:], job.p[from-job.off:]))
	}
	if from != end {
		panic(fmt.Sprintf("diskio: %s: bytes [%d, %d) below the logical size are neither written nor queued", f.path, from, end))
	}
	return writtenEnd, nil
}

// sizeAfterFailure is the size of a file whose queued write failed: the
// bytes that reached it.
func (w *writer) sizeAfterFailure(f *File) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f.writes.writtenEnd
}

// stopAfterDrain makes the writer exit once its queue is empty; appends
// queued after it are refused (appendAt reports false).
func (w *writer) stopAfterDrain() {
	w.mu.Lock()
	w.stopping = true
	w.changed.Broadcast()
	w.mu.Unlock()
}

func (w *writer) runLoop() {
	defer w.onExit()
	defer w.unregister()
	for {
		run, ok := w.nextRun()
		if !ok {
			return
		}
		if run[0].done != nil {
			w.finishSync(run[0])
			clear(w.run)
			continue
		}
		var n int
		var err error
		if f := run[0].f; !f.writes.failed.Load() { // else finishAppends just drops them
			w.iovs = w.iovs[:0]
			for _, job := range run {
				w.iovs = append(w.iovs, job.p)
			}
			last := run[len(run)-1]
			w.preallocateAhead(f, run[0].off, last.off+int64(len(last.p)))
			n, err = w.pwritevAll(f.fd, w.iovs, run[0].off)
			clear(w.iovs) // let written bytes go
		}
		w.finishAppends(run, n, err)
		clear(w.run) // let written bytes go
	}
}

// nextRun returns the oldest job, a Sync alone or an append with the appends
// to the same file right behind it (at most iovecsMax), without removing them
// from the queue (readers still find their bytes); or false once stopping and
// drained. A file's queued appends are one contiguous run of its bytes, so
// the appends returned are too.
func (w *writer) nextRun() ([]writeJob, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && !w.stopping {
		w.changed.Wait()
	}
	if len(w.queue) == 0 {
		return nil, false
	}
	w.run = append(w.run[:0], w.queue[0])
	if w.queue[0].done != nil {
		return w.run, true
	}
	for _, job := range w.queue[1:min(len(w.queue), iovecsMax)] {
		last := &w.run[len(w.run)-1]
		if job.f != last.f || job.done != nil {
			break
		}
		if job.off != last.off+int64(len(last.p)) {
			panic(fmt.Sprintf("diskio: %s: queued append at %d, but the one before it ends at %d", job.f.path, job.off, last.off+int64(len(last.p))))
		}
		w.run = append(w.run, job)
	}
	return w.run, true
}

// preallocateAhead allocates disk space ahead of f's end before the writer
// writes f's bytes [start, end), so that appends fill blocks already
// allocated (as unwritten extents) instead of reserving and mapping
// delayed-allocation blocks page by page: on ext4 here that bookkeeping
// (ext4_da_get_block_prep, ext4_da_reserve_space) was about a quarter of the
// CPU of a 1 MB buffered append into pages the host had backed (0.41 ns per
// byte without, 0.30 with). The size does not change (FALLOC_FL_KEEP_SIZE);
// Close releases what was not used. One call allocates a quarter of the size
// ahead (allocateAheadFromBytes to allocateAheadBytesMax), so a file
// appended to at 300 MB/s costs about 40 calls a second. A file system that
// refuses (no support, no space) ends it for the file: its appends then
// allocate as before, and report a shortage themselves. Writer goroutine.
func (w *writer) preallocateAhead(f *File, start, end int64) {
	if !f.writes.allocateAhead || end < allocateAheadFromBytes || end <= f.writes.preallocatedEnd {
		return
	}
	ahead := min(max(end/4, allocateAheadFromBytes), allocateAheadBytesMax)
	from := max(f.writes.preallocatedEnd, start)
	to := end + ahead
	if err := w.fallocate(f.fd, from, to-from); err != nil {
		f.writes.allocateAhead = false
		return
	}
	f.writes.preallocatedEnd = to
}

// pop removes the oldest job, which is job, from both queues; mu held.
func (w *writer) pop(job writeJob) {
	w.queue[0] = writeJob{}
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = nil // let the drained backing array go
	}
	q := &job.f.writes.queued
	(*q)[0] = writeJob{}
	*q = (*q)[1:]
	if len(*q) == 0 {
		*q = nil
	}
	if job.p != nil {
		w.publishOldest()
	}
	w.changed.Broadcast()
}

// finishAppends records the appends of run, the oldest jobs, as performed
// by one pwritevAll that wrote n bytes and stopped with err. The first append
// not wholly written (a short write included) fails the file for good: its
// Size shrinks to what was written.
func (w *writer) finishAppends(run []writeJob, n int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start := run[0].off
	for _, job := range run {
		f := job.f
		w.queuedBytes -= int64(len(job.p))
		w.pop(job)
		if f.writes.err != nil {
			continue // a write after a failed one was never attempted
		}
		wrote := min(max(int64(n)-(job.off-start), 0), int64(len(job.p)))
		f.writes.writtenEnd = job.off + wrote
		if wrote < int64(len(job.p)) {
			if err == nil {
				panic(fmt.Sprintf("diskio: %s: pwritevAll wrote %d bytes at %d and reported no error, but the append at %d is %d bytes", f.path, n, start, job.off, len(job.p)))
			}
			f.writes.err = wrapErr("append", f.path, fmt.Errorf("wrote %d of %d bytes at %d: %w", wrote, len(job.p), job.off, err))
			f.writes.failed.Store(true)
		}
	}
}

// finishSync hands a Sync whose writes are done to the sync worker, or
// reports the file's write error through it.
func (w *writer) finishSync(job writeJob) {
	w.mu.Lock()
	w.pop(job)
	err := job.f.writes.err
	w.mu.Unlock()
	if err != nil {
		job.f.disk.enqueueFailure(job.done, fmt.Errorf("diskio: sync %s: a write before it failed: %w", job.f.path, err))
		return
	}
	w.syncFile(job.f, job.done)
}

// pwritevAll writes the bytes of iovs, in order, at off, looping over short
// writes as pwriteAll does. It returns how many bytes reached the file, with
// the error that stopped it. It consumes iovs (the slices are advanced past
// what was written).
func (w *writer) pwritevAll(fd int, iovs [][]byte, off int64) (int, error) {
	total := 0
	for _, p := range iovs {
		total += len(p)
	}
	written := 0
	for written < total {
		for len(iovs[0]) == 0 {
			iovs = iovs[1:]
		}
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = w.pwritev(fd, iovs, off+int64(written))
			return err
		})
		if err != nil {
			return written, err
		}
		if n <= 0 || n > total-written {
			if n == 0 {
				return written, io.ErrShortWrite
			}
			panic(fmt.Sprintf("diskio: pwritev of %d bytes reported %d written", total-written, n))
		}
		written += n
		for rest := n; rest > 0; {
			k := min(rest, len(iovs[0]))
			iovs[0] = iovs[0][k:]
			rest -= k
			if len(iovs[0]) == 0 {
				iovs = iovs[1:]
			}
		}
	}
	return written, nil
}

// ReadRegionAt reads len(p) bytes at off for a goroutine other than the
// event loop (a connection writer copying a fetched region): it waits until
// they are written (WaitWritten), then preads them from the file. The core
// handed out the region, so the bytes are below the logical size; keeping the
// file open and untruncated meanwhile is the caller's business (pinning).
// ReadAt, which serves queued bytes from memory, is for the loop only.
func (f *File) ReadRegionAt(p []byte, off int64) (int, error) {
	if err := f.WaitWritten(off + int64(len(p))); err != nil {
		return 0, err
	}
	read := 0
	for read < len(p) {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Pread(f.fd, p[read:], off+int64(read))
			return err
		})
		if err != nil {
			return read, wrapErr("readregion", f.path, err)
		}
		if n == 0 {
			return read, fmt.Errorf("diskio: readregion %s: file ends at %d, inside the region [%d, %d): %w", f.path, off+int64(read), off, off+int64(len(p)), env.ErrIO)
		}
		read += n
	}
	return read, nil
}
