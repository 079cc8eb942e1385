package sched

import "fmt"

// Node is a simulated process: the destination of timers, message
// deliveries and disk completions. It gates every event scheduled through
// it:
//   - while the node is paused, due events wait, in order, until Resume;
//   - once it has crashed, events scheduled before the crash never run,
//     because each crash starts a new incarnation and an event runs only in
//     the incarnation that scheduled it.
type Node struct {
	s *Scheduler
	// traceID names the node in trace records.
	traceID int32
	// incarnation counts crashes; events carry the value they were
	// scheduled under.
	incarnation uint64
	up          bool
	paused      bool
	// pauses counts Pause calls, so that a PauseFor's resume cannot end a
	// later pause.
	pauses uint64
	// deferred holds, oldest first, the slots of events that fell due while
	// the node was paused.
	deferred []int32
	onCrash  []func()
}

// NewNode returns a running node in its first incarnation. traceID names it
// in the trace (a broker's node.id, or a client number).
func (s *Scheduler) NewNode(traceID int32) *Node {
	return &Node{s: s, traceID: traceID, up: true}
}

// TraceID returns the number the node carries in trace records.
func (n *Node) TraceID() int32 { return n.traceID }

// Incarnation counts the node's crashes so far.
func (n *Node) Incarnation() uint64 { return n.incarnation }

// Up reports whether the node is running (possibly paused): it has not
// crashed, or has restarted since.
func (n *Node) Up() bool { return n.up }

// Paused reports whether the node is stalled.
func (n *Node) Paused() bool { return n.paused }

// After runs fn on the node once delayNs has passed, subject to pause and
// crash. Scheduling on a crashed node schedules nothing and returns the zero
// Handle: no code of a dead incarnation may run.
func (n *Node) After(delayNs int64, fn func()) Handle {
	return n.At(n.s.nowNs+max(delayNs, 0), fn)
}

// At runs fn on the node at virtual time atNs, subject to pause and crash.
func (n *Node) At(atNs int64, fn func()) Handle {
	if !n.up {
		n.s.eventsDropped++
		return Handle{}
	}
	return n.s.schedule(atNs, fn, n)
}

// Post runs fn on the node as soon as possible: after the current event and
// every event already due now. It matches memdisk.Options.Post.
func (n *Node) Post(fn func()) { n.After(0, fn) }

// OnCrash registers fn to run, in registration order, whenever the node
// crashes: the network breaks its connections, the disk drops unsynced
// bytes. Hooks run after the incarnation has moved on.
func (n *Node) OnCrash(fn func()) { n.onCrash = append(n.onCrash, fn) }

// Pause stalls the node: events due while it is paused wait until Resume.
// Time keeps passing, as it does for a process stopped by a GC pause.
func (n *Node) Pause() {
	if !n.up {
		panic(fmt.Sprintf("sched: pausing node %d, which is down", n.traceID))
	}
	n.paused = true
	n.pauses++
	n.s.Trace(Record{Kind: "node.pause", Node: n.traceID})
}

// PauseFor pauses the node and schedules its Resume durationNs later. The
// resume is a global event, so it runs even though the node is paused; if
// the node crashes, or is resumed and paused again, first, it does nothing.
func (n *Node) PauseFor(durationNs int64) {
	n.Pause()
	incarnation, pauses := n.incarnation, n.pauses
	n.s.After(durationNs, func() {
		if n.incarnation == incarnation && n.pauses == pauses && n.paused {
			n.Resume()
		}
	})
}

// Resume ends a pause: the deferred events are queued again at the current
// time, in the order they fell due, behind events already due now.
func (n *Node) Resume() {
	if !n.paused {
		panic(fmt.Sprintf("sched: resuming node %d, which is not paused", n.traceID))
	}
	n.paused = false
	n.s.Trace(Record{Kind: "node.resume", Node: n.traceID, A: int64(len(n.deferred))})
	for _, index := range n.deferred {
		n.s.deferredCount--
		if n.s.slots[index].fn == nil { // cancelled while deferred
			n.s.freeSlot(index)
			continue
		}
		n.s.push(heapEntry{atNs: n.s.nowNs, slot: index})
	}
	n.deferred = n.deferred[:0]
}

// Crash kills the node: its incarnation moves on, so every event scheduled
// for it so far is discarded, and the crash hooks run. The node stays down
// until Restart.
func (n *Node) Crash() {
	if !n.up {
		panic(fmt.Sprintf("sched: crashing node %d, which is already down", n.traceID))
	}
	n.incarnation++
	n.up = false
	n.paused = false
	for _, index := range n.deferred {
		n.s.deferredCount--
		n.s.eventsDropped++
		n.s.freeSlot(index)
	}
	n.deferred = n.deferred[:0]
	n.s.Trace(Record{Kind: "node.crash", Node: n.traceID, A: int64(n.incarnation)})
	for _, hook := range n.onCrash {
		hook()
	}
}

// Restart brings a crashed node back up in its new incarnation. The caller
// builds the node's fresh volatile state.
func (n *Node) Restart() {
	if n.up {
		panic(fmt.Sprintf("sched: restarting node %d, which is up", n.traceID))
	}
	n.up = true
	n.s.Trace(Record{Kind: "node.restart", Node: n.traceID, A: int64(n.incarnation)})
}
