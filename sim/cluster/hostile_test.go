package cluster

import "testing"

// TestHostileClientsLeaveHonestClientsTheirProgress runs the hostile shape
// (small's cluster, clients and faults, plus hostile clients holding
// stalled requests and idle connections on every broker) against small on
// the same seeds, whose faults and honest workload are the same: each
// hostile seed must pass every checker, liveness included, its attack must
// have met the limits (refusals and read deadlines), and the honest
// producers must have about the acknowledgements they get without it.
func TestHostileClientsLeaveHonestClientsTheirProgress(t *testing.T) {
	t.Parallel()
	honest, attacked := 0, 0
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		res := Run(Options{Seed: seed, Shape: "hostile"})
		if len(res.Violations) > 0 {
			t.Fatalf("hostile seed %d: %v", seed, res.Violations[0])
		}
		for _, k := range []string{"refused", "read_timeouts", "idle_timeouts"} {
			if statsCount(res.Stats, k) <= 0 {
				t.Errorf("hostile seed %d: %s=%d (stats %q)", seed, k, statsCount(res.Stats, k), res.Stats)
			}
		}
		base := Run(Options{Seed: seed, Shape: "small"})
		attacked += statsCount(res.Stats, "acked_all")
		honest += statsCount(base.Stats, "acked_all")
	}
	t.Logf("acks=all acknowledgements over 6 seeds: %d under attack, %d without", attacked, honest)
	if attacked*10 < honest*6 {
		t.Errorf("under attack the honest producers got %d acks=all acknowledgements, against %d without: starved", attacked, honest)
	}
}
