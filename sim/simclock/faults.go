package simclock

import (
	"fmt"
	"math/rand/v2"

	"strand/sim/sched"
)

// Faults are one run's clock-fault settings, drawn from the seed.
type Faults struct {
	// SkewMsMax bounds each node's initial wall-clock error, either way.
	SkewMsMax int64
	// DriftPpmMax bounds each node's drift, either way.
	DriftPpmMax int64
	// JumpPerMille is the chance, every JumpCheckNs, that one node's wall
	// clock jumps.
	JumpPerMille sched.PerMille
	// JumpMsMax bounds a jump's size, either way.
	JumpMsMax int64
	// JumpCheckNs is how often a jump is considered.
	JumpCheckNs int64
}

// String prints the settings for the run's header line.
func (f Faults) String() string {
	return fmt.Sprintf("clock{skew_ms_max=%d drift_ppm_max=%d jump=%d‰/%dms jump_ms_max=%d}",
		f.SkewMsMax, f.DriftPpmMax, f.JumpPerMille, f.JumpCheckNs/1e6, f.JumpMsMax)
}

// DrawFaults draws a run's clock faults, swarm style: each class is off in
// some runs.
func DrawFaults(r *rand.Rand) Faults {
	f := Faults{JumpCheckNs: 100e6}
	if sched.Chance(r, 700) {
		f.SkewMsMax = sched.Int64Between(r, 1, 30_000)
	}
	if sched.Chance(r, 500) {
		f.DriftPpmMax = sched.Int64Between(r, 1, driftPpmMax)
	}
	f.JumpPerMille = sched.SwarmPerMille(r, 400, 100)
	if f.JumpPerMille > 0 {
		f.JumpMsMax = sched.Int64Between(r, 1, 60_000)
	}
	return f
}

// Chaos applies Faults to a set of clocks: initial skew and drift are set
// when it starts, and jumps keep coming until Heal.
type Chaos struct {
	s      *sched.Scheduler
	r      *rand.Rand
	clocks []*Clock
	faults Faults
	tick   sched.Handle
}

// StartChaos skews and drifts every clock, then schedules jumps. The
// options each clock was built with are overridden.
func StartChaos(s *sched.Scheduler, r *rand.Rand, clocks []*Clock, f Faults) *Chaos {
	if f.JumpPerMille > 0 && f.JumpCheckNs <= 0 {
		panic(fmt.Sprintf("simclock: jumps at %d‰ need a positive JumpCheckNs, got %d", f.JumpPerMille, f.JumpCheckNs))
	}
	c := &Chaos{s: s, r: r, clocks: clocks, faults: f}
	for _, clock := range clocks {
		if f.SkewMsMax > 0 {
			clock.skewNs = sched.Int64Between(r, -f.SkewMsMax, f.SkewMsMax) * 1e6
		}
		if f.DriftPpmMax > 0 {
			clock.driftPpm = sched.Int64Between(r, -f.DriftPpmMax, f.DriftPpmMax)
		}
		s.Trace(sched.Record{Kind: "clock.skew", Node: clock.node.TraceID(), A: clock.skewNs / 1e6, B: clock.driftPpm})
	}
	if f.JumpPerMille > 0 && len(clocks) > 0 {
		c.tick = s.After(f.JumpCheckNs, c.maybeJump)
	}
	return c
}

func (c *Chaos) maybeJump() {
	if sched.Chance(c.r, c.faults.JumpPerMille) {
		clock := c.clocks[c.r.IntN(len(c.clocks))]
		clock.Jump(sched.Int64Between(c.r, -c.faults.JumpMsMax, c.faults.JumpMsMax))
	}
	c.tick = c.s.After(c.faults.JumpCheckNs, c.maybeJump)
}

// Heal stops further jumps. Skew and drift stay: they are the machines'
// nature, not a fault the liveness phase must remove, and the core must
// converge despite them.
func (c *Chaos) Heal() { c.tick.Cancel() }
