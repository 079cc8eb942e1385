package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/replica"
	"strand/sim/simnet"
)

// electLeaders sends ElectLeaders v2 for topic's partitions to node via.
func (c *cluster) electLeaders(via int32, electionType int8, topic string, partitions ...int32) *kmsg.ElectLeadersResponse {
	c.t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(2)
	req.ElectionType, req.TimeoutMillis = electionType, 30_000
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: topic, Partitions: partitions}}
	resp := c.request(via, req).(*kmsg.ElectLeadersResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(partitions) {
		c.t.Fatalf("ElectLeaders via %d: %+v, want one result per partition", via, resp)
	}
	return resp
}

// TestElectLeadersThroughABroker: node 3, a broker without the controller
// role, forwards ElectLeaders to the controller. The preferred leader of
// r-0 (node 2) crashes and leadership moves; a PREFERRED election is
// refused while it is down, and once it is back in the ISR the election
// makes it leader again, on the brokers too. Asked again, the answer is
// ELECTION_NOT_NEEDED; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION;
// UNCLEAN on a led partition is ELECTION_NOT_NEEDED.
func TestElectLeadersThroughABroker(t *testing.T) {
	c := threeNodes(t)
	s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
	if s.Replicas[0] != 2 {
		t.Fatalf("test premise: r-0's preferred replica is %d, want 2 (replicas %v)", s.Replicas[0], s.Replicas)
	}
	c.produce(2, "r", 0, -1, recordBatch("a"))
	tn := c.nodes[2]
	tn.proc.Crash()
	c.waitFor("a new leader for r-0", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	if code := c.electLeaders(3, 0, "r", 0).Topics[0].Partitions[0].ErrorCode; code != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election with node 2 down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}

	tn.proc.Restart()
	c.start(tn)
	c.waitFor("node 2 back in r-0's ISR", 30000, func() bool {
		s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
		return slices.Contains(s.ISR, 2)
	})
	before, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
	if before.Leader == 2 {
		t.Fatal("leadership moved back before the election was asked for")
	}
	if code := c.electLeaders(3, 0, "r", 0).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("preferred election: %v, want success", kerr.ErrorForCode(code))
	}
	// The answer follows the commit: the controller's image has it.
	after, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
	if after.Leader != 2 || after.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("after the election: leader %d epoch %d, want 2 in epoch %d", after.Leader, after.LeaderEpoch, before.LeaderEpoch+1)
	}
	c.waitFor("node 2 leads r-0", 5000, func() bool {
		p := tn.node.parts.partitions[partitionKey{"r", 0}]
		return p != nil && p.replica.Role() == replica.RoleLeader
	})
	c.conns = map[int32]*simnet.ClientConn{}
	if r := c.produce(2, "r", 0, -1, recordBatch("b")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("produce to the elected leader: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}

	resp := c.electLeaders(3, 0, "r", 0, 9)
	if got := resp.Topics[0].Partitions; got[0].ErrorCode != kerr.ElectionNotNeeded.Code || got[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("second preferred election of r-0 and r-9: %v, %v; want ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION",
			kerr.ErrorForCode(got[0].ErrorCode), kerr.ErrorForCode(got[1].ErrorCode))
	}
	if code := c.electLeaders(1, 1, "r", 0).Topics[0].Partitions[0].ErrorCode; code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("unclean election of a led partition: %v, want ELECTION_NOT_NEEDED", kerr.ErrorForCode(code))
	}
}
