package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/replica"
)

// TestReviewFollowerLearnsLogStartAfterDivergingFullFetch: a stale leader
// (cut off, it wrote acks=1 records the cluster never saw) rejoins as a
// follower. Its first fetch of the new leader is answered DivergingEpoch,
// with the leader's log start offset, which DeleteRecords moved while the
// old leader was away. The follower truncates (ActionTruncate) and does not
// apply that answer's log start, but the leader's fetch session counts it
// as told and, with nothing produced, would not name the partition again:
// the follower must still learn it (56dc28a: the next fetch is full), or it
// keeps records DeleteRecords deleted and holds the DeleteRecords low
// watermark back (a DeleteRecords to the same offset again timed out).
func TestReviewFollowerLearnsLogStartAfterDivergingFullFetch(t *testing.T) {
	c := threeNodes(t)
	for _, v := range []string{"a", "b"} {
		if r := c.produce(2, "r", 0, -1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	c.isolate(2)
	if r := c.produce(2, "r", 0, 1, recordBatch("lost")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=1 on the isolated leader: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica.Role() == replica.RoleLeader
	})
	// Node 2 is fenced now: it does not hold the low watermark back.
	if r := c.deleteRecords(leader, "r", 1, 15000); r.ErrorCode != 0 || r.LowWatermark != 1 {
		t.Fatalf("DeleteRecords to 1 on the new leader: error %v low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	c.net.Heal()
	old := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("old leader rejoins as follower and truncates", 30000, func() bool {
		return old.replica.Role() == replica.RoleFollower && old.log.LogEndOffset() == 2
	})
	c.run(5000) // many idle fetches
	if got := old.log.LogStartOffset(); got != 1 {
		t.Errorf("the rejoined follower's log start is %d after 5 s of fetching; the leader's is 1 (DeleteRecords)", got)
	}
	if r := c.deleteRecords(leader, "r", 1, 3000); r.ErrorCode != 0 || r.LowWatermark != 1 {
		t.Errorf("DeleteRecords to 1 again: error %v low watermark %d; want done, 1", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}
