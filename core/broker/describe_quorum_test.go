package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/controller"
	"strand/core/env"
)

// describeQuorumReq asks for __cluster_metadata-0 in version v.
func describeQuorumReq(v int16, partition int32) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(v)
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = controller.MetadataTopic
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	p.Partition = partition
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{p}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	return req
}

// describeQuorum sends DescribeQuorum v to node's listener as f and returns
// its one partition, failing on a transport or top-level error.
func (f *forger) describeQuorum(node int32, listener string, v int16) (*kmsg.DescribeQuorumResponse, kmsg.DescribeQuorumResponseTopicPartition) {
	f.c.t.Helper()
	resp, err := f.send(node, listener, describeQuorumReq(v, 0))
	if err != nil {
		f.c.t.Fatalf("DescribeQuorum v%d on node %d's %s listener: %v", v, node, listener, err)
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Topic != controller.MetadataTopic || len(r.Topics[0].Partitions) != 1 {
		f.c.t.Fatalf("DescribeQuorum v%d on node %d's %s listener: %v, topics %+v", v, node, listener, kerr.ErrorForCode(r.ErrorCode), r.Topics)
	}
	return r, r.Topics[0].Partitions[0]
}

// replicaByID is the replica state of id, failing if absent.
func replicaByID(t *testing.T, states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, id int32) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	t.Helper()
	for _, s := range states {
		if s.ReplicaID == id {
			return s
		}
	}
	t.Fatalf("replica %d not described in %+v", id, states)
	return kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
}

func replicaIDs(states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var ids []int32
	for _, s := range states {
		ids = append(ids, s.ReplicaID)
	}
	return ids
}

// TestDescribeQuorumDescribesVotersAndObservers: three controller-only
// voters and a broker. The leader's controller listener answers with its
// id, epoch and high watermark, every voter's log end offset and recent
// fetch and caught-up timestamps (its own: its log end, now), the broker as
// an observer, and v2's voter listeners; another voter answers
// NOT_LEADER_OR_FOLLOWER naming the leader; the broker's listener forwards
// to the leader. Once a voter stops, its last fetch timestamp stays at the
// time it stopped while the other voter's moves on, and its log end offset
// falls behind as the log grows.
func TestDescribeQuorumDescribesVotersAndObservers(t *testing.T) {
	c := newVoterClusterOf(t, 1, 1)
	leader := c.waitVoterClusterReady()
	c.createTopic(4, "t", 1, 1)
	c.run(1000)
	f := c.newForger(env.AnonymousPrincipal)
	raft := c.nodes[leader].node.QuorumRaft()
	resp, p := f.describeQuorum(leader, "CONTROLLER", 2)
	nowWall := c.nodes[leader].clock.WallMs()
	if p.ErrorCode != 0 || p.LeaderID != leader || p.LeaderEpoch != raft.Epoch() || p.HighWatermark != raft.CommittedOffset() {
		t.Fatalf("leader %d: %v leader %d epoch %d hw %d; want leader %d epoch %d hw %d", leader, kerr.ErrorForCode(p.ErrorCode),
			p.LeaderID, p.LeaderEpoch, p.HighWatermark, leader, raft.Epoch(), raft.CommittedOffset())
	}
	if ids := replicaIDs(p.CurrentVoters); !slices.Equal(ids, []int32{1, 2, 3}) {
		t.Errorf("voters %v, want [1 2 3]", ids)
	}
	for _, v := range p.CurrentVoters {
		if v.LogEndOffset != raft.EndOffset() {
			t.Errorf("voter %d: log end offset %d, want the leader's %d (an idle quorum is caught up)", v.ReplicaID, v.LogEndOffset, raft.EndOffset())
		}
		if v.LastFetchTimestamp > nowWall || v.LastFetchTimestamp < nowWall-1000 || v.LastCaughtUpTimestamp > v.LastFetchTimestamp ||
			v.LastCaughtUpTimestamp < nowWall-1000 {
			t.Errorf("voter %d: last fetch %d, last caught up %d; want both within the last second of %d", v.ReplicaID,
				v.LastFetchTimestamp, v.LastCaughtUpTimestamp, nowWall)
		}
	}
	// The leader's own: the time it answered, one network hop before now.
	if self := replicaByID(t, p.CurrentVoters, leader); self.LastFetchTimestamp != self.LastCaughtUpTimestamp ||
		self.LastFetchTimestamp > nowWall || self.LastFetchTimestamp < nowWall-100 {
		t.Errorf("the leader's own timestamps %d, %d; want the time it answered, just before %d", self.LastFetchTimestamp,
			self.LastCaughtUpTimestamp, nowWall)
	}
	if ids := replicaIDs(p.Observers); !slices.Equal(ids, []int32{4}) {
		t.Fatalf("observers %v, want the broker [4]", ids)
	}
	if o := p.Observers[0]; o.LogEndOffset <= 0 || o.LogEndOffset > p.HighWatermark || o.LastFetchTimestamp < nowWall-1000 {
		t.Errorf("observer 4: log end offset %d (high watermark %d), last fetch %d (now %d)", o.LogEndOffset, p.HighWatermark,
			o.LastFetchTimestamp, nowWall)
	}
	if len(resp.Nodes) != 3 {
		t.Fatalf("v2 nodes %+v, want the three voters", resp.Nodes)
	}
	for i, n := range resp.Nodes {
		if l := n.Listeners; n.NodeID != int32(i+1) || len(l) != 1 || l[0].Name != "CONTROLLER" || l[0].Host != "127.0.0.1" ||
			l[0].Port != uint16(9001+2*(i+1)) {
			t.Errorf("node %d: %+v, want voter %d's CONTROLLER listener at 127.0.0.1:%d", i, n, i+1, 9001+2*(i+1))
		}
	}

	// v0 has no Nodes and no directory ids, the same replicas.
	if r0, p0 := f.describeQuorum(leader, "CONTROLLER", 0); len(r0.Nodes) != 0 || len(p0.CurrentVoters) != 3 || len(p0.Observers) != 1 {
		t.Errorf("v0: nodes %+v, voters %v, observers %v", r0.Nodes, replicaIDs(p0.CurrentVoters), replicaIDs(p0.Observers))
	}
	follower := int32(1)
	if follower == leader {
		follower = 2
	}
	if _, fp := f.describeQuorum(follower, "CONTROLLER", 2); fp.ErrorCode != kerr.NotLeaderForPartition.Code || fp.LeaderID != leader {
		t.Errorf("voter %d (not the leader): %v naming leader %d; want NOT_LEADER_OR_FOLLOWER naming %d", follower,
			kerr.ErrorForCode(fp.ErrorCode), fp.LeaderID, leader)
	}
	if _, bp := f.describeQuorum(4, "PLAINTEXT", 2); bp.ErrorCode != 0 || bp.LeaderID != leader || len(bp.CurrentVoters) != 3 {
		t.Errorf("through broker 4: %v leader %d voters %v; want the leader's answer", kerr.ErrorForCode(bp.ErrorCode), bp.LeaderID,
			replicaIDs(bp.CurrentVoters))
	}
	bad, err := f.send(leader, "CONTROLLER", describeQuorumReq(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	if bt := bad.(*kmsg.DescribeQuorumResponse).Topics; len(bt) != 1 || len(bt[0].Partitions) != 1 ||
		bt[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("__cluster_metadata-1: %+v, want UNKNOWN_TOPIC_OR_PARTITION", bt)
	}

	// A voter stops: its last fetch stays when it stopped, its log end
	// offset falls behind, while the other voter keeps up.
	stopped, running := follower, 6-leader-follower
	c.nodes[stopped].proc.Crash()
	stoppedWall := c.nodes[leader].clock.WallMs()
	c.run(3000)
	c.createTopic(4, "u", 1, 1)
	c.run(1000)
	_, p = f.describeQuorum(leader, "CONTROLLER", 2)
	nowWall = c.nodes[leader].clock.WallMs()
	s, r := replicaByID(t, p.CurrentVoters, stopped), replicaByID(t, p.CurrentVoters, running)
	if s.LastFetchTimestamp > stoppedWall || s.LastFetchTimestamp < stoppedWall-1000 || s.LastCaughtUpTimestamp > stoppedWall {
		t.Errorf("stopped voter %d: last fetch %d, caught up %d; want both at or before it stopped, %d", stopped,
			s.LastFetchTimestamp, s.LastCaughtUpTimestamp, stoppedWall)
	}
	if s.LogEndOffset >= raft.EndOffset() {
		t.Errorf("stopped voter %d: log end offset %d, want behind the leader's %d", stopped, s.LogEndOffset, raft.EndOffset())
	}
	if r.LastFetchTimestamp < nowWall-1000 || r.LogEndOffset != raft.EndOffset() || r.LastCaughtUpTimestamp < nowWall-1000 {
		t.Errorf("running voter %d: last fetch %d, caught up %d, log end offset %d; want recent and the leader's %d (now %d)", running,
			r.LastFetchTimestamp, r.LastCaughtUpTimestamp, r.LogEndOffset, raft.EndOffset(), nowWall)
	}
	if p.HighWatermark != raft.CommittedOffset() || p.HighWatermark <= s.LogEndOffset {
		t.Errorf("high watermark %d (the leader's %d), want past the stopped voter's %d", p.HighWatermark, raft.CommittedOffset(), s.LogEndOffset)
	}
}

// TestDescribeQuorumForgetsObserversAfterTheirSession: a broker that stops
// fetching stays an observer, with its old last fetch, until Kafka's
// 5-minute observer session has passed, then drops out.
func TestDescribeQuorumForgetsObserversAfterTheirSession(t *testing.T) {
	c := newVoterClusterOf(t, 1, 1)
	leader := c.waitVoterClusterReady()
	c.run(1000)
	f := c.newForger(env.AnonymousPrincipal)
	c.nodes[4].proc.Crash()
	stoppedWall := c.nodes[leader].clock.WallMs()
	c.run(controller.ObserverSessionTimeoutMs - 10_000)
	if _, p := f.describeQuorum(leader, "CONTROLLER", 1); len(p.Observers) != 1 || p.Observers[0].LastFetchTimestamp > stoppedWall {
		t.Fatalf("within its session: observers %+v, want broker 4 with its last fetch before %d", p.Observers, stoppedWall)
	}
	c.run(10_000)
	if _, p := f.describeQuorum(leader, "CONTROLLER", 1); len(p.Observers) != 0 {
		t.Errorf("after its session: observers %v, want none", replicaIDs(p.Observers))
	}
}

// TestDescribeQuorumNeedsDescribeOnTheCluster: with the authorizer on, a
// principal without DESCRIBE on the cluster is refused DescribeQuorum with
// CLUSTER_AUTHORIZATION_FAILED on the broker listener and on the
// controller listener alike; granted it, both serve it.
func TestDescribeQuorumNeedsDescribeOnTheCluster(t *testing.T) {
	c := aclCluster(t, nil)
	alice := c.newForger("User:alice")
	caf := kerr.ClusterAuthorizationFailed.Code
	for _, at := range []struct {
		node     int32
		listener string
	}{{3, "PLAINTEXT"}, {1, "CONTROLLER"}} {
		resp, err := alice.send(at.node, at.listener, describeQuorumReq(2, 0))
		if err != nil {
			t.Fatalf("node %d %s: %v", at.node, at.listener, err)
		}
		if r := resp.(*kmsg.DescribeQuorumResponse); r.ErrorCode != caf || len(r.Topics) != 0 {
			t.Errorf("node %d %s without DESCRIBE on the cluster: %v %+v, want CLUSTER_AUTHORIZATION_FAILED and nothing described",
				at.node, at.listener, kerr.ErrorForCode(r.ErrorCode), r.Topics)
		}
	}
	c.grant(1, clusterACL("User:alice", acl.Describe))
	for _, at := range []struct {
		node     int32
		listener string
	}{{3, "PLAINTEXT"}, {1, "CONTROLLER"}} {
		if _, p := alice.describeQuorum(at.node, at.listener, 2); p.ErrorCode != 0 || p.LeaderID != 1 || len(p.CurrentVoters) != 1 {
			t.Errorf("node %d %s with DESCRIBE on the cluster: %v leader %d voters %v", at.node, at.listener,
				kerr.ErrorForCode(p.ErrorCode), p.LeaderID, replicaIDs(p.CurrentVoters))
		}
	}
}
