package diskio

import (
	"errors"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

func TestSyncCompletesThroughPost(t *testing.T) {
	d, loop := newTestDisk(t)
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, f.Append([]byte("durable")))
	if err := syncAndWait(t, loop, f.Sync); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

func TestSyncDirCompletesThroughPost(t *testing.T) {
	d, loop := newTestDisk(t)
	mustNil(t, d.MkdirAll("topic-0"))
	writeFile(t, d, "topic-0/seg", "x")
	if err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir("topic-0", done) }); err != nil {
		t.Errorf("SyncDir: %v", err)
	}
	if err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Errorf("SyncDir of the root: %v", err)
	}
	err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir("missing", done) })
	if !errors.Is(err, env.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: got %v, want env.ErrNotExist", err)
	}
}

// fsyncHook replaces the Disk's fdatasync with one that counts calls, can be
// made to fail, and can be held until released. Install it before the first
// Sync: the worker reads Disk.fdatasync only when it runs a job.
type fsyncHook struct {
	calls   atomic.Int32
	fail    func(call int32) error
	started chan struct{}
	release chan struct{}
}

func installFsyncHook(d *Disk) *fsyncHook {
	h := &fsyncHook{fail: func(int32) error { return nil }}
	d.fdatasync = func(fd int) error {
		call := h.calls.Add(1)
		if h.started != nil {
			h.started <- struct{}{}
			<-h.release
		}
		if err := h.fail(call); err != nil {
			return err
		}
		return unix.Fdatasync(fd)
	}
	return h
}

func TestAFailedFsyncPoisonsTheFileForever(t *testing.T) {
	d, loop := newTestDisk(t)
	hook := installFsyncHook(d)
	hook.fail = func(call int32) error {
		if call == 1 {
			return unix.EIO
		}
		return nil
	}
	f := mustOpen(t, d, "poisoned", env.OpenOptions{Create: true})
	defer f.Close()
	other := mustOpen(t, d, "healthy", env.OpenOptions{Create: true})
	defer other.Close()

	mustNil(t, f.Append([]byte("x")))
	if err := syncAndWait(t, loop, f.Sync); !errors.Is(err, env.ErrIO) || !errors.Is(err, unix.EIO) {
		t.Fatalf("first Sync: got %v, want env.ErrIO wrapping EIO", err)
	}
	for range 3 {
		mustNil(t, f.Append([]byte("y")))
		if err := syncAndWait(t, loop, f.Sync); !errors.Is(err, env.ErrIO) {
			t.Errorf("Sync after a failed fsync: got %v, want env.ErrIO", err)
		}
	}
	if calls := hook.calls.Load(); calls != 1 {
		t.Errorf("fdatasync ran %d times on a poisoned file, want 1", calls)
	}
	if err := syncAndWait(t, loop, other.Sync); err != nil {
		t.Errorf("Sync of another file: %v", err)
	}
	if calls := hook.calls.Load(); calls != 2 {
		t.Errorf("fdatasync ran %d times in all, want 2", calls)
	}
}

func TestAnyFsyncFailureIsErrIO(t *testing.T) {
	d, loop := newTestDisk(t)
	hook := installFsyncHook(d)
	hook.fail = func(int32) error { return unix.ENOSPC }
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()
	err := syncAndWait(t, loop, f.Sync)
	if !errors.Is(err, env.ErrIO) || errors.Is(err, env.ErrNoSpace) {
		t.Errorf("fsync failing with ENOSPC: got %v, want env.ErrIO only", err)
	}
}

// TestSyncsJoinAQueuedJob holds the first fsync in flight, asks for three
// more Syncs, and checks that they share one later fsync (which covers every
// write before them) and complete in the order they were asked.
func TestSyncsJoinAQueuedJob(t *testing.T) {
	d, loop := newTestDisk(t)
	hook := installFsyncHook(d)
	hook.started = make(chan struct{})
	hook.release = make(chan struct{})
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()

	var order []int
	record := func(i int) func(error) {
		return func(err error) {
			if err != nil {
				t.Errorf("Sync %d: %v", i, err)
			}
			order = append(order, i)
		}
	}
	f.Sync(record(0))
	<-hook.started // the first fsync is running and cannot cover later writes
	for i := 1; i <= 3; i++ {
		mustNil(t, f.Append([]byte{byte(i)}))
		f.Sync(record(i))
	}
	hook.release <- struct{}{}
	<-hook.started
	hook.release <- struct{}{}
	loop.runUntil(t, func() bool { return len(order) == 4 })
	if calls := hook.calls.Load(); calls != 2 {
		t.Errorf("fdatasync ran %d times, want 2 (the in-flight one, then one shared)", calls)
	}
	for i, got := range order {
		if got != i {
			t.Errorf("completions in order %v, want 0 1 2 3", order)
			break
		}
	}
}

// TestCloseKeepsTheFdForAQueuedSync closes a file while its Sync is still
// waiting: the Sync must still fsync the right file, not a closed fd.
func TestCloseKeepsTheFdForAQueuedSync(t *testing.T) {
	d, loop := newTestDisk(t)
	hook := installFsyncHook(d)
	hook.started = make(chan struct{})
	hook.release = make(chan struct{})
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	mustNil(t, f.Append([]byte("x")))
	var result error
	called := false
	f.Sync(func(err error) { called, result = true, err })
	<-hook.started
	fd := f.Fd()
	mustNil(t, f.Close())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Errorf("fd closed while its Sync was running: %v", err)
	}
	hook.release <- struct{}{}
	loop.runUntil(t, func() bool { return called })
	if result != nil {
		t.Errorf("Sync queued before Close: %v", result)
	}
}

func TestDiskCloseCompletesQueuedSyncs(t *testing.T) {
	d, loop := newTestDisk(t)
	files := make([]*File, 5)
	completed := 0
	for i := range files {
		files[i] = mustOpen(t, d, string(rune('a'+i)), env.OpenOptions{Create: true})
		defer files[i].Close()
		files[i].Sync(func(err error) {
			if err != nil {
				t.Errorf("Sync: %v", err)
			}
			completed++
		})
	}
	d.SyncDir(".", func(err error) {
		if err != nil {
			t.Errorf("SyncDir: %v", err)
		}
		completed++
	})
	mustNil(t, d.Close())
	loop.runUntil(t, func() bool { return completed == len(files)+1 })
}
