package quorum

import (
	"os"
	"strconv"
	"testing"
)

// seedsFor returns the sweep size, QUORUM_SEEDS overriding the default.
func seedsFor(t *testing.T, def int) int {
	if s := os.Getenv("QUORUM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("QUORUM_SEEDS=%q: %v", s, err)
		}
		return n
	}
	if testing.Short() {
		return def / 4
	}
	return def
}

// TestChaosSafetyAndLiveness: no checker fires on the correct Raft, with 3
// and 5 voters, under crashes, partitions, pauses, drops and delays; after
// healing a leader commits and every node catches up.
func TestChaosSafetyAndLiveness(t *testing.T) {
	seeds := seedsFor(t, 60)
	var stats chaosStats
	for seed := range uint64(seeds) {
		voters := 3 + 2*int(seed%2)
		if v := runChaos(t, seed, voters, Bugs{}, true, &stats); v != "" {
			t.Fatalf("seed %d (%d voters): %s\nreproduce: QUORUM_SEEDS=%d go test ./core/quorum -run 'TestChaosSafetyAndLiveness'", seed, voters, v, seed+1)
		}
	}
	t.Logf("%d seeds: %d leaders, %d restarts, %d snapshots taken, %d installed from a leader",
		seeds, stats.leaders, stats.restarts, stats.snapshotsTaken, stats.snapshotsInstalled)
	if stats.restarts == 0 || stats.snapshotsInstalled == 0 || stats.leaders <= seeds {
		t.Fatalf("the sweep did not exercise restarts, snapshot installs and re-elections: %+v", stats)
	}
}

// TestPlantedBugsAreCaught: each planted bug makes a checker fire within
// the sweep.
func TestPlantedBugsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name string
		bugs Bugs
	}{
		{"raft-vote-twice", Bugs{VoteTwice: true}},
		{"raft-commit-early", Bugs{CommitEarly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := seedsFor(t, 200)
			caught := 0
			first := ""
			for seed := range uint64(seeds) {
				if v := runChaos(t, seed, 3+2*int(seed%2), tc.bugs, false, nil); v != "" {
					caught++
					if first == "" {
						first = v
					}
				}
			}
			t.Logf("%s caught in %d of %d seeds; first: %s", tc.name, caught, seeds, first)
			if caught == 0 {
				t.Fatalf("%s was never caught in %d seeds", tc.name, seeds)
			}
		})
	}
}
