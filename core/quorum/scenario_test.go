package quorum

import "testing"

// calmCluster is three voters on a calm network that have elected a leader,
// with proposals until workloadMs.
func calmCluster(t *testing.T, seed uint64, workloadMs int64) (*cluster, *simNode) {
	c := newCluster(t, seed, 3, Bugs{}, simFaults{delayMsMax: 5, syncDelayMsMax: 5})
	c.startWorkload(newStreams(seed).Get("quorum/workload"), workloadMs*msNs)
	c.s.Run(4_000 * msNs)
	for _, n := range c.nodes {
		if n.raft.Role() == Leader {
			return c, n
		}
	}
	t.Fatalf("seed %d: no leader after 4 s", seed)
	return nil, nil
}

func (c *cluster) block(a, b int32) {
	c.blocked[[2]int32{a, b}] = true
	c.blocked[[2]int32{b, a}] = true
}

// TestPreVoteKeepsAPartitionedFollowerFromDisrupting: a follower cut off
// from the leader alone (it still reaches the other voter) stands, but its
// pre-votes fail while the other voter hears from the leader, so no epoch
// is bumped; once healed it follows the same leader and catches up. The
// cluster is idle, so the cut-off log is as up to date as any: only the
// pre-vote's "heard from a leader" rule stops it.
func TestPreVoteKeepsAPartitionedFollowerFromDisrupting(t *testing.T) {
	for seed := range uint64(10) {
		c, leader := calmCluster(t, seed, 3_000)
		epoch := leader.raft.Epoch()
		var cut *simNode
		for _, n := range c.nodes {
			if n != leader {
				cut = n
			}
		}
		c.block(leader.id, cut.id)
		c.s.Run(12_000 * msNs)
		if c.violation != "" {
			t.Fatalf("seed %d: %s", seed, c.violation)
		}
		if leader.raft.Role() != Leader || leader.raft.Epoch() != epoch {
			t.Fatalf("seed %d: the cut-off follower disrupted the leader: now %v in epoch %d (was %d)", seed, leader.raft.Role(), leader.raft.Epoch(), epoch)
		}
		if cut.raft.Role() == Leader || cut.raft.Epoch() != epoch {
			t.Fatalf("seed %d: cut-off node is %v in epoch %d, leader's epoch %d", seed, cut.raft.Role(), cut.raft.Epoch(), epoch)
		}
		clear(c.blocked)
		c.s.Run(16_000 * msNs)
		if cut.raft.Role() != Follower || cut.raft.LeaderID() != leader.id || cut.raft.Epoch() != epoch {
			t.Fatalf("seed %d: after healing node %d is %v of %d in epoch %d", seed, cut.id, cut.raft.Role(), cut.raft.LeaderID(), cut.raft.Epoch())
		}
		if cut.raft.CommittedOffset() != leader.raft.CommittedOffset() {
			t.Fatalf("seed %d: after healing node %d committed %d, leader %d", seed, cut.id, cut.raft.CommittedOffset(), leader.raft.CommittedOffset())
		}
	}
}

// TestCheckQuorumDeposesAnIsolatedLeader: a leader cut off from every
// voter resigns within 1.5 × the fetch timeout, and the majority elects
// another; after healing the old leader follows the new one.
func TestCheckQuorumDeposesAnIsolatedLeader(t *testing.T) {
	for seed := range uint64(10) {
		c, leader := calmCluster(t, seed, 60_000)
		epoch := leader.raft.Epoch()
		for _, n := range c.nodes {
			if n != leader {
				c.block(leader.id, n.id)
			}
		}
		isolatedAtMs := c.nowMs()
		resignedAtMs := int64(-1)
		for c.nowMs() < isolatedAtMs+5_000 && resignedAtMs < 0 {
			c.s.Run(c.s.NowNs() + 10*msNs)
			if leader.raft.Role() != Leader {
				resignedAtMs = c.nowMs()
			}
		}
		if resignedAtMs < 0 || resignedAtMs-isolatedAtMs > DefaultFetchTimeoutMs*3/2+100 {
			t.Fatalf("seed %d: isolated leader still leads %d ms after isolation", seed, c.nowMs()-isolatedAtMs)
		}
		c.s.Run(c.s.NowNs() + 3_000*msNs)
		var next *simNode
		for _, n := range c.nodes {
			if n != leader && n.raft.Role() == Leader {
				next = n
			}
		}
		if next == nil || next.raft.Epoch() <= epoch {
			t.Fatalf("seed %d: the majority elected no new leader", seed)
		}
		clear(c.blocked)
		c.s.Run(c.s.NowNs() + 5_000*msNs)
		if c.violation != "" {
			t.Fatalf("seed %d: %s", seed, c.violation)
		}
		if leader.raft.Role() != Follower || leader.raft.LeaderID() != next.id {
			t.Fatalf("seed %d: old leader is %v of %d after healing, want a follower of %d", seed, leader.raft.Role(), leader.raft.LeaderID(), next.id)
		}
	}
}
