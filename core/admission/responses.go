package admission

import "fmt"

// ResponseBudget is the node's bound on the response bytes it holds for
// client-plane connections whose clients have not taken them yet
// (strand.response.buffered.bytes.max). A response is counted from the
// moment the core answers until the socket has taken its last byte; the
// file regions of a Fetch answer are sent from the page cache and are not
// counted, only the bytes around and between them.
//
// An answer's size is known only once the core has made it, so the bound is
// kept where requests are handed to the core: Admits says whether a
// connection's next request may go to the core now, and the caller parks it
// until bytes are freed otherwise. A connection that holds answers itself
// (its client is behind) is admitted below the limit; one that holds none
// (its client has taken every answer) below twice the limit, so that while
// clients that do not read fill the budget, clients that do are still
// answered at once. The bytes held therefore never exceed twice the limit by
// more than one answer. Kafka has no such bound: it mutes a channel while a
// response is in flight, so its responses are bounded by one a connection.
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

// Admits reports whether a request of a connection may be handed to the
// core now: holding says whether the connection holds answers counted here.
func (b *ResponseBudget) Admits(holding bool) bool {
	if holding {
		return b.bytes < b.bytesMax
	}
	return b.bytes < 2*b.bytesMax
}

// Full reports whether the budget holds its limit or more: connections that
// hold answers wait (Admits(true) is false).
func (b *ResponseBudget) Full() bool { return !b.Admits(true) }

// Hold counts n more response bytes. It never refuses: the answer exists
// already, and Admits stops the next one.
func (b *ResponseBudget) Hold(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("admission: holding %d response bytes", n))
	}
	b.bytes += n
}

// Free takes back n bytes Hold counted.
func (b *ResponseBudget) Free(n int64) {
	b.bytes -= n
	if n < 0 || b.bytes < 0 {
		panic(fmt.Sprintf("admission: freeing %d response bytes leaves %d", n, b.bytes))
	}
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
