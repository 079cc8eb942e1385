package diskio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// gatedWrites replaces a Disk's pwrite: every write waits for the gate to
// open, and the order of writes and fdatasyncs is recorded.
type gatedWrites struct {
	gate   chan struct{}
	mu     sync.Mutex
	events []string
	// fail, when set, can fail a write before pwritev runs.
	fail func(iovs [][]byte, off int64) error
	// calls counts the pwritev calls.
	calls int
}

func gateDisk(t *testing.T, opts Options) (*Disk, *testLoop, *gatedWrites) {
	t.Helper()
	loop := newTestLoop()
	opts.Post = loop.post
	d, err := New(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.closed {
			d.Close()
		}
	})
	g := &gatedWrites{gate: make(chan struct{})}
	d.writer.pwritev = func(fd int, iovs [][]byte, off int64) (int, error) {
		<-g.gate
		g.mu.Lock()
		g.calls++
		g.mu.Unlock()
		at := off
		for _, p := range iovs { // one event per append written
			g.record("write", at)
			at += int64(len(p))
		}
		if g.fail != nil {
			if err := g.fail(iovs, off); err != nil {
				return 0, err
			}
		}
		return unix.Pwritev(fd, iovs, off)
	}
	d.fdatasync = func(fd int) error {
		g.record("sync", -1)
		return unix.Fdatasync(fd)
	}
	return d, loop, g
}

// firstBytes returns the iovecs holding the first n bytes of iovs.
func firstBytes(iovs [][]byte, n int64) [][]byte {
	var out [][]byte
	for _, p := range iovs {
		if n <= int64(len(p)) {
			return append(out, p[:n])
		}
		out = append(out, p)
		n -= int64(len(p))
	}
	return out
}

func (g *gatedWrites) record(what string, off int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off >= 0 {
		what = fmt.Sprintf("%s@%d", what, off)
	}
	g.events = append(g.events, what)
}

func (g *gatedWrites) recorded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.events...)
}

// fileBytes reads what the file holds on disk, bypassing the File.
func fileBytes(t *testing.T, f *File) []byte {
	t.Helper()
	var st unix.Stat_t
	mustNil(t, unix.Fstat(f.Fd(), &st))
	b := make([]byte, st.Size)
	if _, err := unix.Pread(f.Fd(), b, 0); err != nil && st.Size > 0 {
		t.Fatal(err)
	}
	return b
}

// TestQueuedAppendsAreReadableBeforeWritten blocks the write worker and
// checks that the loop's Append returns at once, that Size and ReadAt see the
// queued bytes (across the written/queued boundary too), and that
// WaitWritten returns only once they are in the file.
func TestQueuedAppendsAreReadableBeforeWritten(t *testing.T) {
	d, _, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	first, second := bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)
	mustNil(t, f.Append(first))
	mustNil(t, f.Append(second))
	if f.Size() != 200 {
		t.Fatalf("Size %d with 200 bytes queued", f.Size())
	}
	got := make([]byte, 150)
	if _, err := f.ReadAt(got, 50); err != nil || !bytes.Equal(got, append(first[50:], second...)) {
		t.Fatalf("ReadAt of queued bytes: %q, %v", got, err)
	}
	if len(fileBytes(t, f)) != 0 {
		t.Fatal("bytes reached the file with the writer blocked")
	}
	waited := make(chan error, 1)
	go func() { waited <- f.WaitWritten(200) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitWritten returned %v before the writes ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.gate <- struct{}{} // the first write only
	mustNil(t, f.WaitWritten(100))
	// Half written, half queued: one ReadAt spans both.
	if _, err := f.ReadAt(got, 50); err != nil || !bytes.Equal(got, append(first[50:], second...)) {
		t.Fatalf("ReadAt across the written end: %q, %v", got, err)
	}
	close(g.gate)
	if err := <-waited; err != nil {
		t.Fatalf("WaitWritten: %v", err)
	}
	if !bytes.Equal(fileBytes(t, f), append(first, second...)) {
		t.Fatal("file does not hold the appends in order")
	}
	if err := f.WaitWritten(201); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("WaitWritten past the appended bytes: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestSyncCoversQueuedAppends checks that a Sync asked for while appends are
// queued runs its fdatasync only after they are written, and that an Append
// after the Sync is not needed for it to complete.
func TestSyncCoversQueuedAppends(t *testing.T) {
	d, loop, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
	mustNil(t, f.Append(bytes.Repeat([]byte("b"), 100)))
	synced := false
	var syncErr error
	f.Sync(func(err error) { synced, syncErr = true, err })
	mustNil(t, f.Append(bytes.Repeat([]byte("c"), 100))) // after the Sync: not covered, not waited for
	select {
	case fn := <-loop.funcs:
		fn()
		t.Fatalf("a completion arrived with every write blocked (synced %v)", synced)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	loop.runUntil(t, func() bool { return synced })
	mustNil(t, syncErr)
	// The third write may run before or during the fdatasync; the first
	// two must precede it.
	events := g.recorded()
	if sync := slices.Index(events, "sync"); sync < 0 || slices.Index(events[:sync], "write@0") < 0 || slices.Index(events[:sync], "write@100") < 0 {
		t.Fatalf("events %v, want both writes before the fdatasync", events)
	}
	// A Sync with nothing queued goes straight to the I/O worker.
	mustNil(t, f.WaitWritten(300))
	mustNil(t, syncAndWait(t, loop, f.Sync))
}

// TestQueuedWriteFailureFailsTheFile makes the worker's second write fail
// after 30 bytes (ENOSPC) and checks what the core relies on: the failure
// surfaces, wrapping env.ErrNoSpace, at the next Append, WriteAt, Truncate
// and Sync, for good; Size is the bytes that reached the file; bytes before
// the failure still read, bytes after it do not.
func TestQueuedWriteFailureFailsTheFile(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		want  error
	}{{unix.ENOSPC, env.ErrNoSpace}, {unix.EIO, env.ErrIO}} {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			d, loop, g := gateDisk(t, Options{})
			var fails sync.Once
			g.fail = func(iovs [][]byte, off int64) (err error) {
				if off == 130 { // the first call ran short, as a filling device does
					fails.Do(func() { err = tc.errno })
				}
				return err
			}
			pwritev := d.writer.pwritev
			d.writer.pwritev = func(fd int, iovs [][]byte, off int64) (int, error) {
				// A write reaching past byte 130 stops there, whether the
				// worker wrote the two appends apart or together.
				if off <= 100 {
					iovs = firstBytes(iovs, 130-off)
				}
				return pwritev(fd, iovs, off)
			}
			close(g.gate)
			f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
			defer f.Close()
			mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
			mustNil(t, f.Append(bytes.Repeat([]byte("b"), 100)))
			if err := f.WaitWritten(200); !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
				t.Fatalf("WaitWritten: %v, want %v wrapping %v", err, tc.want, tc.errno)
			}
			for name, call := range map[string]func() error{ // order-independent: each must fail alike
				"Append":   func() error { return f.Append([]byte("c")) },
				"WriteAt":  func() error { return f.WriteAt([]byte("c"), 0) },
				"Truncate": func() error { return f.Truncate(0) },
				"Sync":     func() error { return syncAndWait(t, loop, f.Sync) },
			} {
				if err := call(); !errors.Is(err, tc.want) {
					t.Errorf("%s after the failed write: %v, want %v", name, err, tc.want)
				}
			}
			if f.Size() != 130 || len(fileBytes(t, f)) != 130 {
				t.Errorf("Size %d, file %d bytes; want the 130 that were written", f.Size(), len(fileBytes(t, f)))
			}
			if _, err := f.ReadAt(make([]byte, 100), 0); err != nil {
				t.Errorf("ReadAt before the failure: %v", err)
			}
			if _, err := f.ReadAt(make([]byte, 10), 125); !errors.Is(err, tc.want) && err != io.EOF {
				t.Errorf("ReadAt past the failure: %v", err)
			}
		})
	}
}

// TestAppendWaitsForRoomInTheQueue bounds the queue at 150 bytes: with the
// writer blocked, a second 100-byte Append waits until the first is written.
func TestAppendWaitsForRoomInTheQueue(t *testing.T) {
	d, _, g := gateDisk(t, Options{WriteQueueBytesMax: 150})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
	appended := make(chan error, 1)
	go func() { appended <- f.Append(bytes.Repeat([]byte("b"), 100)) }()
	select {
	case err := <-appended:
		t.Fatalf("second Append returned %v past the queue bound", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	mustNil(t, <-appended)
	mustNil(t, f.WaitWritten(200))
}

// TestDiskCloseDrainsTheQueue closes the Disk with appends and a Sync queued:
// the appends are still written and the Sync still runs and succeeds.
func TestDiskCloseDrainsTheQueue(t *testing.T) {
	d, loop, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
	synced := false
	var syncErr error
	f.Sync(func(err error) { synced, syncErr = true, err })
	mustNil(t, d.Close())
	close(g.gate)
	loop.runUntil(t, func() bool { return synced })
	mustNil(t, syncErr)
	d.Wait() // both workers exit once drained
	// In place, after Close:
	mustNil(t, f.Append(bytes.Repeat([]byte("b"), 100)))
	if !bytes.Equal(fileBytes(t, f), append(bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)...)) {
		t.Fatal("the appends did not all reach the file")
	}
	mustNil(t, f.Close())
}

// TestConcurrentWaitersAndAppends runs the loop's appends and reads against
// readers of regions on other goroutines (WaitWritten then pread, as the
// sendfile path does, and ReadRegionAt), for the race detector.
func TestConcurrentWaitersAndAppends(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	var wg sync.WaitGroup
	ends := make(chan int64, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 10)
			for end := range ends {
				if err := f.WaitWritten(end); err != nil {
					t.Errorf("WaitWritten(%d): %v", end, err)
					return
				}
				if _, err := unix.Pread(f.Fd(), buf, end-10); err != nil || buf[0] != byte(end/10) {
					t.Errorf("pread at %d after WaitWritten: %v %v", end-10, buf, err)
					return
				}
				if _, err := f.ReadRegionAt(buf, end-10); err != nil || buf[9] != byte(end/10) {
					t.Errorf("ReadRegionAt %d: %v %v", end-10, buf, err)
					return
				}
			}
		}()
	}
	for i := range 500 {
		mustNil(t, f.Append(bytes.Repeat([]byte{byte(i + 1)}, 10)))
		ends <- f.Size()
		got := make([]byte, 10)
		if _, err := f.ReadAt(got, f.Size()-10); err != nil || got[9] != byte(i+1) {
			t.Fatalf("ReadAt of append %d: %v %v", i, got, err)
		}
	}
	close(ends)
	wg.Wait()
}

// BenchmarkAppend16KiB measures what an Append of 16 KiB costs its caller
// (the event loop), reported as caller-ns/append: "queued" through the write
// worker, as File.Append does, against "inline", the pwrite the loop made
// itself before the worker. Every 64 appends the benchmark waits for the
// bytes (outside the measured time) and truncates, so the file stays small.
// ns/op is the throughput of the whole, waits included.
func BenchmarkAppend16KiB(b *testing.B) {
	p := bytes.Repeat([]byte("x"), 16<<10)
	for _, mode := range []string{"queued", "inline"} {
		b.Run(mode, func(b *testing.B) {
			loop := newTestLoop()
			d, err := New(b.TempDir(), Options{Post: loop.post})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			f, err := d.OpenFile("seg.log", env.OpenOptions{Create: true})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(p)))
			var callerNs, appends int64
			for b.Loop() {
				start := time.Now()
				if mode == "queued" {
					err = f.Append(p)
				} else {
					_, err = pwriteAll(f.fd, p, f.size)
					f.size += int64(len(p))
					f.disk.writer.wroteInPlace(f, f.size)
				}
				callerNs += time.Since(start).Nanoseconds()
				if err != nil {
					b.Fatal(err)
				}
				if appends++; appends%64 == 0 {
					if err := f.WaitWritten(f.Size()); err != nil {
						b.Fatal(err)
					}
					if err := f.Truncate(0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(callerNs)/float64(appends), "caller-ns/append")
		})
	}
}

// TestQueuedAppendsAreCoalesced checks that appends queued behind a blocked
// write go out together, in one pwritev, and that a write failing inside the
// third append of such a run fails the file there: Size and the file are the
// 250 bytes written, and the error names the append it cut.
func TestQueuedAppendsAreCoalesced(t *testing.T) {
	d, _, g := gateDisk(t, Options{})
	var fails sync.Once
	g.fail = func(iovs [][]byte, off int64) (err error) {
		if off == 250 {
			fails.Do(func() { err = unix.EIO })
		}
		return err
	}
	pwritev := d.writer.pwritev
	d.writer.pwritev = func(fd int, iovs [][]byte, off int64) (int, error) {
		if off < 250 {
			iovs = firstBytes(iovs, 250-off) // a short write, stopping inside "c"
		}
		return pwritev(fd, iovs, off)
	}
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	var want []byte
	for _, c := range "abcd" {
		p := bytes.Repeat([]byte{byte(c)}, 100)
		mustNil(t, f.Append(p))
		want = append(want, p...)
	}
	close(g.gate)
	err := f.WaitWritten(400)
	if !errors.Is(err, env.ErrIO) || !strings.Contains(err.Error(), "wrote 50 of 100 bytes at 200") {
		t.Fatalf("WaitWritten: %v, want env.ErrIO for the append at 200 cut after 50 bytes", err)
	}
	g.mu.Lock()
	calls := g.calls
	g.mu.Unlock()
	// The worker took the first append, or more, before the gate opened;
	// the rest must follow in one call, then the retry at 250 fails.
	if calls > 3 {
		t.Errorf("%d pwritev calls for 4 appends queued together, want at most 3", calls)
	}
	if got := fileBytes(t, f); f.Size() != 250 || !bytes.Equal(got, want[:250]) {
		t.Errorf("Size %d, file %q; want the 250 bytes written", f.Size(), got)
	}
	if err := f.Append([]byte("e")); !errors.Is(err, env.ErrIO) {
		t.Errorf("Append after the failure: %v, want env.ErrIO", err)
	}
}
