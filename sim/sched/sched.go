package sched

import (
	"fmt"
	"io"
)

// EventsPendingMaxDefault bounds the events waiting in the queue when
// Options.EventsPendingMax is zero. A run that exceeds it has a runaway
// feedback loop (something scheduling faster than it is consumed), and the
// scheduler stops it with a panic rather than exhausting memory.
const EventsPendingMaxDefault = 1 << 22

// Options configures a Scheduler.
type Options struct {
	// EventsPendingMax is the most events that may wait at once (queued or
	// deferred by a paused node). Zero means EventsPendingMaxDefault.
	EventsPendingMax int
	// TraceWriter, when non-nil, receives every trace record as a line of
	// text as it is recorded (VERBOSE mode). The hash is the same either way.
	TraceWriter io.Writer
}

// Slot states besides a heap position (heapIndex >= 0).
const (
	slotFree     = -1
	slotDeferred = -2
)

// slot holds one pending event. Slots are recycled through a free list so
// that scheduling allocates nothing once the slab has grown; handles name a
// slot together with its id, so a recycled slot never answers to an old
// handle.
type slot struct {
	fn func()
	// node is the event's destination, nil for a global event.
	node *Node
	// incarnation is node's incarnation when the event was scheduled.
	incarnation uint64
	// id identifies this use of the slot; 0 while the slot is free.
	id uint64
	// heapIndex is the slot's position in the heap, or slotFree, or
	// slotDeferred while a paused node holds it.
	heapIndex int32
}

// heapEntry is one queued event. The ordering key lives in the entry, not
// the slot, so that comparisons touch one cache line.
type heapEntry struct {
	atNs int64
	seq  uint64
	slot int32
}

func (a heapEntry) before(b heapEntry) bool {
	if a.atNs != b.atNs {
		return a.atNs < b.atNs
	}
	return a.seq < b.seq
}

// Scheduler owns virtual time and the event queue. It is not safe for
// concurrent use; a simulated run belongs to one goroutine.
type Scheduler struct {
	nowNs int64
	// seq numbers every push onto the heap; it breaks ties between events
	// due at the same time in push order.
	seq uint64
	// idNext numbers handles.
	idNext uint64

	slots []slot
	free  []int32
	heap  []heapEntry

	pendingMax int
	// deferredCount counts slots held by paused nodes, for pendingMax.
	deferredCount int

	eventsRun     uint64
	eventsDropped uint64
	// haltReason is set by Halt; Run and Step do nothing once it is.
	haltReason string

	trace tracer
}

// New returns a scheduler at virtual time zero with an empty queue.
func New(opts Options) *Scheduler {
	pendingMax := opts.EventsPendingMax
	if pendingMax == 0 {
		pendingMax = EventsPendingMaxDefault
	}
	if pendingMax < 0 {
		panic(fmt.Sprintf("sched: EventsPendingMax %d is negative", pendingMax))
	}
	return &Scheduler{
		pendingMax: pendingMax,
		trace:      newTracer(opts.TraceWriter),
	}
}

// NowNs returns the virtual time in nanoseconds since the run began.
func (s *Scheduler) NowNs() int64 { return s.nowNs }

// EventsRun counts the callbacks that have run.
func (s *Scheduler) EventsRun() uint64 { return s.eventsRun }

// EventsDropped counts events discarded because their node had crashed
// since they were scheduled.
func (s *Scheduler) EventsDropped() uint64 { return s.eventsDropped }

// Pending returns how many events are queued or deferred.
func (s *Scheduler) Pending() int { return len(s.heap) + s.deferredCount }

// Schedule runs fn at virtual time atNs. A time in the past counts as now.
func (s *Scheduler) Schedule(atNs int64, fn func()) Handle {
	return s.schedule(atNs, fn, nil)
}

// After runs fn once delayNs of virtual time has passed. A negative delay
// counts as zero.
func (s *Scheduler) After(delayNs int64, fn func()) Handle {
	return s.schedule(s.nowNs+max(delayNs, 0), fn, nil)
}

func (s *Scheduler) schedule(atNs int64, fn func(), node *Node) Handle {
	if fn == nil {
		panic("sched: scheduling a nil callback")
	}
	if s.Pending() >= s.pendingMax {
		panic(fmt.Sprintf("sched: %d events pending, the limit (EventsPendingMax): runaway scheduling at t=%dns",
			s.Pending(), s.nowNs))
	}
	atNs = max(atNs, s.nowNs)
	index := s.allocSlot()
	sl := &s.slots[index]
	s.idNext++
	sl.fn = fn
	sl.node = node
	if node != nil {
		sl.incarnation = node.incarnation
	}
	sl.id = s.idNext
	s.push(heapEntry{atNs: atNs, slot: index})
	return Handle{s: s, slot: index, id: sl.id}
}

func (s *Scheduler) allocSlot() int32 {
	if n := len(s.free); n > 0 {
		index := s.free[n-1]
		s.free = s.free[:n-1]
		return index
	}
	s.slots = append(s.slots, slot{heapIndex: slotFree})
	return int32(len(s.slots) - 1)
}

func (s *Scheduler) freeSlot(index int32) {
	sl := &s.slots[index]
	*sl = slot{heapIndex: slotFree}
	s.free = append(s.free, index)
}

// Step runs the next due event, advancing virtual time to it. Events of
// crashed incarnations are discarded and events of paused nodes deferred on
// the way, without counting as the step. It reports whether an event ran.
func (s *Scheduler) Step() bool {
	for len(s.heap) > 0 && s.haltReason == "" {
		entry := s.pop()
		if entry.atNs < s.nowNs {
			panic(fmt.Sprintf("sched: event at %dns popped after time reached %dns", entry.atNs, s.nowNs))
		}
		s.nowNs = entry.atNs
		if s.dispatch(entry.slot) {
			return true
		}
	}
	return false
}

// dispatch runs the event in slot index, or defers or drops it if its node
// is paused or has crashed. It reports whether the callback ran.
func (s *Scheduler) dispatch(index int32) bool {
	sl := &s.slots[index]
	if node := sl.node; node != nil {
		if sl.incarnation != node.incarnation || !node.up {
			s.eventsDropped++
			s.freeSlot(index)
			return false
		}
		if node.paused {
			sl.heapIndex = slotDeferred
			s.deferredCount++
			node.deferred = append(node.deferred, index)
			return false
		}
	}
	fn := sl.fn
	s.freeSlot(index)
	s.eventsRun++
	fn()
	return true
}

// Run runs every event due at or before untilNs, then leaves virtual time at
// untilNs. Events that the callbacks schedule within the window run too.
func (s *Scheduler) Run(untilNs int64) {
	if untilNs < s.nowNs {
		panic(fmt.Sprintf("sched: Run until %dns, but time is already %dns", untilNs, s.nowNs))
	}
	for len(s.heap) > 0 && s.heap[0].atNs <= untilNs && s.haltReason == "" {
		s.Step()
	}
	if s.haltReason == "" {
		s.nowNs = untilNs
	}
}

// Halt stops the run: the current event finishes, then Run and Step return
// at once and run nothing more, leaving time where the halt happened. A
// checker that finds a violation mid-event calls it, so that the trace ends
// at the violation. The reason is traced; only the first Halt counts.
func (s *Scheduler) Halt(reason string) {
	if reason == "" {
		panic("sched: Halt needs a reason")
	}
	if s.haltReason != "" {
		return
	}
	s.haltReason = reason
	s.Trace(Record{Kind: "run.halt", Node: -1, Text: reason})
}

// Halted returns the reason the run was halted, or "".
func (s *Scheduler) Halted() string { return s.haltReason }

// RunFor runs for durationNs of virtual time from now.
func (s *Scheduler) RunFor(durationNs int64) { s.Run(s.nowNs + durationNs) }

// Handle names a scheduled event so that it can be cancelled. The zero
// Handle names nothing. Handle satisfies env.Timer.
type Handle struct {
	s    *Scheduler
	slot int32
	id   uint64
}

// Cancel removes the event if it has not run, been dropped, or been
// cancelled already, and reports whether it did. After Cancel returns true
// the callback never runs.
func (h Handle) Cancel() bool {
	if h.s == nil {
		return false
	}
	s := h.s
	sl := &s.slots[h.slot]
	if sl.id != h.id {
		return false
	}
	switch {
	case sl.heapIndex >= 0:
		s.removeAt(int(sl.heapIndex))
		s.freeSlot(h.slot)
	case sl.heapIndex == slotDeferred:
		// The paused node's deferred list still names the slot; Resume
		// frees it when it finds the callback gone.
		sl.fn = nil
		sl.id = 0
	default:
		panic(fmt.Sprintf("sched: handle %d names slot %d in state %d", h.id, h.slot, sl.heapIndex))
	}
	return true
}

// Stop is Cancel under the name env.Timer uses.
func (h Handle) Stop() bool { return h.Cancel() }

// Pending reports whether the event is still waiting to run.
func (h Handle) Pending() bool {
	return h.s != nil && h.s.slots[h.slot].id == h.id
}
