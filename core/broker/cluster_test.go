package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControllerOnlyNode: node 1 is a controller only; brokers 2..4
// register with it over the network, forward admin requests to it, follow
// its metadata log, and replicate among themselves. Metadata names a broker
// as the controller clients should send admin requests to.
func TestControllerOnlyNode(t *testing.T) {
	c := newClusterRoles(t, 4, "controller", map[string]string{"min.insync.replicas": "2"})
	c.waitRegistered()
	c.createTopic(3, "c", 3, 3)
	for p := range int32(3) {
		leader := c.leaderOf("c", p)
		if leader < 2 {
			t.Fatalf("partition %d led by %d, which is not a broker", p, leader)
		}
		if r := c.produce(leader, "c", p, -1, recordBatch("v")); r.ErrorCode != 0 {
			t.Fatalf("partition %d: acks=all: %v", p, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	md := c.request(2, req).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 3 || md.ControllerID != 2 {
		t.Fatalf("metadata: %d brokers, controller %d; want 3 brokers and controller 2", len(md.Brokers), md.ControllerID)
	}
	// The controller node serves no client data.
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	for _, k := range c.request(1, api).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 0 {
			t.Fatal("controller-only node advertises Produce")
		}
	}
}

func TestDeleteTopicThenRecreateStartsEmpty(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitRegistered()
	c.createTopic(2, "d", 1, 3)
	leader := c.leaderOf("d", 0)
	c.produce(leader, "d", 0, -1, recordBatch("old"))

	c.deleteTopic(3, "d")
	c.waitFor("replicas retired", 5000, func() bool {
		for _, tn := range c.nodes {
			if tn.node.parts.partitions[partitionKey{"d", 0}] != nil {
				return false
			}
		}
		return true
	})
	if r := c.produce(leader, "d", 0, 1, recordBatch("x")); r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a deleted topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.createTopic(2, "d", 1, 3)
	leader = c.leaderOf("d", 0)
	c.waitFor("recreated topic led", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"d", 0}]
		return p != nil && p.replica.HighWatermark() == 0 && p.log.LogEndOffset() == 0
	})
	if r := c.produce(leader, "d", 0, -1, recordBatch("new")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce to recreated topic: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
}

// TestFollowerRestartCatchesUp restarts a follower (a process crash) while
// the leader keeps taking acks=all writes; it re-registers, catches up from
// its recovered log and rejoins the ISR.
func TestFollowerRestartCatchesUp(t *testing.T) {
	c := threeNodes(t)
	c.produce(2, "r", 0, -1, recordBatch("one"))
	tn := c.nodes[3]
	tn.proc.Crash()
	c.waitFor("follower fenced out of the ISR", 20000, func() bool {
		s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
		return len(s.ISR) == 2
	})
	c.waitFor("leader learns the ISR", 5000, func() bool {
		return len(c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].replica.State().ISR) == 2
	})
	// core/replica counts a replica caught up within replica.lag.time.max.ms
	// as holding the HW even outside the ISR, and cannot tell that it is
	// fenced (Kafka's isReplicaIsrEligible): wait that out.
	c.run(30000)
	for _, v := range []string{"two", "three"} {
		if r := c.produce(2, "r", 0, -1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("acks=all with node 3 down: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	tn.proc.Restart()
	c.start(tn)
	c.waitFor("follower back in the ISR", 30000, func() bool {
		s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
		return len(s.ISR) == 3
	})
	p := tn.node.parts.partitions[partitionKey{"r", 0}]
	if p.log.LogEndOffset() < 3 {
		t.Fatalf("restarted follower LEO %d, want >= 3", p.log.LogEndOffset())
	}
	res, err := p.log.Read(0, 1<<20, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := copyRegions(res)
	if err != nil {
		t.Fatal(err)
	}
	if got := joined(values(t, raw)); got != "one,two,three" {
		t.Fatalf("restarted follower holds %q", got)
	}
}

// TestControlledShutdownMovesLeadership: a broker shutting down keeps
// serving until the controller has moved its leaderships, then is told to
// stop; acknowledged records stay readable on the new leader.
func TestControlledShutdownMovesLeadership(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	stopped := false
	c.nodes[2].node.BeginShutdown(func() { stopped = true })
	c.waitFor("shutdown allowed", 10000, func() bool { return stopped })
	leader := c.leaderOf("r", 0)
	if leader == 2 || leader < 0 {
		t.Fatalf("after controlled shutdown the leader is %d", leader)
	}
	closed := false
	c.nodes[2].node.Close(func(err error) {
		if err != nil {
			t.Error(err)
		}
		closed = true
	})
	c.waitFor("closed", 1000, func() bool { return closed })
	c.nodes[2].proc.Crash() // the process exits
	c.waitFor("new leader serves", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica
		return p.LeaderEpoch() >= 1 && p.HighWatermark() >= 1
	})
	if got := joined(values(t, c.fetch(leader, "r", 0, 0).RecordBatches)); got != "kept" {
		t.Fatalf("new leader serves %q", got)
	}
}
