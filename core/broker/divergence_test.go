package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/log"
	"strand/core/replica"
	"strand/sim/memdisk"
	"strand/sim/simnet"
)

func copyRegions(res log.ReadResult) ([]byte, error) { return log.CopyRegions(res.Regions) }

// isolate cuts node id off from every other node, both ways.
func (c *cluster) isolate(id int32) {
	c.net.Isolate(c.nodes[id].nn.Host())
	// The test client must still reach it.
	c.net.Unblock(c.client.Host(), c.nodes[id].nn.Host())
	c.net.Unblock(c.nodes[id].nn.Host(), c.client.Host())
}

// TestStaleLeaderTruncatesOnDivergingEpoch: a leader cut off from the
// cluster keeps appending acks=1 records in its old epoch; the controller
// elects another leader, which writes different records at the same
// offsets. Healed, the old leader becomes a follower, learns from the
// DivergingEpoch answer where its log diverged, truncates there (not to its
// HW) and ends up identical to the new leader (KIP-101, KIP-279).
func TestStaleLeaderTruncatesOnDivergingEpoch(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("committed")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.isolate(2)
	if r := c.produce(2, "r", 0, 1, recordBatch("lost1", "lost2")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=1 on the isolated leader: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica.Role() == replica.RoleLeader
	})
	if r := c.produce(leader, "r", 0, -1, recordBatch("new")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=all on new leader: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	c.net.Heal()
	old := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("old leader rejoins as follower and converges", 30000, func() bool {
		return old.replica.Role() == replica.RoleFollower && old.log.LogEndOffset() == 2
	})
	c.waitFor("old leader back in the ISR", 30000, func() bool {
		s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
		return len(s.ISR) == 3
	})
	if r := c.produce(leader, "r", 0, -1, recordBatch("later")); r.ErrorCode != 0 {
		t.Fatalf("acks=all after rejoin: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	want := "committed,new,later"
	if got := joined(values(t, c.fetch(leader, "r", 0, 0).RecordBatches)); got != want {
		t.Fatalf("leader log %q, want %q", got, want)
	}
	c.waitFor("replicas identical", 5000, func() bool {
		for _, id := range []int32{1, 2, 3} {
			if c.nodes[id].node.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset() != 3 {
				return false
			}
		}
		return true
	})
	for _, id := range []int32{1, 2, 3} {
		p := c.nodes[id].node.parts.partitions[partitionKey{"r", 0}]
		res, err := p.log.Read(0, 1<<20, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := copyRegions(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := joined(values(t, raw)); got != want {
			t.Errorf("node %d log %q, want %q", id, got, want)
		}
	}
}

// TestSingleNodeCleanRestartKeepsTopicsAndRecords shuts the only node down
// cleanly (controlled shutdown, Close writing the clean-shutdown marker),
// starts it again, and reads everything back: the metadata log replays the
// topic, the partition log recovers, and the controller, told by
// PreviousBrokerEpoch that nothing was lost, makes it leader again.
func TestSingleNodeCleanRestartKeepsTopicsAndRecords(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a", "b"))
	tn := c.nodes[1]
	c.shutdownCleanly(tn)
	tn.proc.Crash()
	tn.disk.Crash(c.streams.Get("disk"), memdisk.CrashLoseAll) // even a power loss now loses nothing
	tn.proc.Restart()
	c.start(tn)
	c.waitRegistered()
	c.waitFor("partition leads again", 5000, func() bool {
		p := tn.node.parts.partitions[partitionKey{"t", 0}]
		return p != nil && p.replica.Role() == replica.RoleLeader
	})
	c.conns = map[int32]*simnet.ClientConn{}
	if r := c.produce(1, "t", 0, -1, recordBatch("c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("produce after restart: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	if got := joined(values(t, c.fetch(1, "t", 0, 0).RecordBatches)); got != "a,b,c" {
		t.Fatalf("after restart: %q", got)
	}
}

// TestOffsetForLeaderEpoch asks the leader where each epoch ends, after a
// failover has started epoch 1.
func TestOffsetForLeaderEpoch(t *testing.T) {
	c := threeNodes(t)
	c.produce(2, "r", 0, -1, recordBatch("e0a", "e0b"))
	c.nodes[2].proc.Crash()
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica.LeaderEpoch() == 1
	})
	if r := c.produce(leader, "r", 0, -1, recordBatch("e1")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ask := func(replicaID, epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		req.ReplicaID = replicaID
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "r"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.request(leader, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	if r := ask(-1, 0, 1); r.ErrorCode != 0 || r.LeaderEpoch != 0 || r.EndOffset != 2 {
		t.Errorf("epoch 0: error %v epoch %d end %d, want 0 2", kerr.ErrorForCode(r.ErrorCode), r.LeaderEpoch, r.EndOffset)
	}
	if r := ask(-1, 1, 1); r.ErrorCode != 0 || r.LeaderEpoch != 1 || r.EndOffset != 3 {
		t.Errorf("epoch 1: error %v epoch %d end %d, want 1 3", kerr.ErrorForCode(r.ErrorCode), r.LeaderEpoch, r.EndOffset)
	}
	if r := ask(-1, 0, 0); r.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("stale current epoch: %v, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}
}
