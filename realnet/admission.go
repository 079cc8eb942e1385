package realnet

import (
	"fmt"
	"slices"
	"sync"

	"strand/core/admission"
)

// planeBudgets are the node's per-plane admission.Budgets behind one mutex:
// readers wait on a plane's cond for room, and every release or close
// broadcasts it. Each plane is bounded by queued.max.requests and
// queued.max.request.bytes on its own, so that clients filling theirs never
// hold up the control plane (SPEC.md §7.2).
type planeBudgets struct {
	mu      sync.Mutex
	room    [admission.Planes]sync.Cond
	budgets [admission.Planes]*admission.Budget
	// waiters counts the readers waiting for room on each plane: while
	// any does, the plane is under pressure, and its stalled reads have a
	// tenth of the read deadline (admission.Deadlines.PressuredReadMs).
	waiters [admission.Planes]int
	closed  bool
}

func newPlaneBudgets(requestsMax int32, bytesMax int64) *planeBudgets {
	b := &planeBudgets{}
	for p := range b.budgets {
		b.budgets[p] = admission.NewBudget(requestsMax, bytesMax)
		b.room[p].L = &b.mu
	}
	return b
}

// waitFor waits until try succeeds on plane p's budget for a request sc
// is reading, or the budgets close or sc is shut down (false). The read's
// deadline stops while it waits: the wait is the node's, not the client's.
// Lock order: b.mu, then sc.mu.
func (b *planeBudgets) waitFor(p admission.Plane, sc *serverConn, try func(*admission.Budget) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	waited := false
	for !b.closed && !sc.down.Load() {
		if try(b.budgets[p]) {
			if waited {
				sc.readResumed()
			}
			return true
		}
		if !waited {
			waited = true
			sc.readPaused()
		}
		b.waiters[p]++
		b.room[p].Wait()
		b.waiters[p]--
	}
	return false
}

// pressured reports, for each plane, whether readers wait for room in it.
func (b *planeBudgets) pressured() [admission.Planes]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [admission.Planes]bool
	for p, n := range b.waiters {
		out[p] = n > 0
	}
	return out
}

// release gives back a request (if request) and bytes on plane p, of a
// whole or partial request (admission.Budget).
func (b *planeBudgets) release(p admission.Plane, whole, request bool, bytes int64) {
	b.mu.Lock()
	if request {
		b.budgets[p].EndRequest(whole)
	}
	if bytes > 0 {
		b.budgets[p].Release(bytes, whole)
	}
	b.mu.Unlock()
	b.room[p].Broadcast()
}

// held returns what plane p holds now, for tests.
func (b *planeBudgets) held(p admission.Plane) (requests int32, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budgets[p].Requests(), b.budgets[p].Bytes()
}

// wake wakes every waiter, to look again at its connection (shut down).
func (b *planeBudgets) wake() {
	for p := range b.room {
		b.room[p].Broadcast()
	}
}

// close wakes every waiter with false, for shutdown.
func (b *planeBudgets) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wake()
}

// frameHold is what one request being read holds: a request and bytes of
// its plane's budget, and bytes of its connection's account. It is their one
// owner, so that no path can forget a release or make one twice: the
// reader defers release, which gives back whatever the hold still owns;
// pass moves the hold to whoever takes the request on (the loop event that
// hands it to the core), leaving the reader's copy empty; and the
// connection's bytes move to the request's slot with takeConnBytes. A hold
// released twice panics.
type frameHold struct {
	sc    *serverConn
	plane admission.Plane
	// whole: the frame had arrived whole when its reading began
	// (admission.Budget's whole and partial requests).
	whole       bool
	request     bool
	budgetBytes int64
	connBytes   int64
	released    bool
}

// beginFrame takes a request of sc's plane budget for a frame whose size
// prefix has arrived, whole if all its bytes had too, waiting for room;
// nil if the connection or node went away first.
func (sc *serverConn) beginFrame(whole bool) *frameHold {
	h := &frameHold{sc: sc, plane: sc.plane(), whole: whole}
	if !sc.net.budgets.waitFor(h.plane, sc, func(b *admission.Budget) bool { return b.TryBeginRequest(whole) }) {
		return nil
	}
	h.request = true
	return h
}

// reserve adds n bytes to the hold: first the connection's account
// (waiting while they do not fit beside what it holds), then the plane's
// budget (waiting for room). False, with nothing reserved, if the
// connection or node went away first.
func (h *frameHold) reserve(n int64) bool {
	if h.released {
		panic("realnet: reserving on a released frame hold")
	}
	if !h.sc.holdBytes(n, h.connBytes) {
		return false
	}
	if !h.sc.net.budgets.waitFor(h.plane, h.sc, func(b *admission.Budget) bool { return b.TryReserve(n, h.whole, h.budgetBytes) }) {
		h.sc.freeBytes(n)
		return false
	}
	h.connBytes += n
	h.budgetBytes += n
	return true
}

// takeConnBytes moves the connection's bytes out of the hold, to the
// request's slot, which frees them once its response is written.
func (h *frameHold) takeConnBytes() int64 {
	n := h.connBytes
	h.connBytes = 0
	return n
}

// pass moves what the hold owns to a new hold, for the goroutine that takes
// the request on; this one is left empty, and releasing it does nothing.
func (h *frameHold) pass() *frameHold {
	if h.released {
		panic("realnet: passing a released frame hold")
	}
	moved := *h
	*h = frameHold{sc: h.sc, plane: h.plane, whole: h.whole}
	return &moved
}

// release gives back everything the hold still owns. A second release of
// a hold that owned something panics.
func (h *frameHold) release() {
	if h.released {
		panic(fmt.Sprintf("realnet: frame hold of connection %d released twice", h.sc.id))
	}
	if h.request || h.budgetBytes > 0 {
		h.sc.net.budgets.release(h.plane, h.whole, h.request, h.budgetBytes)
		h.released = true
	}
	if h.connBytes > 0 {
		h.sc.freeBytes(h.connBytes)
		h.released = true
	}
	h.request, h.budgetBytes, h.connBytes = false, 0, 0
}

// responseBudget is the node's admission.ResponseBudget
// (strand.response.buffered.bytes.max) behind a mutex, with the requests
// the event loop parks while it does not admit them. Client-plane answers
// are counted from the core's answer until written; control-plane ones are
// not (the control plane's own budget and its connections' accounts bound
// them, and nothing a client does may hold up quorum or replication
// traffic).
//
// A client request the budget does not admit is parked on the loop (park);
// a resumer goroutine posts resumeParked whenever bytes were freed (or the
// last resumption stopped at its quota) and the budget admits some, and
// each resumeParked hands one request to the core, so that the loop's other
// events run between answers. Readers of client connections that hold
// counted answers stop reading while the budget is full (waitRoom), so
// that clients that do not read stop adding requests; clients that read
// theirs are admitted up to twice the limit and resumed first.
type responseBudget struct {
	mu sync.Mutex
	// room is broadcast whenever bytes are freed, parked requests wait to
	// be retried, or the budget closes.
	room   sync.Cond
	budget admission.ResponseBudget
	// parkedWaiting is set while the loop holds parked requests that no
	// resumption has been posted for yet; retry once bytes were freed (or a
	// resumption stopped at its quota) since the last one was posted, so
	// that one free posts at most one resumption.
	parkedWaiting, retry bool
	closed               bool
	// parked are the client requests the loop holds back, in arrival
	// order; only the loop touches it.
	parked []parkedRequest
}

// parkedRequest is a client request the loop held back: run hands it to
// the core (handle) or drops it (its connection is gone).
type parkedRequest struct {
	sc  *serverConn
	run func(handle bool)
}

func newResponseBudget(bytesMax int64) *responseBudget {
	b := &responseBudget{budget: admission.NewResponseBudget(bytesMax)}
	b.room.L = &b.mu
	return b
}

// hold counts n bytes of answers.
func (b *responseBudget) hold(n int64) {
	b.mu.Lock()
	b.budget.Hold(n)
	b.mu.Unlock()
}

// free takes back n bytes hold counted, waking readers and the resumer.
func (b *responseBudget) free(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.budget.Free(n)
	b.retry = true
	b.mu.Unlock()
	b.room.Broadcast()
}

// full reports whether connections that hold answers must wait.
func (b *responseBudget) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budget.Full()
}

// admits reports whether sc's next request may go to the core now.
func (b *responseBudget) admits(sc *serverConn) bool {
	holding := sc.responsesCounted.Load() > 0
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budget.Admits(holding)
}

// held is what the budget counts now.
func (b *responseBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budget.Bytes()
}

// waitRoom blocks the reader of sc, a client-plane connection, while sc's
// requests could not go to the core: its client is not taking its answers
// (sendBlocked), requests of it are parked, or the budget is full and sc
// holds counted answers itself. A client that does not read adds no
// request until its answers are written (or its connection closed:
// sc.down). False once the budget closed.
func (b *responseBudget) waitRoom(sc *serverConn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && !sc.down.Load() &&
		(sc.sendBlocked.Load() || sc.parked.Load() > 0 || (b.budget.Full() && sc.responsesCounted.Load() > 0)) {
		b.room.Wait()
	}
	return !b.closed
}

// retryParked asks the resumer for a resumption: a connection's client
// took its answers (sendBlocked cleared), so its parked requests may go on
// and its reader read again.
func (b *responseBudget) retryParked() {
	b.mu.Lock()
	b.retry = true
	b.mu.Unlock()
	b.room.Broadcast()
}

// park holds back a client request on the loop (loop only): true if it
// was parked, because the budget does not admit it or requests of its
// connection are parked already (they keep their order); false if the
// caller is to hand it to the core now.
func (b *responseBudget) park(sc *serverConn, run func(handle bool)) bool {
	if sc.parked.Load() == 0 && !sc.sendBlocked.Load() && b.admits(sc) {
		return false
	}
	b.parked = append(b.parked, parkedRequest{sc: sc, run: run})
	sc.parked.Add(1)
	b.mu.Lock()
	b.parkedWaiting = true
	b.mu.Unlock()
	b.room.Broadcast()
	return true
}

// resumeParked drops the parked requests of closed connections and hands
// at most one other to the core (loop only): the oldest of a connection
// that holds no counted answer (a client that reads), else the oldest the
// budget admits, each connection's requests in arrival order. While some
// remain, it asks the resumer for another run: at once if it stopped at its
// quota, after the next free otherwise.
func (b *responseBudget) resumeParked() {
	kept := b.parked[:0]
	for _, p := range b.parked {
		if p.sc.down.Load() {
			p.sc.parked.Add(-1)
			p.run(false)
			continue
		}
		kept = append(kept, p)
	}
	clear(b.parked[len(kept):])
	b.parked = kept
	next := b.nextAdmitted(true)
	if next < 0 {
		next = b.nextAdmitted(false)
	}
	if next >= 0 {
		p := b.parked[next]
		b.parked = slices.Delete(b.parked, next, next+1)
		p.sc.parked.Add(-1)
		p.run(true)
	}
	b.mu.Lock()
	if len(b.parked) > 0 {
		b.parkedWaiting = true
		b.retry = b.retry || next >= 0
	}
	b.mu.Unlock()
	b.room.Broadcast() // readers of connections whose parked requests went on
}

// nextAdmitted is the index of the first parked request that is its
// connection's oldest and that the budget admits now, only of connections
// holding no counted answer if readersOnly; -1 if none is.
func (b *responseBudget) nextAdmitted(readersOnly bool) int {
	seen := map[*serverConn]bool{}
	for i, p := range b.parked {
		if seen[p.sc] {
			continue
		}
		seen[p.sc] = true
		if p.sc.sendBlocked.Load() || (readersOnly && p.sc.responsesCounted.Load() > 0) {
			continue
		}
		if b.admits(p.sc) {
			return i
		}
	}
	return -1
}

// resume is the resumer goroutine: it posts resumeParked on the loop each
// time requests are parked, a retry is due and the budget admits a
// connection that holds no answer, until it closes.
func (b *responseBudget) resume(loop *Loop) {
	for {
		b.mu.Lock()
		for !b.closed && !(b.parkedWaiting && b.retry && b.budget.Admits(false)) {
			b.room.Wait()
		}
		if b.closed {
			b.mu.Unlock()
			return
		}
		b.parkedWaiting, b.retry = false, false
		b.mu.Unlock()
		loop.PostFrom(admission.PlaneClient, b.resumeParked)
	}
}

// close ends the resumer and wakes every waiting reader.
func (b *responseBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.room.Broadcast()
}
