package diskio

import (
	"errors"
	"fmt"
	"sync"

	"strand/core/env"
)

// syncJob is one queued fsync: of a file (file != nil) or of a directory.
// Syncs asked for while the job is still queued join it (dones grows): one
// fsync that has not started yet covers every write issued before any of
// them, so joining keeps the order guarantee.
type syncJob struct {
	file  *File
	dir   string
	dones []func(error)
	// failWith, when set, is reported without any fsync (a Sync on a closed
	// File, a SyncDir with a bad path); file and dir are then unset. It
	// travels through the queue so that it reaches the event loop in order,
	// through post.
	failWith error
}

// worker is a Disk's I/O goroutine. It owns every fsync of its Disk, so a
// slow fsync blocks neither the event loop nor other log directories.
//
// The queue is bounded by construction, not by a count that makes callers
// wait: it holds at most one job per open File and one per directory, because
// a Sync of something already queued joins its job (plus one job per misused
// call, a Sync after Close or a SyncDir of a bad path, which report an error).
// Enqueueing therefore never blocks. A count limit would have to block the event loop when reached, and
// the event loop blocked in Sync while the worker blocks posting to that same
// full loop is a deadlock.
//
// Everything below mu is shared with the event loop; poisoned state (on File
// and poisonedDirs) is touched only by the worker goroutine.
type worker struct {
	post      func(func())
	syncFile  func(f *File) error
	syncDir   func(dir string) error
	onExit    func()
	mu        sync.Mutex
	nonEmpty  sync.Cond
	queue     []*syncJob
	queuedDir map[string]*syncJob
	stopping  bool

	poisonedDirs map[string]bool // worker goroutine only
}

// newWorker starts a worker. onExit runs on the worker goroutine once it has
// stopped and drained its queue.
func newWorker(post func(func()), syncFile func(*File) error, syncDir func(string) error, onExit func()) *worker {
	w := &worker{
		post:         post,
		syncFile:     syncFile,
		syncDir:      syncDir,
		onExit:       onExit,
		queuedDir:    make(map[string]*syncJob),
		poisonedDirs: make(map[string]bool),
	}
	w.nonEmpty.L = &w.mu
	go w.run()
	return w
}

// enqueueFile queues an fdatasync of f, or joins the one already queued. It
// reports false if the worker is stopping, in which case nothing was queued.
func (w *worker) enqueueFile(f *File, done func(error)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f.queuedSync != nil {
		f.queuedSync.dones = append(f.queuedSync.dones, done)
		return true
	}
	if w.stopping {
		return false
	}
	job := &syncJob{file: f, dones: []func(error){done}}
	f.queuedSync = job
	f.refs.Add(1) // the fd stays open until this job has run
	w.push(job)
	return true
}

// enqueueFailure queues a completion that reports err without any fsync, so
// that even a Sync that cannot run reaches the event loop through post, in
// order with the others and never from inside the caller's call.
func (w *worker) enqueueFailure(done func(error), err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return false
	}
	w.push(&syncJob{dones: []func(error){done}, failWith: err})
	return true
}

// enqueueDir queues an fsync of dir, or joins the one already queued.
func (w *worker) enqueueDir(dir string, done func(error)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if job := w.queuedDir[dir]; job != nil {
		job.dones = append(job.dones, done)
		return true
	}
	if w.stopping {
		return false
	}
	job := &syncJob{dir: dir, dones: []func(error){done}}
	w.queuedDir[dir] = job
	w.push(job)
	return true
}

// push appends a job, with mu held.
func (w *worker) push(job *syncJob) {
	w.queue = append(w.queue, job)
	w.nonEmpty.Signal()
}

// stopAfterDrain tells the worker to exit once every queued job has run and
// posted its completion. It does not wait: the caller may be the event loop
// those completions are posted to.
func (w *worker) stopAfterDrain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopping = true
	w.nonEmpty.Broadcast()
}

func (w *worker) run() {
	defer w.onExit()
	for {
		job := w.next()
		if job == nil {
			return
		}
		err := w.perform(job)
		dones := job.dones
		w.post(func() {
			for _, done := range dones {
				done(err)
			}
		})
		if job.file != nil {
			job.file.release()
		}
	}
}

// next pops the oldest job, or returns nil once stopping and drained. After a
// job is popped, later Syncs queue a new job rather than join it, because its
// fsync may already be running and would not cover their writes.
func (w *worker) next() *syncJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && !w.stopping {
		w.nonEmpty.Wait()
	}
	if len(w.queue) == 0 {
		return nil
	}
	job := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = nil // let the drained backing array go
	}
	switch {
	case job.failWith != nil:
	case job.file != nil:
		job.file.queuedSync = nil
	default:
		delete(w.queuedDir, job.dir)
	}
	return job
}

// perform runs one job's fsync, honouring poisoning: a file or directory
// whose fsync once failed is never fsynced again.
func (w *worker) perform(job *syncJob) error {
	if job.failWith != nil {
		return job.failWith
	}
	if job.file != nil {
		f := job.file
		if f.poisoned {
			return fmt.Errorf("diskio: sync %s: %w: an earlier fsync of this file failed and is never retried", f.path, env.ErrIO)
		}
		if err := w.syncFile(f); err != nil {
			f.poisoned = true
			return wrapSyncErr("sync", f.path, err)
		}
		return nil
	}
	if w.poisonedDirs[job.dir] {
		return fmt.Errorf("diskio: syncdir %s: %w: an earlier fsync of this directory failed and is never retried", job.dir, env.ErrIO)
	}
	err := w.syncDir(job.dir)
	if errors.Is(err, env.ErrIO) {
		w.poisonedDirs[job.dir] = true
	}
	return err
}
