package diskio

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// recyclePoison overwrites a buffer the recycling test takes back; no
// content byte it writes equals it.
const recyclePoison = 0xdb

// recycleBufferBytes is the capacity of every buffer the recycling test
// appends from.
const recycleBufferBytes = 2000

// recycler is one appender of TestWrittenThroughRecyclingAcrossDisks: it
// appends from buffers it reuses once WrittenThrough says the appends made
// from them are written, as realnet's frame pool does, and poisons each
// buffer when it takes it back.
type recycler struct {
	free    [][]byte
	pending []recyclerPending
	// parked counts appends whose buffer had to wait; reused the buffers
	// taken back from pending.
	parked, reused int
}

type recyclerPending struct {
	buf  []byte
	mark uint64
}

// reclaim takes back the pending buffers whose appends are written.
func (r *recycler) reclaim() {
	n := 0
	for n < len(r.pending) && WrittenThrough(r.pending[n].mark) {
		b := r.pending[n].buf
		for i := range b {
			b[i] = recyclePoison
		}
		r.free = append(r.free, b)
		r.reused++
		n++
	}
	r.pending = append(r.pending[:0], r.pending[n:]...)
}

func (r *recycler) get(size int) []byte {
	r.reclaim()
	if len(r.free) == 0 {
		return make([]byte, size, recycleBufferBytes)
	}
	b := r.free[len(r.free)-1][:size]
	r.free = r.free[:len(r.free)-1]
	return b
}

// release parks b behind the mark taken after the appends made from it.
func (r *recycler) release(b []byte) {
	mark := AppendMark()
	if len(r.pending) == 0 && WrittenThrough(mark) {
		r.free = append(r.free, b[:cap(b)])
		return
	}
	r.parked++
	r.pending = append(r.pending, recyclerPending{buf: b[:cap(b)], mark: mark})
}

// TestWrittenThroughRecyclingAcrossDisks checks the promise realnet's frame
// recycling rests on, across several Disks (log directories) and under
// -race: two goroutines each append to their own Disk from buffers they
// reuse and poison once WrittenThrough(the mark taken after the append)
// holds; one Disk's writes are slow, the other's fast; a third Disk stays
// idle, and a fourth fails every write. Every byte that reaches the two
// files must be the byte appended (a buffer poisoned while its append was
// still queued would put 0xdb there), and every parked buffer must come
// back: an idle or failed Disk must not hold WrittenThrough false.
func TestWrittenThroughRecyclingAcrossDisks(t *testing.T) {
	slow, _, slowGate := gateDisk(t, Options{})
	close(slowGate.gate)
	slowWrite := slow.writer.pwritev
	slow.writer.pwritev = func(fd int, iovs [][]byte, off int64) (int, error) {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		return slowWrite(fd, iovs, off)
	}
	fast, _ := newTestDisk(t)
	idle, _ := newTestDisk(t)
	idleFile := mustOpen(t, idle, "idle.log", env.OpenOptions{Create: true})
	defer idleFile.Close()
	failing, _, failGate := gateDisk(t, Options{})
	failGate.fail = func([][]byte, int64) error { return unix.EIO }
	close(failGate.gate)
	failingFile := mustOpen(t, failing, "failing.log", env.OpenOptions{Create: true})
	defer failingFile.Close()
	// The failing Disk's append fails in the background, after which its
	// buffer must be reclaimable too.
	failBuf := bytes.Repeat([]byte{7}, 512)
	mustNil(t, failingFile.Append(failBuf))
	failMark := AppendMark()

	const appends = 3000
	content := func(disk, i int, b []byte) {
		for j := range b {
			b[j] = byte((disk*131 + i*7 + j) % 200) // never recyclePoison
		}
	}
	// Another goroutine asks WrittenThrough all along, as realnet's
	// connection goroutines do when they take a frame.
	var stop atomic.Bool
	var checker sync.WaitGroup
	checker.Add(1)
	go func() {
		defer checker.Done()
		for !stop.Load() {
			WrittenThrough(AppendMark())
		}
	}()

	disks := []*Disk{slow, fast}
	expected := make([][]byte, len(disks))
	recyclers := make([]*recycler, len(disks))
	files := make([]*File, len(disks))
	var appenders sync.WaitGroup
	for k, d := range disks {
		f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
		defer f.Close()
		files[k] = f
		r := &recycler{}
		recyclers[k] = r
		appenders.Add(1)
		go func() { // the Disk's only caller, as its event loop would be
			defer appenders.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			for i := range appends {
				b := r.get(1 + rng.IntN(recycleBufferBytes))
				content(k, i, b)
				expected[k] = append(expected[k], b...)
				if err := f.Append(b); err != nil {
					t.Errorf("disk %d: append %d: %v", k, i, err)
					return
				}
				r.release(b)
			}
		}()
	}
	appenders.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for k, r := range recyclers {
		for r.reclaim(); len(r.pending) > 0; r.reclaim() {
			if time.Now().After(deadline) {
				t.Fatalf("disk %d: %d buffers still parked 10 s after the last append (oldest mark %d)", k, len(r.pending), r.pending[0].mark)
			}
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	checker.Wait()
	for k, f := range files {
		if got := fileBytes(t, f); !bytes.Equal(got, expected[k]) {
			at := 0
			for at < min(len(got), len(expected[k])) && got[at] == expected[k][at] {
				at++
			}
			t.Errorf("disk %d: file of %d bytes differs from the %d appended from byte %d (a buffer was reused before its append was written)", k, len(got), len(expected[k]), at)
		}
	}
	if recyclers[0].parked == 0 || recyclers[0].reused == 0 {
		t.Errorf("the slow disk's appender parked %d buffers and reused %d: the test did not exercise parking", recyclers[0].parked, recyclers[0].reused)
	}
	if err := failingFile.WaitWritten(int64(len(failBuf))); !errors.Is(err, env.ErrIO) {
		t.Errorf("the failing disk's append: %v, want env.ErrIO", err)
	}
	if !WrittenThrough(failMark) {
		t.Error("WrittenThrough stays false for an append whose write failed")
	}
}

// TestWrittenThroughIgnoresClosedDisks checks that a Disk closed with
// appends queued holds WrittenThrough false only until its writer has
// drained, and never after it exited.
func TestWrittenThroughIgnoresClosedDisks(t *testing.T) {
	d, _, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
	mark := AppendMark()
	mustNil(t, d.Close())
	if WrittenThrough(mark) {
		t.Fatal("WrittenThrough is true while a closed Disk still holds the append queued")
	}
	close(g.gate)
	d.Wait()
	if !WrittenThrough(mark) {
		t.Fatal("WrittenThrough is false after the closed Disk wrote its queue and exited")
	}
	if got := fileBytes(t, f); !bytes.Equal(got, bytes.Repeat([]byte("a"), 100)) {
		t.Fatalf("file holds %q", got)
	}
	f.Close()
}
