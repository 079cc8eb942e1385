package realnet

import (
	"fmt"
	"sync"

	"strand/core/admission"
)

// LoopEventsMax is the capacity of each of a node's two event queues.
// Posting to a full queue blocks the poster (a connection reader, a timer, a
// disk worker), which is the backpressure that keeps a busy core from being
// buried in work.
const LoopEventsMax = 4096

// loopInlineEventsMax bounds the events a posting goroutine runs as the
// loop's executor before it hands the rest to Run's goroutine and goes back
// to its own work: a connection reader that kept draining a queue other
// readers keep filling would never read its own socket again.
const loopInlineEventsMax = 32

// loopControlEventsPerClientEvent is how many control-plane events the
// executor takes, when both planes have events waiting, before it takes
// one client event.
const loopControlEventsPerClientEvent = 16

// Loop is a node's event loop: it runs posted functions one at a time, in
// the order they were posted. Everything that touches the core node runs on
// it (core/env's event-loop contract).
//
// It is a combining loop: a post that finds no goroutine running the loop
// makes its caller the executor, which runs the queue on the spot (its own
// event first, unless others are queued before it) and gives the role up
// when the queue is empty; a post that finds an executor only queues. A
// request read from a socket therefore reaches the core without waking
// another goroutine, which on a request-per-round-trip load (acks=all
// replication) was most of the node's context switches. Run's goroutine is
// the executor of last resort: it takes over when an inline executor has
// run loopInlineEventsMax events, and it runs what Enqueue posts.
//
// "One at a time" is the executing flag, set and cleared under mu together
// with the queue: a poster that queues while an executor is about to give
// up the role either sees the flag still set (and the executor, which
// checks the queue under mu before clearing it, runs the event) or sees it
// cleared and becomes the executor itself. No post is left unrun.
//
// Events queue by plane (admission.Plane), each in a queue of its own:
// client connections' requests and closes (PostFrom with PlaneClient) in
// one, everything else — the control plane's requests, timers, disk
// completions, answers from peers, releases — in the other. When both hold
// events the executor takes up to loopControlEventsPerClientEvent control
// events for each client event, so the control plane has most of the loop
// however many client requests wait, and a full client queue never blocks
// a control poster (SPEC.md §7.2, "Planes"). Most control events are
// cheap (a disk completion, a timer) while a client request may cost
// milliseconds (a Metadata of thousands of topics): taking them one for
// one, a backlog of disk completions (thousands of logs created at once)
// would keep a control-plane request waiting behind as many client
// requests. Events of one queue run in posted
// order; nothing orders events of different queues, which come from
// different goroutines anyway.
type Loop struct {
	mu sync.Mutex
	// idle is broadcast when an executor gives up the role after Stop.
	idle sync.Cond
	// queues hold the queued events by plane.
	queues [admission.Planes]eventQueue
	// controlRun counts the control events run since the last client
	// event (popLocked).
	controlRun int
	// executing is set while some goroutine holds the executor role,
	// including a role handed to Run's goroutine (handedOff) and not yet
	// taken up.
	executing bool
	handedOff bool
	// wake tells Run's goroutine the role was handed to it.
	wake chan struct{}
	// stopped is set by Stop, under mu; stoppedCh is closed with it, for
	// Run's select. Posts after it are dropped, releases kept (PostRelease).
	stopped   bool
	stoppedCh chan struct{}
	stopOnce  sync.Once
	// exited is closed when Run returns, which it does only once the loop
	// is stopped and no executor is running an event.
	exited chan struct{}
	// deferred holds functions the loop posted to itself (Defer); only the
	// executor touches it.
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

// eventQueue is one plane's ring of events, count of them from head.
type eventQueue struct {
	ring        []event
	head, count int
	// room is signalled for posters waiting on the full ring.
	room        sync.Cond
	roomWaiters int
}

func (q *eventQueue) full() bool { return q.count == len(q.ring) }

func (q *eventQueue) push(ev event) {
	q.ring[(q.head+q.count)%len(q.ring)] = ev
	q.count++
}

func (q *eventQueue) pop() event {
	ev := q.ring[q.head]
	q.ring[q.head] = event{}
	q.head = (q.head + 1) % len(q.ring)
	q.count--
	if q.roomWaiters > 0 {
		q.room.Signal()
	}
	return ev
}

// NewLoop returns a loop whose Run is not started yet. Posts run on their
// posters before it is; Enqueue's events and long queues wait for it.
func NewLoop() *Loop {
	l := &Loop{
		wake:      make(chan struct{}, 1),
		stoppedCh: make(chan struct{}),
		exited:    make(chan struct{}),
	}
	for p := range l.queues {
		l.queues[p].ring = make([]event, LoopEventsMax)
		l.queues[p].room.L = &l.mu
	}
	l.idle.L = &l.mu
	return l
}

// queuedLocked is the number of events waiting in both queues. With mu
// held.
func (l *Loop) queuedLocked() int {
	total := 0
	for p := range l.queues {
		total += l.queues[p].count
	}
	return total
}

// popLocked takes the next event: a control event while the control
// queue has any, up to loopControlEventsPerClientEvent in a row when
// client events wait, else a client event. With mu held and an event
// queued.
func (l *Loop) popLocked() event {
	control, client := &l.queues[admission.PlaneControl], &l.queues[admission.PlaneClient]
	switch {
	case control.count > 0 && (client.count == 0 || l.controlRun < loopControlEventsPerClientEvent):
		l.controlRun++
		return control.pop()
	case client.count > 0:
		l.controlRun = 0
		return client.pop()
	}
	panic("realnet: loop popped with nothing queued")
}

// Post queues fn to run on the loop, and runs the loop on the caller's
// goroutine if no other goroutine is running it: fn may have run, with
// whatever was queued before it, by the time Post returns. So the caller
// must not hold a lock that the core's calls into the Network, Clock or
// Disk can take, and must not be a goroutine those calls can wait for
// (Enqueue is for such callers). It must not be called from the loop itself
// (use Defer there): when the queue is full it blocks until there is room.
// After Stop it drops fn and returns false: the node is going away.
func (l *Loop) Post(fn func()) bool {
	return l.post(admission.PlaneControl, event{fn: fn}, true)
}

// PostFrom is Post for an event of a connection on plane p: a client
// connection's requests and close queue apart from the control plane's
// events (see Loop).
func (l *Loop) PostFrom(p admission.Plane, fn func()) bool {
	return l.post(p, event{fn: fn}, true)
}

// Enqueue is Post without running the loop on the caller's goroutine: if
// no executor is running, Run's goroutine is woken to run fn. For posters
// that the core may wait on, such as diskio's Sync worker.
func (l *Loop) Enqueue(fn func()) bool {
	return l.post(admission.PlaneControl, event{fn: fn}, false)
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
	if l.post(admission.PlaneControl, event{fn: fn, release: true}, true) {
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

// post queues ev in plane p's queue unless the loop has stopped, waiting
// for room in a full queue; then, if no goroutine is executing the loop, it
// runs the loop (inline) or hands it to Run's goroutine.
func (l *Loop) post(p admission.Plane, ev event, inline bool) bool {
	l.mu.Lock()
	q := &l.queues[p]
	for !l.stopped && q.full() {
		q.roomWaiters++
		q.room.Wait()
		q.roomWaiters--
	}
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	q.push(ev)
	if l.executing {
		l.mu.Unlock()
		return true
	}
	l.executing = true
	if !inline {
		l.handOffLocked()
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	l.execute(loopInlineEventsMax)
	return true
}

// handOffLocked gives the executor role, held by the caller, to Run's
// goroutine. With mu held.
func (l *Loop) handOffLocked() {
	if !l.executing || l.handedOff {
		panic("realnet: loop handed off by a goroutine that is not its executor")
	}
	l.handedOff = true
	select {
	case l.wake <- struct{}{}:
	default: // a wake is pending already (left from a hand-off Stop cut short)
	}
}

// execute runs queued events, with the Defer'd functions of each after it,
// until the queue is empty or the loop stopped (the role is given up), or
// eventsMax events have run (the role is handed to Run's goroutine). The
// caller holds the executor role.
func (l *Loop) execute(eventsMax int) {
	for ran := 0; ; ran++ {
		l.mu.Lock()
		if l.stopped || l.queuedLocked() == 0 {
			l.executing = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		if ran == eventsMax {
			l.handOffLocked()
			l.mu.Unlock()
			return
		}
		ev := l.popLocked()
		l.mu.Unlock()
		l.run(ev)
	}
}

// run runs one event and what it deferred. An event that panics (a broken
// invariant of the core) stops the loop on its way up: the goroutine it
// unwinds may be a connection reader whose deferred cleanup posts, and with
// their executor gone, posters waiting for room in a full queue would wait
// forever, the panicking one among them, and the process would hang with
// the panic unreported instead of crashing.
func (l *Loop) run(ev event) {
	completed := false
	defer func() {
		if !completed {
			l.Stop()
		}
	}()
	ev.fn()
	l.runDeferred()
	completed = true
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
	l.mu.Lock()
	var queued []func()
	for l.queuedLocked() > 0 {
		if ev := l.popLocked(); ev.release {
			queued = append(queued, ev.fn)
		}
	}
	l.mu.Unlock()
	for _, fn := range queued {
		fn()
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

// Defer queues fn to run on the loop after the current event. Only the
// loop's executor may call it; it never blocks, so the loop can hand itself
// a callback (a Send that fails at once) without calling the core
// re-entrantly.
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
		// The loop stopped with or without running it; tell which.
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// Run is the loop's own goroutine: it runs the queue whenever an executor
// hands it over (or Enqueue wakes it), until Stop; then it waits for an
// executor still in an event and returns. A panic in an event propagates,
// on whichever goroutine ran it, after stopping the loop (run): it is a
// broken invariant of the core, and the process must not limp on.
func (l *Loop) Run() {
	defer close(l.exited)
	for {
		select {
		case <-l.wake:
			l.mu.Lock()
			handedOff := l.handedOff
			l.handedOff = false
			l.mu.Unlock()
			if handedOff {
				l.execute(-1) // no bound: this goroutine has no other work
			}
		case <-l.stoppedCh:
			l.mu.Lock()
			if l.handedOff { // the role was Run's to take: give it up
				l.handedOff = false
				l.executing = false
			}
			for l.executing {
				l.idle.Wait()
			}
			l.mu.Unlock()
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
// dropped, except releases (PostRelease). Posters waiting for room return
// false. Safe from any goroutine, more than once.
func (l *Loop) Stop() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.stopped = true
		for p := range l.queues {
			l.queues[p].room.Broadcast()
		}
		l.mu.Unlock()
		close(l.stoppedCh)
	})
}

// Wait blocks until Run has returned: the loop is stopped and no goroutine
// runs an event any more.
func (l *Loop) Wait() { <-l.exited }

// String names the loop for panics and logs.
func (l *Loop) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("loop(%d client and %d control events queued)", l.queues[admission.PlaneClient].count, l.queues[admission.PlaneControl].count)
}
