package realnet

import (
	"sync/atomic"
	"testing"
	"time"

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
	gate := make(chan struct{})
	l.Post(func() { <-gate })
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
