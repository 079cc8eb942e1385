package quorum

import (
	"slices"
	"testing"
)

// measureFailover runs a calm cluster until a leader has committed, crashes
// the leader at a seeded moment and returns the simulated time until
// another node leads a higher epoch (-1 if none within 20 s).
func measureFailover(t testing.TB, seed uint64, voters int, resign bool) int64 {
	streams := newStreams(seed)
	c := newCluster(t, seed, voters, Bugs{}, simFaults{delayMsMax: 5, syncDelayMsMax: 5})
	c.startWorkload(streams.Get("quorum/workload"), 60_000*msNs)
	crashAtNs := (5_000 + streams.Get("quorum/failover").Int64N(2_000)) * msNs
	c.s.Run(crashAtNs)
	var old *simNode
	for _, n := range c.nodes {
		if n.raft.Role() == Leader {
			old = n
		}
	}
	if old == nil || c.violation != "" {
		t.Fatalf("seed %d: no leader before the crash (%s)", seed, c.violation)
	}
	oldEpoch := old.raft.Epoch()
	elapsedMs := int64(-1)
	c.onLeader = func(id, epoch int32, nowNs int64) {
		if elapsedMs < 0 && id != old.id && epoch > oldEpoch {
			elapsedMs = (nowNs - crashAtNs) / msNs
			c.s.Halt("new leader")
		}
	}
	if resign { // a controlled shutdown: hand over, then stop
		old.raft.Resign(c.nowMs())
		c.after(old)
		c.s.After(50*msNs, old.node.Crash)
	} else {
		old.node.Crash()
	}
	c.s.Run(crashAtNs + 20_000*msNs)
	if c.violation != "" && c.violation != "new leader" {
		t.Fatalf("seed %d: %s", seed, c.violation)
	}
	return elapsedMs
}

// TestFailoverSpeed measures controller failover with Kafka's default
// quorum timeouts (election 1000 ms, fetch 2000 ms) over a seed sweep; the
// goal is p99 ≤ election timeout + fetch timeout.
func TestFailoverSpeed(t *testing.T) {
	for _, voters := range []int{3, 5} {
		seeds := seedsFor(t, 200)
		var ms []int64
		for seed := range uint64(seeds) {
			d := measureFailover(t, seed, voters, false)
			if d < 0 {
				t.Fatalf("%d voters, seed %d: no new leader within 20 s of the leader's crash", voters, seed)
			}
			ms = append(ms, d)
		}
		slices.Sort(ms)
		p50, p99 := ms[len(ms)/2], ms[(len(ms)*99+99)/100-1]
		goalMs := int64(DefaultElectionTimeoutMs + DefaultFetchTimeoutMs)
		t.Logf("%d voters, %d seeds: failover p50 %d ms, p99 %d ms, max %d ms (goal p99 ≤ %d ms)", voters, seeds, p50, p99, ms[len(ms)-1], goalMs)
		if p99 > goalMs {
			t.Errorf("%d voters: failover p99 %d ms exceeds %d ms", voters, p99, goalMs)
		}
	}
}

// TestResignHandsOverQuickly: a leader that resigns (EndQuorumEpoch, as in
// a controlled shutdown) is replaced well within one election timeout.
func TestResignHandsOverQuickly(t *testing.T) {
	seeds := seedsFor(t, 100)
	var ms []int64
	for seed := range uint64(seeds) {
		d := measureFailover(t, seed, 3, true)
		if d < 0 {
			t.Fatalf("seed %d: no new leader after a resignation", seed)
		}
		ms = append(ms, d)
	}
	slices.Sort(ms)
	p50, p99 := ms[len(ms)/2], ms[(len(ms)*99+99)/100-1]
	t.Logf("3 voters, %d seeds: hand-over after resignation p50 %d ms, p99 %d ms", seeds, p50, p99)
	if p99 > DefaultElectionTimeoutMs {
		t.Errorf("hand-over p99 %d ms exceeds the election timeout", p99)
	}
}
