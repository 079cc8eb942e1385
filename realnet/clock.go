package realnet

import (
	"time"

	"strand/core/env"
)

// Clock is env.Clock on real time: monotonic time from Go's monotonic
// clock reading (time.Since a fixed start), wall time from time.Now, and
// timers that fire on the node's event loop.
type Clock struct {
	loop  *Loop
	start time.Time
}

var _ env.Clock = (*Clock)(nil)

// NewClock returns a clock whose timers fire on loop.
func NewClock(loop *Loop) *Clock { return &Clock{loop: loop, start: time.Now()} }

// MonotonicNs is nanoseconds since the clock was made; it never decreases.
func (c *Clock) MonotonicNs() int64 { return int64(time.Since(c.start)) }

// WallMs is the system's wall clock in milliseconds since the Unix epoch.
func (c *Clock) WallMs() int64 { return time.Now().UnixMilli() }

// timerState is where a timer is in its life. Only the loop goroutine reads
// or writes it, which is what makes Stop exact.
type timerState uint8

const (
	timerPending timerState = iota
	timerStopped
	timerFired
)

// loopTimer is a SetTimer callback. time.AfterFunc posts the fire to the
// loop; the loop runs it only if the timer is still pending, so that a Stop
// that returned true wins even if the post is already queued.
type loopTimer struct {
	state timerState
	fire  func()
	timer *time.Timer
}

// SetTimer arranges for fire to run on the loop after delayNs (a negative
// delay counts as zero). Call it on the loop.
func (c *Clock) SetTimer(delayNs int64, fire func()) env.Timer {
	t := &loopTimer{fire: fire}
	t.timer = time.AfterFunc(time.Duration(max(delayNs, 0)), func() {
		c.loop.Post(t.run)
	})
	return t
}

// run fires the timer on the loop unless it was stopped.
func (t *loopTimer) run() {
	if t.state != timerPending {
		return
	}
	t.state = timerFired
	t.fire()
}

// Stop cancels the timer; true means fire will never run. Call it on the
// loop.
func (t *loopTimer) Stop() bool {
	if t.state != timerPending {
		return false
	}
	t.state = timerStopped
	t.timer.Stop()
	return true
}
