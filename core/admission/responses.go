package admission

import "fmt"

// ResponseBudget is the node's bound on the response bytes it holds for
// client-plane connections whose clients have not taken them yet
// (strand.response.buffered.bytes.max). A response is counted from the
// moment the core answers until the socket has taken its last byte; the
// file regions of a Fetch answer are sent from the page cache and are not
// counted, only the bytes around and between them.
//
// Its size is known only once the core has answered, so the bound is kept
// where answers are made: while the budget is Full, no client request is
// given to the core (the caller parks it until bytes are freed). The
// budget can then exceed its limit by what one request's answer adds, and
// no more. Kafka has no such bound: it mutes a channel while its response
// is in flight, so its responses are bounded by one per connection.
type ResponseBudget struct {
	bytesMax int64
	bytes    int64
}

// NewResponseBudget returns an empty budget of bytesMax bytes.
func NewResponseBudget(bytesMax int64) ResponseBudget {
	if bytesMax < 1 {
		panic(fmt.Sprintf("admission: a response budget of %d bytes", bytesMax))
	}
	return ResponseBudget{bytesMax: bytesMax}
}

// Full reports whether the budget holds its limit or more: client requests
// must wait for the core until bytes are freed.
func (b *ResponseBudget) Full() bool { return b.bytes >= b.bytesMax }

// Hold counts n more response bytes. It never refuses: the answer exists
// already, and Full stops the next one.
func (b *ResponseBudget) Hold(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("admission: holding %d response bytes", n))
	}
	b.bytes += n
}

// Free takes back n bytes Hold counted, and reports whether that ended a
// Full budget (parked requests may go on).
func (b *ResponseBudget) Free(n int64) (unfull bool) {
	wasFull := b.Full()
	b.bytes -= n
	if n < 0 || b.bytes < 0 {
		panic(fmt.Sprintf("admission: freeing %d response bytes leaves %d", n, b.bytes))
	}
	return wasFull && !b.Full()
}

// Bytes is what the budget holds now.
func (b *ResponseBudget) Bytes() int64 { return b.bytes }

// PressuredWriteMs is the write deadline of a client-plane connection while
// the response budget is Full: a tenth of strand.response.write.timeout.ms.
// A client that does not read its answers then loses its connection within
// seconds, and the bytes it held go to clients that read.
func (d Deadlines) PressuredWriteMs() int64 { return max(d.WriteMs/10, 1) }

// WriteOverdue reports whether a write in progress at nowMs has run for
// writeMs or longer.
func (a *ConnAccount) WriteOverdue(nowMs, writeMs int64) bool {
	return a.writeSinceMs >= 0 && nowMs-a.writeSinceMs >= writeMs
}
