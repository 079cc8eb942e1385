package main

// The sim section (simulator issue §7, CLARIFICATIONS.md "Simulator
// speed"): how fast the deterministic simulator runs the standard scenario
// (3 brokers, 3 topics × 3 partitions, RF 3, 10 producers at 1,000
// records/s in total, swarm faults, 30 simulated seconds and the liveness
// phase per seed), every checker included, as `make sim SHAPE=standard`
// runs it.
//
//   - one core: simSeedsOneCore seeds, one after the other, with GOMAXPROCS
//     1 (the collector shares the core). Goal: at least simPerCoreSecondMin
//     simulated seconds per second of that core.
//   - the sweep: simSeedsSweep seeds, one per goroutine, GOMAXPROCS at a
//     time (both cores), projected to 1,000 seeds. Goal: at most
//     simSweepMaxS seconds on those cores.
//
// The goals are judged on the process's CPU time (user and system, every
// thread), unlike the other sections' wall-time goals: seeds share nothing,
// so a seed's CPU time is exactly what it takes of a core, and a sweep of
// independent seeds on n idle cores takes its CPU time over n. The machine
// is shared, and the wall figures printed beside them also measure the
// neighbours (the load average is printed with them).

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	simcluster "strand/sim/cluster"
)

const (
	simShape            = "standard"
	simSeedsOneCore     = 20
	simSeedsSweep       = 100
	simSweepSeeds       = 1000 // the sweep the goal is stated for
	simPerCoreSecondMin = 100.0
	simSweepMaxS        = 300.0
	// simFirstSeed, simSweepFirstSeed: fixed seeds, so that two benchmark
	// runs of one commit simulate the same runs.
	simFirstSeed      = 1
	simSweepFirstSeed = 1001
)

// simTally sums a set of runs.
type simTally struct {
	seeds, violations int
	simNs             int64
	events            uint64
	wall, cpu         time.Duration
}

func (t *simTally) add(res simcluster.Result) {
	t.seeds++
	t.simNs += res.SimNs
	t.events += res.Events
	if len(res.Violations) > 0 {
		t.violations++
	}
}

func (t simTally) simPerWall() float64 { return float64(t.simNs) / 1e9 / max(t.wall.Seconds(), 1e-9) }
func (t simTally) simPerCPU() float64  { return float64(t.simNs) / 1e9 / max(t.cpu.Seconds(), 1e-9) }

func (t simTally) String() string {
	return fmt.Sprintf("%d seeds, %.0f simulated s, %d events in %.2f s wall (cpu %.2f s): %.1f sim s per wall s (%.1f per cpu s), %.0f events/s (%.0f per cpu s)",
		t.seeds, float64(t.simNs)/1e9, t.events, t.wall.Seconds(), t.cpu.Seconds(),
		t.simPerWall(), t.simPerCPU(), float64(t.events)/max(t.wall.Seconds(), 1e-9), float64(t.events)/max(t.cpu.Seconds(), 1e-9))
}

func runSimSection(_ *benchEnv) (bool, error) {
	oldGC := debug.SetGCPercent(simcluster.SweepGCPercent)
	defer debug.SetGCPercent(oldGC)

	oldProcs := runtime.GOMAXPROCS(1)
	one := simRun(simFirstSeed, simSeedsOneCore, 1)
	runtime.GOMAXPROCS(oldProcs)
	fmt.Printf("  one core (GOMAXPROCS 1): %s\n", one)

	parallel := runtime.GOMAXPROCS(0)
	sweep := simRun(simSweepFirstSeed, simSeedsSweep, parallel)
	fmt.Printf("  sweep (%d at a time): %s\n", parallel, sweep)
	if n := one.violations + sweep.violations; n > 0 {
		fmt.Printf("  note: %d seeds failed their checks (speed counted anyway; `make sim SHAPE=standard SEED=…` shows them)\n", n)
	}

	perSeed := float64(one.simNs) / 1e9 / float64(one.seeds)
	projectedCPUS := sweep.cpu.Seconds() / float64(sweep.seeds) * simSweepSeeds / float64(parallel)
	projectedWallS := sweep.wall.Seconds() / float64(sweep.seeds) * simSweepSeeds
	oneMet := one.simPerCPU() >= simPerCoreSecondMin
	sweepMet := projectedCPUS <= simSweepMaxS
	printLoad("now")
	fmt.Printf("  %-34s %7.1f × real time (goal ≥ %.0f×; by wall time here: %.1f×; %.1f simulated s per seed)  %s\n",
		"one seed on one core:", one.simPerCPU(), simPerCoreSecondMin, one.simPerWall(), perSeed, passFail(oneMet))
	fmt.Printf("  %-34s %7.0f s on %d cores (goal ≤ %.0f s; by wall time here: %.0f s)  %s\n",
		fmt.Sprintf("%d-seed sweep, projected:", simSweepSeeds), projectedCPUS, parallel, simSweepMaxS, projectedWallS,
		passFail(sweepMet))
	return oneMet && sweepMet, nil
}

// simRun runs count standard seeds from first, parallel at a time, and
// times them.
func simRun(first uint64, count, parallel int) simTally {
	var t simTally
	start, cpuStart := time.Now(), processCPU()
	results := make(chan simcluster.Result)
	next := make(chan uint64)
	for range parallel {
		go func() {
			for seed := range next {
				results <- simcluster.Run(simcluster.Options{Seed: seed, Shape: simShape})
			}
		}()
	}
	go func() {
		for i := range count {
			next <- first + uint64(i)
		}
		close(next)
	}()
	for range count {
		t.add(<-results)
	}
	t.wall, t.cpu = time.Since(start), processCPU()-cpuStart
	return t
}
