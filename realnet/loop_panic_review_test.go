package realnet

import (
	"testing"
	"time"
)

// TestReviewPanicOnAnInlineExecutorSurfaces: an event that panics on a
// poster's goroutine (a connection reader running the loop inline) unwinds
// through that goroutine's deferred functions, and a reader's defer posts
// (serverConn.finish: its releases and HandleClosed). With the queue full
// and its executor gone, that post must not wait for room forever: the
// panic, a broken core invariant, has to reach the process (and its stack
// trace the operator) instead of turning into a silent hang. With Run's
// goroutine the only executor (before 4ae2e4e) it always did.
func TestReviewPanicOnAnInlineExecutorSurfaces(t *testing.T) {
	l := NewLoop()
	go l.Run()
	defer l.Stop()
	running, release := make(chan struct{}), make(chan struct{})
	surfaced := make(chan any, 1)
	go func() {
		defer func() { surfaced <- recover() }()
		defer l.Post(func() {}) // as readLoop's deferred finish posts
		l.Post(func() {
			close(running)
			<-release
			panic("broken core invariant")
		})
	}()
	<-running
	// The panicking goroutine is the executor; fill the queue behind it.
	for range LoopEventsMax {
		l.Post(func() {})
	}
	close(release)
	select {
	case v := <-surfaced:
		if v == nil {
			t.Fatal("the event's panic was lost")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the panic never surfaced: the panicking goroutine's deferred Post waits for room in a queue nobody drains")
	}
}
