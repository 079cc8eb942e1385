package cluster

import (
	"strings"
	"testing"
)

// TestQuietCheckCatchesAnUntoldLogStart: with session-log-start-untold the
// leaders' fetch sessions never name a partition for a new log start alone,
// so after the deleter's last round (nothing produced after it) followers
// keep older log starts, and the quiet check, which runs before the
// acks=all probe re-tells every follower, must report it; the same seed
// without the bug passes, its partitions settled. A change elsewhere that
// alters this seed's trace may need another seed: any seed of small with
// deletes catches it (most do).
func TestQuietCheckCatchesAnUntoldLogStart(t *testing.T) {
	t.Parallel()
	const seed = 3
	with := Run(Options{Seed: seed, Shape: "small", Bug: "session-log-start-untold", DiscardLogs: true})
	caught := false
	for _, v := range with.Violations {
		caught = caught || v.Check == "quiet-convergence"
	}
	if !caught {
		t.Errorf("seed %d small with session-log-start-untold: no quiet-convergence violation (got %v; stats %s)", seed, with.Violations, with.Stats)
	}
	without := Run(Options{Seed: seed, Shape: "small", DiscardLogs: true})
	if len(without.Violations) > 0 {
		t.Errorf("seed %d small without the bug: %v", seed, without.Violations)
	}
	if !strings.Contains(without.Stats, "quiet_settled=2/2") || !strings.Contains(without.Stats, "deletes=") {
		t.Errorf("seed %d small: want deletes and both partitions settled before the probe, stats %s", seed, without.Stats)
	}
}
