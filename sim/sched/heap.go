package sched

// The event queue is a binary min-heap of heapEntry, hand-rolled rather than
// container/heap so that no entry is boxed into an interface. Every move
// records the entry's new position in its slot, which is what lets Cancel
// remove an event in O(log n) instead of leaving it to rot in the queue.

// push queues entry, stamping it with the next sequence number.
func (s *Scheduler) push(entry heapEntry) {
	s.seq++
	entry.seq = s.seq
	s.heap = append(s.heap, entry)
	s.place(len(s.heap)-1, entry)
	s.siftUp(len(s.heap) - 1)
}

// pop removes and returns the earliest entry. The heap must not be empty.
func (s *Scheduler) pop() heapEntry {
	top := s.heap[0]
	s.removeAt(0)
	return top
}

// removeAt removes the entry at position i and marks its slot as out of the
// heap (the caller decides whether the slot is freed or deferred).
func (s *Scheduler) removeAt(i int) {
	removed := s.heap[i]
	last := len(s.heap) - 1
	if i != last {
		s.place(i, s.heap[last])
	}
	s.heap = s.heap[:last]
	if i != last {
		if !s.siftDown(i) {
			s.siftUp(i)
		}
	}
	s.slots[removed.slot].heapIndex = slotFree
}

func (s *Scheduler) place(i int, entry heapEntry) {
	s.heap[i] = entry
	s.slots[entry.slot].heapIndex = int32(i)
}

func (s *Scheduler) siftUp(i int) {
	entry := s.heap[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !entry.before(s.heap[parent]) {
			break
		}
		s.place(i, s.heap[parent])
		i = parent
	}
	s.place(i, entry)
}

// siftDown moves the entry at i down to its place and reports whether it
// moved.
func (s *Scheduler) siftDown(i int) bool {
	start := i
	entry := s.heap[i]
	n := len(s.heap)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && s.heap[right].before(s.heap[child]) {
			child = right
		}
		if !s.heap[child].before(entry) {
			break
		}
		s.place(i, s.heap[child])
		i = child
	}
	s.place(i, entry)
	return i != start
}
