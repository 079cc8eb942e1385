package cluster

import (
	"strconv"
	"strings"
	"testing"
)

// statsCount reads key=N from a run's Stats line, -1 if absent.
func statsCount(stats, key string) int {
	for _, field := range strings.Fields(stats) {
		if v, ok := strings.CutPrefix(field, key+"="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// TestGroupsShapeExercisesEveryClient guards the groups shape against
// passing by doing nothing: across a few seeds the members must be given
// assignments, have commits accepted and read offsets back, the admin
// client must churn topics, and producers must write to the churn topic.
func TestGroupsShapeExercisesEveryClient(t *testing.T) {
	t.Parallel()
	totals := map[string]int{}
	keys := []string{"assignments", "accepted", "offset_fetches", "admin_ops", "churn_produces", "acked_all"}
	for _, seed := range []uint64{1, 2, 3} {
		res := Run(Options{Seed: seed, Shape: "groups"})
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations[0])
		}
		for _, k := range keys {
			n := statsCount(res.Stats, k)
			if n < 0 {
				t.Fatalf("seed %d: no %s in stats %q", seed, k, res.Stats)
			}
			totals[k] += n
		}
	}
	for _, k := range keys {
		if totals[k] == 0 {
			t.Errorf("3 groups seeds: %s=0 (stats totals %v)", k, totals)
		}
	}
	t.Logf("totals over 3 seeds: %v", totals)
	// Rebalances: more assignments than one per member.
	if totals["assignments"] <= 3*12 {
		t.Errorf("3 seeds of 12 members gave only %d assignments: members do not rebalance", totals["assignments"])
	}
}
