package admission

import "fmt"

// Budget is one plane's share of the requests a node reads: how many are
// being read or queued for the core (queued.max.requests) and their bytes
// (queued.max.request.bytes), from the first byte of a request until the
// core takes it, as Kafka's request channel and memory pool bound them.
// Bytes are reserved as they arrive, never from a size prefix alone: a
// client that claims a large request and sends little holds little. Each
// plane has a Budget of its own.
//
// A request is whole if all its bytes had arrived when the node began to
// read it (the usual case), partial otherwise. Partial requests may hold at
// most half of each limit between them (rounded up, and a partial request
// alone may take more bytes, as a request always fits alone): requests
// that stall mid-way can fill only that half, and whole requests, which
// are read at once and leave at once, always find the other.
type Budget struct {
	requestsMax int32
	// bytesMax <= 0 is unbounded, as queued.max.request.bytes=-1 in Kafka.
	bytesMax int64
	requests int32
	bytes    int64
	// partialRequests and partialBytes are the partial requests' share of
	// requests and bytes.
	partialRequests int32
	partialBytes    int64
}

// NewBudget returns an empty budget with the two limits.
func NewBudget(requestsMax int32, bytesMax int64) *Budget {
	if requestsMax < 1 {
		panic(fmt.Sprintf("admission: a budget of %d requests admits none", requestsMax))
	}
	return &Budget{requestsMax: requestsMax, bytesMax: bytesMax}
}

// TryBeginRequest counts one more request being read, whole or partial,
// if the budget has room for it.
func (b *Budget) TryBeginRequest(whole bool) bool {
	if b.requests >= b.requestsMax || (!whole && b.partialRequests >= (b.requestsMax+1)/2) {
		return false
	}
	b.requests++
	if !whole {
		b.partialRequests++
	}
	return true
}

// EndRequest takes back a request TryBeginRequest counted: the core has
// taken it, or its connection failed.
func (b *Budget) EndRequest(whole bool) {
	b.requests--
	if !whole {
		b.partialRequests--
	}
	if b.requests < 0 || b.partialRequests < 0 {
		panic("admission: a budget's requests went below zero")
	}
}

// TryReserve reserves n more bytes of a whole or partial request that
// holds ownBytes already, if they fit. A request that holds every byte
// reserved may always grow (alone, it always fits): a frame's decoded
// structures, reserved beside it, may take it past the limit.
func (b *Budget) TryReserve(n int64, whole bool, ownBytes int64) bool {
	if b.bytesMax > 0 && b.bytes+n > b.bytesMax && b.bytes > ownBytes {
		return false
	}
	othersPartial := b.partialBytes
	if !whole {
		othersPartial -= ownBytes
	}
	if !whole && b.bytesMax > 0 && othersPartial > 0 && b.partialBytes+n > (b.bytesMax+1)/2 {
		return false
	}
	b.bytes += n
	if !whole {
		b.partialBytes += n
	}
	return true
}

// Release takes back n bytes TryReserve reserved for a whole or partial
// request.
func (b *Budget) Release(n int64, whole bool) {
	b.bytes -= n
	if !whole {
		b.partialBytes -= n
	}
	if n < 0 || b.bytes < 0 || b.partialBytes < 0 {
		panic(fmt.Sprintf("admission: releasing %d bytes leaves a budget at %d (%d partial)", n, b.bytes, b.partialBytes))
	}
}

// Requests and Bytes are what the budget holds now.
func (b *Budget) Requests() int32 { return b.requests }

// Bytes is the bytes reserved now.
func (b *Budget) Bytes() int64 { return b.bytes }

// FrameSmallBytes is the buffer any frame may have as soon as its size
// prefix has arrived, whatever else has: a connection's read buffer holds
// as much already.
const FrameSmallBytes = 64 << 10

// FrameBytes is the buffer a frame of lengthBytes may have once
// arrivedBytes of it have arrived (read, or waiting in the socket): twice
// what has arrived, and at least FrameSmallBytes, up to the whole frame. So
// a client that claims a large frame and stalls holds at most twice what it
// sent; a frame that arrives faster than it is read (the usual case) gets
// its whole buffer once half of it is there, and is read without copying;
// one read as it trickles in is copied each time its buffer doubles, at
// most twice its length in all.
func FrameBytes(lengthBytes, arrivedBytes int64) int64 {
	if lengthBytes < 0 || arrivedBytes < 0 {
		panic(fmt.Sprintf("admission: a frame of %d bytes with %d arrived", lengthBytes, arrivedBytes))
	}
	return min(lengthBytes, max(FrameSmallBytes, 2*arrivedBytes))
}
