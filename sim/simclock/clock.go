// Package simclock gives each simulated node an env.Clock driven by the
// scheduler's virtual time, and injects the clock faults of the simulator
// issue (§2): wall-clock skew between nodes, drift, and jumps in either
// direction.
//
// Monotonic time is virtual time plus a fixed per-node origin, so it never
// goes backwards and timers measure it exactly. Wall time is virtual time plus
// a per-node skew that faults change, so the core sees what real machines
// show: clocks that disagree and that NTP steps backwards.
//
// This package must not read the real clock, start goroutines, or draw from
// anything but the stream it is handed.
package simclock

import (
	"fmt"

	"strand/core/env"
	"strand/sim/sched"
)

// WallEpochMsDefault is the wall time, in Unix milliseconds, at virtual
// time zero: 2026-01-01T00:00:00Z. A fixed epoch keeps record timestamps,
// and so the trace, the same from run to run.
const WallEpochMsDefault = 1_767_225_600_000

// Options sets a clock's starting state.
type Options struct {
	// MonotonicOffsetNs is the monotonic reading at virtual time zero. Nodes
	// get different ones so that code comparing monotonic readings across
	// nodes shows up as wrong.
	MonotonicOffsetNs int64
	// WallEpochMs is the wall time at virtual time zero; zero means
	// WallEpochMsDefault.
	WallEpochMs int64
	// SkewMs is the node's initial wall-clock error, positive when ahead.
	SkewMs int64
	// DriftPpm makes the wall clock gain (positive) or lose DriftPpm
	// microseconds per second of virtual time.
	DriftPpm int64
}

// driftPpmMax bounds drift: real oscillators are within ±100 ppm, and NTP
// slews at most 500 ppm.
const driftPpmMax = 1000

// Clock is one node's env.Clock. Its timers are node events, so they wait
// while the node is paused and vanish when it crashes.
type Clock struct {
	node *sched.Node
	s    *sched.Scheduler

	monotonicOffsetNs int64
	wallEpochNs       int64
	skewNs            int64
	driftPpm          int64
}

var _ env.Clock = (*Clock)(nil)

// New returns the clock of node.
func New(s *sched.Scheduler, node *sched.Node, opts Options) *Clock {
	if opts.MonotonicOffsetNs < 0 {
		panic(fmt.Sprintf("simclock: MonotonicOffsetNs %d is negative", opts.MonotonicOffsetNs))
	}
	if opts.DriftPpm < -driftPpmMax || opts.DriftPpm > driftPpmMax {
		panic(fmt.Sprintf("simclock: DriftPpm %d outside ±%d", opts.DriftPpm, driftPpmMax))
	}
	epochMs := opts.WallEpochMs
	if epochMs == 0 {
		epochMs = WallEpochMsDefault
	}
	return &Clock{
		node:              node,
		s:                 s,
		monotonicOffsetNs: opts.MonotonicOffsetNs,
		wallEpochNs:       epochMs * 1e6,
		skewNs:            opts.SkewMs * 1e6,
		driftPpm:          opts.DriftPpm,
	}
}

// MonotonicNs returns virtual time plus the node's fixed origin.
func (c *Clock) MonotonicNs() int64 { return c.s.NowNs() + c.monotonicOffsetNs }

// WallMs returns the node's belief of the Unix time in milliseconds.
func (c *Clock) WallMs() int64 {
	nowNs := c.s.NowNs()
	driftNs := nowNs / 1e6 * c.driftPpm // µs per s is ns per ms
	return (c.wallEpochNs + nowNs + c.skewNs + driftNs) / 1e6
}

// SetTimer runs fire on the node once delayNs of virtual time has passed.
func (c *Clock) SetTimer(delayNs int64, fire func()) env.Timer {
	return c.node.After(delayNs, fire)
}

// SkewMs returns the node's current wall-clock error, drift excluded.
func (c *Clock) SkewMs() int64 { return c.skewNs / 1e6 }

// Jump steps the wall clock by deltaMs (negative steps it back), as an NTP
// step or an operator's date command does. Monotonic time is untouched.
func (c *Clock) Jump(deltaMs int64) {
	c.skewNs += deltaMs * 1e6
	c.s.Trace(sched.Record{Kind: "clock.jump", Node: c.node.TraceID(), A: deltaMs, B: c.skewNs / 1e6})
}
