package main

import (
	"runtime/debug"
	"testing"

	"strand/sim/cluster"
)

// TestResultsDoNotDependOnParallelismOrGC runs the same seeds one at a time
// with the sweep's collector setting and all at once under a busy
// collector: the results come back in seed order with the same trace
// hashes, so neither -parallel nor GOGC reaches a run.
func TestResultsDoNotDependOnParallelismOrGC(t *testing.T) {
	const first, count = 31, 3
	collect := func(parallel, gcPercent int) []cluster.Result {
		old := debug.SetGCPercent(gcPercent)
		defer debug.SetGCPercent(old)
		var out []cluster.Result
		runSeeds(first, count, "small", "", false, parallel, func(res cluster.Result) { out = append(out, res) })
		return out
	}
	serial := collect(1, cluster.SweepGCPercent)
	parallel := collect(count, 10)
	if len(serial) != count || len(parallel) != count {
		t.Fatalf("got %d and %d results, want %d each", len(serial), len(parallel), count)
	}
	for i := range serial {
		a, b := serial[i], parallel[i]
		if a.Seed != first+uint64(i) || b.Seed != a.Seed {
			t.Fatalf("result %d is seed %d and %d, want %d (seed order)", i, a.Seed, b.Seed, first+uint64(i))
		}
		if a.TraceHash != b.TraceHash || a.Events != b.Events || a.SimNs != b.SimNs {
			t.Fatalf("seed %d: %s alone, %s in parallel under GOGC=10", a.Seed, a.Summary, b.Summary)
		}
		if a.Events == 0 {
			t.Fatalf("seed %d ran no events: %s", a.Seed, a.Summary)
		}
	}
}
