package env

// Clock gives a node its sense of time. See SPEC.md §2.1.
//
// Monotonic time never goes backwards and is what timeouts are measured in.
// Wall time is what records carry (timestamps, retention by time, the time
// index, LogAppendTime); it may be skewed between nodes and may jump, in
// either direction, and the core must tolerate both.
type Clock interface {
	// MonotonicNs returns nanoseconds since an arbitrary, fixed origin.
	// Successive calls never decrease.
	MonotonicNs() int64
	// WallMs returns milliseconds since the Unix epoch as this node believes it.
	// It is the one method the core also calls off the loop: a Prechecker
	// reads it, on the environment's goroutines, as the time it validates
	// produced batches at.
	WallMs() int64
	// SetTimer arranges for fire to run on the node's event loop once at least
	// delayNs of monotonic time has passed. A negative delay counts as zero.
	SetTimer(delayNs int64, fire func()) Timer
}

// Timer is a pending SetTimer callback.
type Timer interface {
	// Stop cancels the timer. It reports whether the callback was still
	// pending; after Stop returns true the callback never runs.
	Stop() bool
}
