package cluster

import "testing"

// TestConsumersReadFromFollowers guards the workload's follower fetches
// (KIP-392) against passing by doing nothing: in a few standard seeds,
// fetches sent to followers must come back with records, some must be
// retried on the leader after OFFSET_OUT_OF_RANGE, and the checkers must
// find nothing wrong with what they read. Seeds run until one retries
// (a few in 10 do), at least three of them.
func TestConsumersReadFromFollowers(t *testing.T) {
	retried := 0
	const seedsMax = 10
	for seed := uint64(1); seed <= seedsMax && (seed <= 3 || retried == 0); seed++ {
		res := Run(Options{Seed: seed, Shape: "standard", DiscardLogs: true})
		for _, v := range res.Violations {
			t.Errorf("seed %d: %s", seed, v)
		}
		sent, read := statsCount(res.Stats, "follower_fetches"), statsCount(res.Stats, "follower_reads")
		if sent <= 0 || read <= 0 || read > sent {
			t.Errorf("seed %d: %d follower fetches sent, %d returned records (stats %q)", seed, sent, read, res.Stats)
		}
		retried += max(0, statsCount(res.Stats, "follower_oor_retries"))
	}
	if retried == 0 {
		t.Errorf("no follower fetch was retried on the leader after OFFSET_OUT_OF_RANGE in seeds 1-%d", seedsMax)
	}
}
