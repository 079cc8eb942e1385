package diskio

import (
	"testing"
	"time"

	"strand/core/env"
)

// testLoop stands in for a node's event loop: post queues functions and the
// test goroutine runs them, so a completion that runs proves it came through
// post rather than from inside the call that asked for it.
type testLoop struct {
	funcs chan func()
}

func newTestLoop() *testLoop { return &testLoop{funcs: make(chan func(), 256)} }

func (l *testLoop) post(fn func()) { l.funcs <- fn }

// runOne waits for one posted function and runs it on the test goroutine.
func (l *testLoop) runOne(t *testing.T) {
	t.Helper()
	select {
	case fn := <-l.funcs:
		fn()
	case <-time.After(10 * time.Second):
		t.Fatal("no completion was posted within 10s")
	}
}

// runUntil runs posted functions until cond holds.
func (l *testLoop) runUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		l.runOne(t)
	}
}

// newTestDisk opens a Disk on a fresh temporary directory, closed at cleanup.
func newTestDisk(t *testing.T) (*Disk, *testLoop) {
	t.Helper()
	loop := newTestLoop()
	d, err := New(t.TempDir(), Options{Post: loop.post})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.closed {
			if err := d.Close(); err != nil {
				t.Errorf("closing disk: %v", err)
			}
		}
	})
	return d, loop
}

// syncAndWait asks for a Sync, checks that done has not run inside the call,
// then runs the loop until done reports, and returns its error.
func syncAndWait(t *testing.T, loop *testLoop, sync func(done func(error))) error {
	t.Helper()
	called := false
	var result error
	sync(func(err error) {
		if called {
			t.Error("done called twice")
		}
		called, result = true, err
	})
	if called {
		t.Fatal("done ran inside the Sync call instead of through post")
	}
	loop.runUntil(t, func() bool { return called })
	return result
}

// mustOpen opens a file or fails the test.
func mustOpen(t *testing.T, d *Disk, filePath string, opts env.OpenOptions) *File {
	t.Helper()
	f, err := d.OpenFile(filePath, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
