package controller

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPlacementIsBalanced: topics of any size added with one replication
// factor keep replica counts and preferred-leader counts per broker within
// one of each other; with mixed replication factors every assignment is
// still rf distinct usable brokers.
func TestPlacementIsBalanced(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 7).Draw(t, "brokers")
		usable := make([]int32, n)
		for i := range usable {
			usable[i] = int32(i * 3) // ids need not be dense
		}
		sameRF := rapid.Bool().Draw(t, "sameRF")
		rf := rapid.IntRange(1, n).Draw(t, "rf")
		replicaCounts, leaderCounts := map[int32]int{}, map[int32]int{}
		cursor := 0
		for range rapid.IntRange(1, 6).Draw(t, "topics") {
			if !sameRF {
				rf = rapid.IntRange(1, n).Draw(t, "rf")
			}
			count := rapid.IntRange(1, 20).Draw(t, "partitions")
			for _, replicas := range placeReplicas(usable, cursor, count, rf) {
				sorted := slices.Clone(replicas)
				slices.Sort(sorted)
				if len(replicas) != rf || len(slices.Compact(sorted)) != rf {
					t.Fatalf("assignment %v for rf %d: want %d distinct brokers", replicas, rf, rf)
				}
				for i, id := range replicas {
					if !slices.Contains(usable, id) {
						t.Fatalf("assignment %v holds unusable broker %d", replicas, id)
					}
					replicaCounts[id]++
					if i == 0 {
						leaderCounts[id]++
					}
				}
			}
			cursor += count
			if sameRF {
				checkSpread(t, "replica", usable, replicaCounts)
				checkSpread(t, "leader", usable, leaderCounts)
			}
		}
	})
}

func checkSpread(t *rapid.T, what string, ids []int32, counts map[int32]int) {
	var all []int
	for _, id := range ids {
		all = append(all, counts[id])
	}
	if slices.Max(all)-slices.Min(all) > 1 {
		t.Fatalf("%s counts %v differ by more than one", what, all)
	}
}
