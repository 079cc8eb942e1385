package realnet

import (
	"fmt"
	"sync"
)

// LoopEventsMax is the capacity of a node's event queue. Posting to a full
// queue blocks the poster (a connection reader, a timer, a disk worker), which
// is the backpressure that keeps a busy core from being buried in work.
const LoopEventsMax = 4096

// Loop is a node's event loop: one goroutine that runs posted functions one
// at a time, in the order they were posted. Everything that touches the core
// node runs on it (core/env's event-loop contract).
type Loop struct {
	events chan event
	// stopped is closed by Stop; posts after it are dropped, releases kept
	// (PostRelease).
	stopped  chan struct{}
	stopOnce sync.Once
	// exited is closed when Run returns.
	exited chan struct{}
	// deferred holds functions the loop posted to itself (Defer); only the
	// loop goroutine touches it.
	deferred []func()

	// lateMu guards late and releasesRun.
	lateMu sync.Mutex
	// late are releases posted after Stop, for RunReleases.
	late []func()
	// releasesRun is set by RunReleases; a release posted later would
	// never run.
	releasesRun bool
}

// event is one posted function. A release must run even if the loop stops
// before it (PostRelease).
type event struct {
	fn      func()
	release bool
}

// NewLoop returns a loop that is not running yet: call Run.
func NewLoop() *Loop {
	return &Loop{events: make(chan event, LoopEventsMax), stopped: make(chan struct{}), exited: make(chan struct{})}
}

// Post queues fn to run on the loop. It must not be called from the loop
// itself (use Defer there): when the queue is full it blocks until there is
// room. After Stop it drops fn and returns false: the node is going away.
func (l *Loop) Post(fn func()) bool {
	return l.post(event{fn: fn})
}

// PostRelease is Post for a function that gives back what the node holds
// for a goroutine off the loop: the Release of a Fetch response's pinned
// file regions, whose last unpin closes a segment file the core closed
// meanwhile. Such a function must not be lost when the node stops first (a
// response still being written as the node shuts down): after Stop it is
// kept, with those still queued, for RunReleases. It reports whether the
// running loop took it (false: kept for RunReleases); the signature is
// Post's, so that writers take either.
func (l *Loop) PostRelease(fn func()) bool {
	if l.post(event{fn: fn, release: true}) {
		return true
	}
	l.lateMu.Lock()
	defer l.lateMu.Unlock()
	if l.releasesRun {
		panic("realnet: a release posted after RunReleases; the node stopped before its connections")
	}
	l.late = append(l.late, fn)
	return false
}

// post queues ev unless the loop has stopped.
func (l *Loop) post(ev event) bool {
	select {
	case <-l.stopped:
		return false
	default:
	}
	select {
	case l.events <- ev:
		return true
	case <-l.stopped:
		return false
	}
}

// RunReleases runs, on the caller's goroutine, the releases the loop did
// not: those still queued when it stopped, then those posted after. The
// caller must have waited for Run to return and for every goroutine that
// posts releases to exit (Network.Shutdown), so that they run one at a
// time, as on the loop; the core's state they touch is the closed node's.
// Queued events that are not releases are dropped, as Stop says.
func (l *Loop) RunReleases() {
	select {
	case <-l.exited:
	default:
		panic("realnet: RunReleases while the loop runs")
	}
	for drained := false; !drained; {
		select {
		case ev := <-l.events:
			if ev.release {
				ev.fn()
			}
		default:
			drained = true
		}
	}
	l.lateMu.Lock()
	late := l.late
	l.late = nil
	l.releasesRun = true
	l.lateMu.Unlock()
	for _, fn := range late {
		fn()
	}
}

// Defer queues fn to run on the loop after the current event. Only the loop
// goroutine may call it; it never blocks, so the loop can hand itself a
// callback (a Send that fails at once) without calling the core re-entrantly.
func (l *Loop) Defer(fn func()) { l.deferred = append(l.deferred, fn) }

// Call runs fn on the loop and waits for it to return. It reports false,
// without running fn, if the loop stopped first. Not for use on the loop.
func (l *Loop) Call(fn func()) bool {
	done := make(chan struct{})
	if !l.Post(func() { fn(); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-l.exited:
		// Run drained the event or exited without it; tell which.
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// Run runs posted functions until Stop. A panic in one propagates: it is a
// broken invariant of the core, and the process must not limp on.
func (l *Loop) Run() {
	defer close(l.exited)
	for {
		select {
		case ev := <-l.events:
			ev.fn()
			l.runDeferred()
		case <-l.stopped:
			return
		}
	}
}

// runDeferred runs what the last event deferred, including what those
// functions defer in turn.
func (l *Loop) runDeferred() {
	for i := 0; i < len(l.deferred); i++ {
		l.deferred[i]()
	}
	clear(l.deferred)
	l.deferred = l.deferred[:0]
}

// Stop stops the loop after the event it is running; queued events are
// dropped, except releases (PostRelease). Safe from any goroutine, more than
// once.
func (l *Loop) Stop() {
	l.stopOnce.Do(func() { close(l.stopped) })
}

// Wait blocks until Run has returned.
func (l *Loop) Wait() { <-l.exited }

// String names the loop for panics and logs.
func (l *Loop) String() string { return fmt.Sprintf("loop(%d queued)", len(l.events)) }
