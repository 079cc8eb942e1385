package admission

import (
	"fmt"

	"strand/core/config"
)

// Deadlines are the times a connection may take, in milliseconds.
type Deadlines struct {
	// IdleMs is connections.max.idle.ms: no request being read or in
	// flight, nothing to write.
	IdleMs int64
	// ReadMs is strand.request.read.timeout.ms: from a request's first
	// byte to its last.
	ReadMs int64
	// WriteMs is strand.response.write.timeout.ms: from the start of a
	// write of responses until the client has taken them.
	WriteMs int64
}

// DeadlinesOf reads the deadlines from a node's limits.
func DeadlinesOf(l config.Limits) Deadlines {
	return Deadlines{IdleMs: l.ConnectionsMaxIdleMs, ReadMs: l.RequestReadTimeoutMs, WriteMs: l.ResponseWriteTimeoutMs}
}

// CheckEveryMs is how often the deadlines should be checked: a tenth of the
// shortest, between 10 ms and 1 s, so that a connection is closed at most
// about a tenth late.
func (d Deadlines) CheckEveryMs() int64 {
	return min(max(min(d.IdleMs, d.ReadMs, d.WriteMs)/10, 10), 1000)
}

// Expiry names the deadline a connection overstayed.
type Expiry uint8

const (
	// NotExpired: every deadline holds.
	NotExpired Expiry = iota
	// ExpiredIdle: connections.max.idle.ms.
	ExpiredIdle
	// ExpiredRead: strand.request.read.timeout.ms.
	ExpiredRead
	// ExpiredWrite: strand.response.write.timeout.ms.
	ExpiredWrite
)

// Key is the configuration key of the deadline.
func (e Expiry) Key() string {
	switch e {
	case ExpiredIdle:
		return "connections.max.idle.ms"
	case ExpiredRead:
		return "strand.request.read.timeout.ms"
	case ExpiredWrite:
		return "strand.response.write.timeout.ms"
	}
	return "none"
}

// ConnAccount is one connection's share of a node: the bytes held for it
// (requests read and not yet answered and written, responses not yet
// written: strand.connection.buffered.bytes.max) and the times its
// deadlines run from.
type ConnAccount struct {
	bufferedBytesMax int64
	bufferedBytes    int64
	// lastActivityMs is when a request last arrived whole or a write
	// completed (or the connection opened).
	lastActivityMs int64
	// readSinceMs is when the first byte of the request being read
	// arrived, or when the node last resumed reading it after waiting for
	// room; -1 when none is read, or while the node waits (readPaused).
	readSinceMs int64
	// readPaused is set while the node waits for room to go on reading a
	// request: the wait is the node's, not the client's, and the read
	// deadline does not run; nor is the connection idle.
	readPaused bool
	// writeSinceMs is when the write in progress began; -1 when none is.
	writeSinceMs int64
}

// NewConnAccount returns the account of a connection opened at nowMs.
func NewConnAccount(bufferedBytesMax, nowMs int64) ConnAccount {
	return ConnAccount{bufferedBytesMax: bufferedBytesMax, lastActivityMs: nowMs, readSinceMs: -1, writeSinceMs: -1}
}

// HasRoom reports whether the connection may read another request: it
// holds less than its limit.
func (a *ConnAccount) HasRoom() bool { return a.bufferedBytes < a.bufferedBytesMax }

// Fits reports whether n more bytes of a request that holds ownBytes
// already fit beside what the connection holds; they always do when it
// holds nothing else (config keeps the limit at least
// socket.request.max.bytes, so a whole largest request fits alone, and the
// structures it decodes into, reserved beside it, may take it past).
func (a *ConnAccount) Fits(n, ownBytes int64) bool {
	return a.bufferedBytes == ownBytes || a.bufferedBytes+n <= a.bufferedBytesMax
}

// Hold counts n more bytes held for the connection.
func (a *ConnAccount) Hold(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("admission: holding %d bytes", n))
	}
	a.bufferedBytes += n
}

// Free takes back n bytes Hold counted.
func (a *ConnAccount) Free(n int64) {
	a.bufferedBytes -= n
	if n < 0 || a.bufferedBytes < 0 {
		panic(fmt.Sprintf("admission: freeing %d bytes leaves a connection holding %d", n, a.bufferedBytes))
	}
}

// FreeAll forgets everything held: the connection is gone.
func (a *ConnAccount) FreeAll() { a.bufferedBytes = 0 }

// BufferedBytes is what the connection holds.
func (a *ConnAccount) BufferedBytes() int64 { return a.bufferedBytes }

// ReadStarted records the first byte of a request at nowMs.
func (a *ConnAccount) ReadStarted(nowMs int64) {
	if a.readSinceMs >= 0 || a.readPaused {
		panic("admission: a request's read started twice")
	}
	a.readSinceMs = nowMs
}

// ReadPaused records that the node waits for room (in its plane's budget,
// or beside what the connection holds) before it reads on: the read
// deadline stops until ReadResumed.
func (a *ConnAccount) ReadPaused() {
	if a.readSinceMs < 0 || a.readPaused {
		panic("admission: pausing a read that is not running")
	}
	a.readSinceMs, a.readPaused = -1, true
}

// ReadResumed records that the node reads on at nowMs: the request has
// the whole read deadline again from here.
func (a *ConnAccount) ReadResumed(nowMs int64) {
	if !a.readPaused {
		panic("admission: resuming a read that is not paused")
	}
	a.readSinceMs, a.readPaused = nowMs, false
}

// ReadDone records that the request being read arrived whole (or its read
// was abandoned) at nowMs.
func (a *ConnAccount) ReadDone(nowMs int64) {
	a.readSinceMs, a.readPaused = -1, false
	a.lastActivityMs = max(a.lastActivityMs, nowMs)
}

// WriteStarted records the start of a write that may wait for the client.
func (a *ConnAccount) WriteStarted(nowMs int64) {
	if a.writeSinceMs >= 0 {
		panic("admission: a write started while another runs")
	}
	a.writeSinceMs = nowMs
}

// WriteDone records that the write completed at nowMs.
func (a *ConnAccount) WriteDone(nowMs int64) {
	a.writeSinceMs = -1
	a.lastActivityMs = max(a.lastActivityMs, nowMs)
}

// PressuredReadMs is the read deadline while the connection's plane is
// under pressure (other requests wait for room in its budget): a tenth of
// strand.request.read.timeout.ms, so that requests that stall mid-way hold
// the budget others wait for only briefly, not for the whole deadline.
func (d Deadlines) PressuredReadMs() int64 { return max(d.ReadMs/10, 1) }

// Expired says which deadline the connection has overstayed at nowMs, if
// any. busy reports requests in flight (read, not yet answered and
// written) or responses waiting to be written: such a connection is not
// idle, whatever its last activity (a long poll parked in the core).
// pressured reports that requests wait for room in the connection's plane
// budget: the request being read then has PressuredReadMs.
func (a *ConnAccount) Expired(nowMs int64, busy, pressured bool, d Deadlines) Expiry {
	readMs := d.ReadMs
	if pressured {
		readMs = d.PressuredReadMs()
	}
	switch {
	case a.writeSinceMs >= 0 && nowMs-a.writeSinceMs >= d.WriteMs:
		return ExpiredWrite
	case a.readSinceMs >= 0 && nowMs-a.readSinceMs >= readMs:
		return ExpiredRead
	case a.readSinceMs < 0 && !a.readPaused && a.writeSinceMs < 0 && !busy && nowMs-a.lastActivityMs >= d.IdleMs:
		return ExpiredIdle
	}
	return NotExpired
}
