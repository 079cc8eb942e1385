package realnet

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strand/core/admission"
	"strand/core/env"
)

// startLoop runs a loop for the test.
func startLoop(t *testing.T) *Loop {
	l := NewLoop()
	go l.Run()
	t.Cleanup(func() { l.Stop(); l.Wait() })
	return l
}

// TestLoopRunsInPostOrderAndDefersAfterTheEvent: posted functions run in
// order, one at a time, and Defer runs after the current event, before the
// next posted one.
func TestLoopRunsInPostOrderAndDefersAfterTheEvent(t *testing.T) {
	l := startLoop(t)
	var order []int // touched only on the loop
	for i := range 100 {
		l.Post(func() {
			order = append(order, i*10)
			if i%10 == 0 {
				l.Defer(func() {
					order = append(order, i*10+1)
					l.Defer(func() { order = append(order, i*10+2) })
				})
			}
		})
	}
	var got []int
	l.Call(func() { got = append(got, order...) })
	var want []int
	for i := range 100 {
		want = append(want, i*10)
		if i%10 == 0 {
			want = append(want, i*10+1, i*10+2)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ran %d functions, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("position %d ran %d, want %d (order %v)", i, got[i], want[i], got)
		}
	}
}

// TestLoopDropsPostsAfterStop: a post after Stop neither runs nor blocks.
func TestLoopDropsPostsAfterStop(t *testing.T) {
	l := NewLoop()
	go l.Run()
	l.Stop()
	l.Wait()
	var ran atomic.Bool
	for range LoopEventsMax + 10 { // more than the queue holds: must not block
		if l.Post(func() { ran.Store(true) }) {
			t.Fatal("Post after Stop reported success")
		}
	}
	if l.Call(func() { ran.Store(true) }) || ran.Load() {
		t.Fatal("a function ran after Stop")
	}
}

// TestLoopKeepsReleasesForRunReleases: a release queued when the loop
// stops, or posted after, runs exactly once, in RunReleases if not on the
// loop; plain posts after Stop never run; a release posted after
// RunReleases is a broken shutdown order and panics.
func TestLoopKeepsReleasesForRunReleases(t *testing.T) {
	l := NewLoop()
	go l.Run()
	gate, started := make(chan struct{}), make(chan struct{})
	go l.Post(func() { close(started); <-gate }) // the poster runs it
	<-started
	var queuedRuns, lateRuns, plainRuns atomic.Int32
	if !l.PostRelease(func() { queuedRuns.Add(1) }) {
		t.Fatal("PostRelease on a running loop reported it kept the release")
	}
	l.Stop()
	close(gate)
	l.Wait()
	if l.PostRelease(func() { lateRuns.Add(1) }) {
		t.Fatal("PostRelease after Stop reported the loop took it")
	}
	if l.Post(func() { plainRuns.Add(1) }) {
		t.Fatal("Post after Stop reported success")
	}
	if lateRuns.Load() != 0 {
		t.Fatal("a release posted after Stop ran before RunReleases")
	}
	l.RunReleases()
	if queuedRuns.Load() != 1 || lateRuns.Load() != 1 || plainRuns.Load() != 0 {
		t.Fatalf("runs: queued release %d, late release %d, plain post %d; want 1, 1, 0",
			queuedRuns.Load(), lateRuns.Load(), plainRuns.Load())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release posted after RunReleases did not panic")
		}
	}()
	l.PostRelease(func() {})
}

// TestClockTimerStopIsExact: a timer stopped with true never fires, even
// when its time has passed and its fire is already queued behind a busy
// loop; a fired timer's Stop reports false.
func TestClockTimerStopIsExact(t *testing.T) {
	l := startLoop(t)
	c := NewClock(l)
	const timers = 200
	var fired [timers]atomic.Bool
	var stopped [timers]bool
	l.Call(func() {
		for i := range timers {
			tm := c.SetTimer(int64(i%5)*int64(time.Millisecond), func() { fired[i].Store(true) })
			// Block the loop past the deadlines so that fires queue up
			// behind this event, then stop every other timer.
			if i == timers-1 {
				time.Sleep(20 * time.Millisecond)
			}
			defer func() { stopped[i] = i%2 == 0 && tm.Stop() }()
		}
	})
	time.Sleep(50 * time.Millisecond)
	l.Call(func() {}) // every queued fire has run
	for i := range timers {
		switch {
		case i%2 == 0 && !stopped[i]:
			t.Errorf("timer %d: Stop returned false before the loop could run its fire", i)
		case stopped[i] && fired[i].Load():
			t.Errorf("timer %d: fired after Stop returned true", i)
		case i%2 == 1 && !fired[i].Load():
			t.Errorf("timer %d: never fired", i)
		}
	}

	var late env.Timer
	done := make(chan struct{})
	l.Call(func() { late = c.SetTimer(0, func() { close(done) }) })
	<-done
	l.Call(func() {
		if late.Stop() {
			t.Error("Stop of a fired timer returned true")
		}
	})
}

// TestClockTimes: monotonic time does not go backwards and advances with
// real time; wall time is the system's.
func TestClockTimes(t *testing.T) {
	c := NewClock(NewLoop())
	a := c.MonotonicNs()
	time.Sleep(5 * time.Millisecond)
	b := c.MonotonicNs()
	if b-a < int64(5*time.Millisecond) {
		t.Errorf("monotonic advanced %d ns over a 5 ms sleep", b-a)
	}
	if d := c.WallMs() - time.Now().UnixMilli(); d < -1000 || d > 1000 {
		t.Errorf("wall clock off the system's by %d ms", d)
	}
}

// TestLoopRunsConcurrentPostsOneAtATimeInEachPostersOrder: many goroutines
// post at once, so that they take turns as the executor and hand the loop
// to Run; every event runs exactly once, never beside another, and each
// poster's events run in its order.
func TestLoopRunsConcurrentPostsOneAtATimeInEachPostersOrder(t *testing.T) {
	l := startLoop(t)
	const posters, perPoster = 8, 2000
	var running atomic.Int32
	var overlaps atomic.Int32
	next := make([]int, posters) // touched only on the loop
	var outOfOrder []string      // touched only on the loop
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := range perPoster {
				post := l.Post
				if i%7 == 3 {
					post = l.Enqueue
				}
				post(func() {
					if running.Add(1) != 1 {
						overlaps.Add(1)
					}
					if next[p] != i {
						outOfOrder = append(outOfOrder, fmt.Sprintf("poster %d: event %d ran when %d was due", p, i, next[p]))
					}
					next[p] = i + 1
					if i%100 == 0 {
						l.Defer(func() {
							if running.Add(1) != 1 {
								overlaps.Add(1)
							}
							running.Add(-1)
						})
					}
					running.Add(-1)
				})
			}
		})
	}
	wg.Wait()
	var got []int
	var disorder []string
	l.Call(func() { got, disorder = slices.Clone(next), slices.Clone(outOfOrder) })
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d events ran beside another", n)
	}
	for _, d := range disorder[:min(len(disorder), 5)] {
		t.Error(d)
	}
	for p, n := range got {
		if n != perPoster {
			t.Errorf("poster %d: %d of %d events ran", p, n, perPoster)
		}
	}
}

// TestLoopPostRacingTheExecutorsExitRuns: with no Run goroutine to fall
// back on, the only executors are posters; two posters racing, over and
// over, one giving up the role as the other queues, must never leave an
// event queued with nobody to run it.
func TestLoopPostRacingTheExecutorsExitRuns(t *testing.T) {
	l := NewLoop() // no Run: a lost wake-up is never rescued
	const rounds = 20000
	var ran atomic.Int32
	for round := range rounds {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { l.Post(func() { ran.Add(1) }) })
		}
		wg.Wait()
		if got := ran.Load(); got != int32(2*(round+1)) {
			t.Fatalf("round %d: %d events ran after both posts returned, want %d", round, got, 2*(round+1))
		}
	}
}

// TestLoopPostBlocksOnAFullQueue: while the executor is held in an event,
// LoopEventsMax posts queue and the next blocks until the loop makes room;
// Stop releases a blocked poster with false.
func TestLoopPostBlocksOnAFullQueue(t *testing.T) {
	l := startLoop(t)
	gate, started := make(chan struct{}), make(chan struct{})
	go l.Post(func() { close(started); <-gate })
	<-started
	var order []int // touched only on the loop
	for i := range LoopEventsMax {
		l.Post(func() { order = append(order, i) })
	}
	blocked := make(chan bool)
	go func() { blocked <- l.Post(func() { order = append(order, LoopEventsMax) }) }()
	select {
	case <-blocked:
		t.Fatal("a post to a full queue returned before the loop made room")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if !<-blocked {
		t.Fatal("the blocked post reported the loop stopped")
	}
	var got []int
	l.Call(func() { got = slices.Clone(order) })
	if len(got) != LoopEventsMax+1 {
		t.Fatalf("%d events ran, want %d", len(got), LoopEventsMax+1)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("position %d ran event %d", i, v)
		}
	}

	// Full again, then stopped: the blocked poster gives up.
	gate2, started2 := make(chan struct{}), make(chan struct{})
	go l.Post(func() { close(started2); <-gate2 })
	<-started2
	for range LoopEventsMax {
		l.Post(func() {})
	}
	go func() { blocked <- l.Post(func() {}) }()
	time.Sleep(10 * time.Millisecond)
	l.Stop()
	if <-blocked {
		t.Fatal("a post blocked on a full queue reported success after Stop")
	}
	close(gate2)
}

// TestLoopStopWaitsForTheRunningEvent: Stop while a poster executes an
// event; Wait returns only once that event has returned, the events queued
// behind it never run, and a queued release runs in RunReleases.
func TestLoopStopWaitsForTheRunningEvent(t *testing.T) {
	l := NewLoop()
	go l.Run()
	gate, started := make(chan struct{}), make(chan struct{})
	var finished, queuedRan, releaseRan atomic.Bool
	go l.Post(func() { close(started); <-gate; finished.Store(true) })
	<-started
	l.Post(func() { queuedRan.Store(true) })
	l.PostRelease(func() { releaseRan.Store(true) })
	l.Stop()
	waited := make(chan struct{})
	go func() { l.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while an event was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	<-waited
	if !finished.Load() {
		t.Fatal("Wait returned before the running event finished")
	}
	l.RunReleases()
	if queuedRan.Load() || !releaseRan.Load() {
		t.Fatalf("after Stop: queued event ran %v (want false), queued release ran %v (want true)", queuedRan.Load(), releaseRan.Load())
	}
}

// TestLoopCallFromOutsideWhileAnotherExecutes: a Call made while another
// goroutine executes the loop queues behind it and returns once its
// function ran; after Stop, a Call reports false.
func TestLoopCallFromOutsideWhileAnotherExecutes(t *testing.T) {
	l := NewLoop()
	go l.Run()
	gate, started := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	go l.Post(func() { close(started); <-gate; first.Store(true) })
	<-started
	called := make(chan bool)
	var sawFirst bool
	go func() { called <- l.Call(func() { sawFirst = first.Load() }) }()
	select {
	case <-called:
		t.Fatal("Call returned while the event before it was still running")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	if !<-called || !sawFirst {
		t.Fatal("Call did not run its function after the event queued before it")
	}
	l.Stop()
	l.Wait()
	if l.Call(func() {}) {
		t.Fatal("Call after Stop reported success")
	}
}

// TestLoopInlineExecutorHandsLongQueuesToRun: a poster runs at most
// loopInlineEventsMax events before Run's goroutine takes over, so it gets
// back to its own work while the queue is still busy (here: an event that
// blocks far down the queue).
func TestLoopInlineExecutorHandsLongQueuesToRun(t *testing.T) {
	l := startLoop(t)
	gate, started := make(chan struct{}), make(chan struct{})
	returned := make(chan struct{})
	go func() { l.Post(func() { close(started); <-gate }); close(returned) }()
	<-started
	block := make(chan struct{})
	for i := range 4 * loopInlineEventsMax {
		if i == 2*loopInlineEventsMax {
			l.Post(func() { <-block })
		} else {
			l.Post(func() {})
		}
	}
	close(gate)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		close(block)
		t.Fatal("the inline executor kept running the queue past its budget")
	}
	close(block)
	if !l.Call(func() {}) {
		t.Fatal("the loop stopped")
	}
}

// TestLoopEnqueueNeverRunsOnTheCaller: Enqueue returns while its function
// still runs, on Run's goroutine.
func TestLoopEnqueueNeverRunsOnTheCaller(t *testing.T) {
	l := startLoop(t)
	gate, ran := make(chan struct{}), make(chan struct{})
	returned := make(chan struct{})
	go func() { l.Enqueue(func() { <-gate; close(ran) }); close(returned) }()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Error("Enqueue ran its function on the caller")
	}
	close(gate)
	<-ran
}

// TestLoopGivesTheControlPlaneItsShare: with a thousand client requests
// queued, an event of the control plane runs after at most one of them,
// and the client events still run, in their order.
func TestLoopGivesTheControlPlaneItsShare(t *testing.T) {
	l := startLoop(t)
	block := make(chan struct{})
	started := make(chan struct{})
	go l.PostFrom(admission.PlaneClient, func() { close(started); <-block })
	<-started
	var clientRan []int // touched only on the loop
	for i := range 1000 {
		l.PostFrom(admission.PlaneClient, func() { clientRan = append(clientRan, i) })
	}
	controlAfter := make(chan int, 1)
	l.Post(func() { controlAfter <- len(clientRan) })
	close(block)
	if n := <-controlAfter; n > 1 {
		t.Fatalf("the control event ran after %d queued client events, want at most 1", n)
	}
	var ran []int
	waitUntil(t, "every client event run", 5*time.Second, func() bool {
		l.Call(func() { ran = slices.Clone(clientRan) })
		return len(ran) == 1000
	})
	if !slices.IsSorted(ran) {
		t.Fatalf("client events ran %d, sorted %v", len(ran), slices.IsSorted(ran))
	}
}

// TestLoopRunsControlEventsAheadOfClientEvents: with both queues full, the
// loop runs loopControlEventsPerClientEvent control events for each client
// event, so a backlog of cheap control events (disk completions) clears
// behind few client events, and client events still run between them.
func TestLoopRunsControlEventsAheadOfClientEvents(t *testing.T) {
	const controlEvents, clientEvents = 100, 100
	l := startLoop(t)
	block := make(chan struct{})
	started := make(chan struct{})
	go l.PostFrom(admission.PlaneClient, func() { close(started); <-block })
	<-started
	var order []admission.Plane // touched only on the loop
	for range clientEvents {
		l.PostFrom(admission.PlaneClient, func() { order = append(order, admission.PlaneClient) })
	}
	for range controlEvents {
		l.Post(func() { order = append(order, admission.PlaneControl) })
	}
	close(block)
	var ran []admission.Plane
	waitUntil(t, "every event run", 5*time.Second, func() bool {
		l.Call(func() { ran = slices.Clone(order) })
		return len(ran) == controlEvents+clientEvents
	})
	lastControl := slices.Index(ran, admission.PlaneControl)
	for i, p := range ran {
		if p == admission.PlaneControl {
			lastControl = i
		}
	}
	clientBefore := lastControl + 1 - controlEvents
	wantMax := (controlEvents + loopControlEventsPerClientEvent - 1) / loopControlEventsPerClientEvent
	if clientBefore > wantMax {
		t.Errorf("the last of %d control events ran after %d client events, want at most %d", controlEvents, clientBefore, wantMax)
	}
	if clientBefore < wantMax-1 {
		t.Errorf("only %d client events ran among %d control events: client events must not wait for the whole control backlog", clientBefore, controlEvents)
	}
}

// TestLoopPanicOnAnInlineExecutorSurfaces: an event that panics on a
// poster's goroutine (a connection reader running the loop inline) unwinds
// through that goroutine's deferred functions, and a reader's defer posts
// (serverConn.finish: its releases and HandleClosed). With the queue full
// and its executor gone, that post must not wait for room forever: the
// panic, a broken core invariant, has to reach the process (and its stack
// trace the operator) instead of turning into a silent hang, as it does
// when Run's goroutine is the executor.
func TestLoopPanicOnAnInlineExecutorSurfaces(t *testing.T) {
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
