package admission

import "fmt"

// Budget is one plane's share of the requests a node reads: how many are
// being read or queued for the core (queued.max.requests) and their bytes
// (queued.max.request.bytes), from the first byte of a request until the
// core takes it, as Kafka's request channel and memory pool bound them.
// Bytes are reserved as they arrive, never from a size prefix alone: a
// client that claims a large request and sends little holds little. Each
// plane has a Budget of its own.
type Budget struct {
	requestsMax int32
	// bytesMax <= 0 is unbounded, as queued.max.request.bytes=-1 in Kafka.
	bytesMax int64
	requests int32
	bytes    int64
}

// NewBudget returns an empty budget with the two limits.
func NewBudget(requestsMax int32, bytesMax int64) *Budget {
	if requestsMax < 1 {
		panic(fmt.Sprintf("admission: a budget of %d requests admits none", requestsMax))
	}
	return &Budget{requestsMax: requestsMax, bytesMax: bytesMax}
}

// TryBeginRequest counts one more request being read, if the budget has
// room for it.
func (b *Budget) TryBeginRequest() bool {
	if b.requests >= b.requestsMax {
		return false
	}
	b.requests++
	return true
}

// EndRequest takes back a request TryBeginRequest counted: the core has
// taken it, or its connection failed.
func (b *Budget) EndRequest() {
	b.requests--
	if b.requests < 0 {
		panic("admission: a budget's requests went below zero")
	}
}

// TryReserve reserves n more bytes of requests whose bytes have arrived or
// are being read, if they fit.
func (b *Budget) TryReserve(n int64) bool {
	if b.bytesMax > 0 && b.bytes+n > b.bytesMax {
		return false
	}
	b.bytes += n
	return true
}

// TrySpeculate reserves n bytes for a frame ahead of its bytes (its whole
// buffer at once, so that the frame is read without copying as it grows),
// if they fit in the lower half of the byte budget: a client that stalls
// after claiming a large frame can hold at most that half, and the upper
// half stays for bytes that have arrived.
func (b *Budget) TrySpeculate(n int64) bool {
	if b.bytesMax > 0 && b.bytes+n > b.bytesMax/2 {
		return false
	}
	b.bytes += n
	return true
}

// Release takes back n bytes TryReserve or TrySpeculate reserved.
func (b *Budget) Release(n int64) {
	b.bytes -= n
	if n < 0 || b.bytes < 0 {
		panic(fmt.Sprintf("admission: releasing %d bytes leaves a budget at %d", n, b.bytes))
	}
}

// Requests and Bytes are what the budget holds now.
func (b *Budget) Requests() int32 { return b.requests }

// Bytes is the bytes reserved now.
func (b *Budget) Bytes() int64 { return b.bytes }

// FrameSmallBytes is the largest frame given its whole buffer as soon as
// its size prefix has arrived, whatever the budget's speculation allows:
// a connection's read buffer holds as much already.
const FrameSmallBytes = 64 << 10

// FirstFrameBytes is the buffer a frame of lengthBytes starts with when it
// may not speculate.
func FirstFrameBytes(lengthBytes int64) int64 {
	if lengthBytes < 0 {
		panic(fmt.Sprintf("admission: a frame of %d bytes", lengthBytes))
	}
	return min(lengthBytes, FrameSmallBytes)
}

// NextFrameBytes is the buffer a frame of lengthBytes grows to once its
// bytes have filled capacityBytes: twice as much, so that what it holds
// beyond what has arrived never exceeds what has (past the first
// FrameSmallBytes), and copying as it grows costs at most twice its length.
func NextFrameBytes(capacityBytes, lengthBytes int64) int64 {
	if capacityBytes <= 0 || capacityBytes >= lengthBytes {
		panic(fmt.Sprintf("admission: growing a frame buffer of %d bytes for a frame of %d", capacityBytes, lengthBytes))
	}
	return min(lengthBytes, 2*capacityBytes)
}
