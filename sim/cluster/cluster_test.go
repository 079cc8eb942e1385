package cluster

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDeterminism: a seed run twice gives the same trace hash; different
// seeds give different ones.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	hashes := map[uint64]uint64{}
	for _, seed := range []uint64{1, 2, 3} {
		a := Run(Options{Seed: seed, Shape: "small"})
		b := Run(Options{Seed: seed, Shape: "small"})
		if a.TraceHash != b.TraceHash || a.Events != b.Events || a.SimNs != b.SimNs {
			t.Fatalf("seed %d twice: %s vs %s", seed, a.Summary, b.Summary)
		}
		if a.Events < 1000 {
			t.Fatalf("seed %d ran only %d events: %s", seed, a.Events, a.Summary)
		}
		if other, dup := hashes[a.TraceHash]; dup {
			t.Fatalf("seeds %d and %d share trace hash %016x", other, seed, a.TraceHash)
		}
		hashes[a.TraceHash] = seed
	}
}

// TestTraceWriterDoesNotChangeTheRun: VERBOSE output leaves the hash alone.
func TestTraceWriterDoesNotChangeTheRun(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	a := Run(Options{Seed: 7, Shape: "small"})
	b := Run(Options{Seed: 7, Shape: "small", TraceWriter: &sb})
	if a.TraceHash != b.TraceHash {
		t.Fatalf("trace hash %016x quiet, %016x verbose", a.TraceHash, b.TraceHash)
	}
	if !strings.Contains(sb.String(), "net.dial") {
		t.Fatal("the verbose trace has no net.dial record")
	}
}

// TestProducesTakeBothBranches: the network pre-checks a seeded share of
// the produces, as realnet pre-checks all of them, and leaves the rest to
// the nodes' loops, so that a sweep runs both of the broker's produce
// paths (SPEC.md §1, "Where work happens").
func TestProducesTakeBothBranches(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{42, 43} {
		res := Run(Options{Seed: seed})
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations)
		}
		if res.ProducesPrechecked == 0 || res.ProducesLoopChecked == 0 {
			t.Errorf("seed %d: %d produces pre-checked, %d checked on the loop; want some of each", seed, res.ProducesPrechecked, res.ProducesLoopChecked)
		}
		t.Logf("seed %d: %d produces pre-checked, %d checked on the loop", seed, res.ProducesPrechecked, res.ProducesLoopChecked)
	}
}

// sweepSeeds is how many seeds TestSweep runs (issue 3 §5: at least 500).
// STRAND_SIM_SWEEP overrides it.
func sweepSeeds() int {
	if v := os.Getenv("STRAND_SIM_SWEEP"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 500
}

// TestSweep runs at least 500 seeds across the mixed scenario shapes, both
// cores at once, and fails on any violation, listing each failing seed's
// reproduce command.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("the sweep takes a minute or two")
	}
	count := sweepSeeds()
	start := time.Now()
	results := make([]Result, count)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = Run(Options{Seed: uint64(1000 + i), Shape: "mixed"})
			}
		}()
	}
	for i := 0; i < count; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	var simNs int64
	var events uint64
	shapes := map[string]int{}
	failed := 0
	overBudget := 0
	for _, r := range results {
		simNs += r.SimNs
		events += r.Events
		shapes[r.Shape]++
		if len(r.OverBudget) > 0 {
			overBudget++
		}
		if len(r.Violations) > 0 {
			failed++
			t.Errorf("seed %d (%s): %s\n  reproduce: make sim SEED=%d SHAPE=%s", r.Seed, r.Shape,
				firstLines(r.Violations[0].String(), 3), r.Seed, r.Shape)
		}
	}
	wall := time.Since(start).Seconds()
	t.Logf("seeds=%d violations=%d over_budget=%d shapes=%v sim_s=%.0f wall_s=%.1f events_per_s=%.0f",
		count, failed, overBudget, shapes, float64(simNs)/1e9, wall, float64(events)/wall)
	if len(shapes) < 3 {
		t.Errorf("the sweep covered only shapes %v", shapes)
	}
}

// plantedSeedsMax bounds the seeds TestPlantedBugsCaught tries per bug.
const plantedSeedsMax = 200

// TestPlantedBugsCaught is `make sim-bugs` inside `make test`: every
// planted bug must be caught (a violation with the bug that the same seed
// lacks without it) within plantedSeedsMax seeds.
func TestPlantedBugsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("hunting the planted bugs takes a while")
	}
	for _, pb := range PlantedBugs {
		h := HuntBug(pb.Name, pb.Shape, plantedSeedsMax, runtime.GOMAXPROCS(0))
		if h.CaughtSeed == 0 {
			t.Errorf("bug %s not caught by %s in %d seeds of shape %s (%d seeds failed without it too, %d caught only by other checkers)",
				pb.Name, pb.Checker, h.SeedsRun, h.Shape, h.Masked, h.OtherSeeds)
			continue
		}
		t.Logf("bug %s caught by %s at seed %d (%d seeds needed, shape %s): %v", pb.Name, pb.Checker, h.CaughtSeed, h.SeedsRun, h.Shape,
			Checks(h.Caught.Violations))
	}
}
