package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// threeNodes starts a 3-node cluster (RF 3, min.insync.replicas 2) with a
// topic "r" of one partition led by node 2 (node 1 is the controller).
func threeNodes(t *testing.T) *cluster {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3) // moves the placement cursor: "r" is led by node 2
	c.createTopic(3, "r", 1, 3)
	if l := c.leaderOf("r", 0); l != 2 {
		t.Fatalf("leader of r-0 is %d, want 2", l)
	}
	return c
}

func TestReplicationAcksAllAndFollowersCatchUp(t *testing.T) {
	c := threeNodes(t)
	r := c.produce(2, "r", 0, -1, recordBatch("a", "b"))
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("acks=all: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	// Once acknowledged with acks=all, the HW covers it: consumers see it.
	f := c.fetch(2, "r", 0, 0)
	if f.HighWatermark != 2 || joined(values(t, f.RecordBatches)) != "a,b" {
		t.Fatalf("after acks=all: hw %d values %q", f.HighWatermark, joined(values(t, f.RecordBatches)))
	}
	// Followers hold identical logs.
	c.waitFor("followers caught up", 5000, func() bool {
		for _, id := range []int32{1, 3} {
			if c.nodes[id].node.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset() != 2 {
				return false
			}
		}
		return true
	})
	// Below Fetch v11 consumers are served by the leader only (from v11 a
	// follower serves them too: TestConsumerFetchFromFollower).
	old := fetchReq("r", 0, 0, 0)
	old.SetVersion(10)
	if f := c.request(3, old).(*kmsg.FetchResponse).Topics[0].Partitions[0]; f.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch v10 from a follower: error %d, want NOT_LEADER_OR_FOLLOWER", f.ErrorCode)
	}
	if r := c.produce(1, "r", 0, 1, recordBatch("x")); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: error %d, want NOT_LEADER_OR_FOLLOWER", r.ErrorCode)
	}
}

func TestHighWatermarkVisibleToConsumersOnly(t *testing.T) {
	c := threeNodes(t)
	c.produce(2, "r", 0, -1, recordBatch("committed"))
	// Cut the leader off from its followers: acks=1 appends, HW stays.
	leader := c.nodes[2].nn.Host()
	for _, id := range []int32{1, 3} {
		c.net.Block(leader, c.nodes[id].nn.Host())
		c.net.Block(c.nodes[id].nn.Host(), leader)
	}
	if r := c.produce(2, "r", 0, 1, recordBatch("uncommitted")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=1 while cut off: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	f := c.fetch(2, "r", 0, 0)
	if f.HighWatermark != 1 || joined(values(t, f.RecordBatches)) != "committed" {
		t.Fatalf("consumer sees hw %d values %q; want 1 and only the committed record", f.HighWatermark, joined(values(t, f.RecordBatches)))
	}
	if f := c.fetch(2, "r", 0, 1); f.ErrorCode != 0 || len(f.RecordBatches) != 0 {
		t.Fatalf("fetch between HW and LEO: error %d, %d bytes; want none", f.ErrorCode, len(f.RecordBatches))
	}
	// An acks=all produce times out while the followers cannot fetch.
	req := produceReq("r", 0, -1, recordBatch("waits"))
	req.TimeoutMillis = 1000
	start := c.s.NowNs()
	r := c.request(2, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if r.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all while cut off: error %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(r.ErrorCode))
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited < 1000 || waited > 1100 {
		t.Fatalf("acks=all timed out after %d ms, want about 1000", waited)
	}
	// Healed, the followers catch up and the HW covers everything.
	c.net.Heal()
	c.waitFor("HW catches up", 10000, func() bool {
		return c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].replica.HighWatermark() == 3
	})
	if got := joined(values(t, c.fetch(2, "r", 0, 0).RecordBatches)); got != "committed,uncommitted,waits" {
		t.Fatalf("after heal: %q", got)
	}
}

func TestNotEnoughReplicas(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "3"})
	c.waitRegistered()
	c.createTopic(1, "m", 1, 3)
	leader := c.leaderOf("m", 0)
	if r := c.produce(leader, "m", 0, -1, recordBatch("all three")); r.ErrorCode != 0 {
		t.Fatalf("acks=all with a full ISR: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	victim := int32(3)
	if leader == 3 {
		victim = 2
	}
	c.nodes[victim].proc.Crash()
	c.waitFor("ISR shrinks", 20000, func() bool {
		s, _ := c.nodes[leader].node.meta.image.PartitionByName("m", 0)
		return len(s.ISR) == 2
	})
	c.waitFor("leader learns the ISR", 5000, func() bool {
		return len(c.nodes[leader].node.parts.partitions[partitionKey{"m", 0}].replica.State().ISR) == 2
	})
	if r := c.produce(leader, "m", 0, -1, recordBatch("refused")); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all below min.insync: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.produce(leader, "m", 0, 1, recordBatch("acks=1 is fine")); r.ErrorCode != 0 {
		t.Fatalf("acks=1 below min.insync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestLeaderFailoverWhenFenced(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.nodes[2].proc.Crash()
	// The controller fences node 2 after broker.session.timeout.ms and
	// elects another ISR member with a new leader epoch.
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0)
	if s.LeaderEpoch != 1 {
		t.Fatalf("leader epoch after failover %d, want 1", s.LeaderEpoch)
	}
	c.waitFor("new leader takes over", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}]
		return p.replica.LeaderEpoch() == 1
	})
	// The acknowledged record survives; min.insync=2 still holds with two
	// brokers, so acks=all works on the new leader.
	r := c.produce(leader, "r", 0, -1, recordBatch("after"))
	if r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=all on new leader %d: error %v offset %d", leader, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if got := joined(values(t, c.fetch(leader, "r", 0, 0).RecordBatches)); got != "kept,after" {
		t.Fatalf("after failover: %q, want kept,after", got)
	}
}

// TestDiskFullGivesStorageErrorAndMovesLeadership: a full disk fails the
// append with KAFKA_STORAGE_ERROR, the log stays failed, and the broker
// asks to be fenced so another ISR member takes over.
func TestDiskFullGivesStorageErrorAndMovesLeadership(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.nodes[2].disk.SetFull(true)
	if r := c.produce(2, "r", 0, 1, recordBatch("no room")); r.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(r.ErrorCode))
	}
	if f := c.fetch(2, "r", 0, 0); f.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from a failed log: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(f.ErrorCode))
	}
	c.waitFor("leadership moves", 10000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica
		return p.LeaderEpoch() == 1 && p.HighWatermark() == 1
	})
	if got := joined(values(t, c.fetch(leader, "r", 0, 0).RecordBatches)); got != "kept" {
		t.Fatalf("new leader serves %q, want kept", got)
	}
}

// TestPlantedBugReachesReplica: Config.Bugs travel to every partition. With
// early-ack, acks=all is answered although no follower can fetch.
func TestPlantedBugReachesReplica(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	for _, tn := range c.nodes {
		tn.cfg.Bugs.Replica.EarlyAck = true
		tn.proc.Crash()
		tn.proc.Restart()
		c.start(tn)
	}
	c.waitRegistered()
	c.createTopic(2, "b", 1, 3)
	leader := c.leaderOf("b", 0)
	c.isolate(leader)
	req := produceReq("b", 0, -1, recordBatch("acked too early"))
	req.TimeoutMillis = 500
	r := c.request(leader, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		t.Fatalf("with early-ack, acks=all while isolated answered %v; want success (the bug)", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestProduceManyPartitionsOneRequest: one acks=all request spanning two
// topics and several partitions with different leaders is answered once,
// when every partition is committed, with each partition's own offset.
func TestProduceManyPartitionsOneRequest(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.waitRegistered()
	c.createTopic(1, "a", 3, 3)
	c.createTopic(1, "b", 2, 3)
	// Pick a node that leads at least one partition, and send it every
	// partition: the ones it does not lead get NOT_LEADER_OR_FOLLOWER.
	node := c.leaderOf("a", 0)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, topic := range []struct {
		name       string
		partitions int32
	}{{"a", 3}, {"b", 2}} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic.name
		for p := range topic.partitions {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recordBatch(topic.name)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := c.request(node, req).(*kmsg.ProduceResponse)
	led := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			want := int16(0)
			if c.leaderOf(rt.Topic, rp.Partition) != node {
				want = kerr.NotLeaderForPartition.Code
			} else {
				led++
				if hw := c.nodes[node].node.parts.partitions[partitionKey{rt.Topic, rp.Partition}].replica.HighWatermark(); hw < 1 {
					t.Errorf("%s-%d answered with HW %d: not committed", rt.Topic, rp.Partition, hw)
				}
			}
			if rp.ErrorCode != want || (want == 0 && rp.BaseOffset != 0) {
				t.Errorf("%s-%d: error %v offset %d, want %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset, kerr.ErrorForCode(want))
			}
		}
	}
	if led == 0 {
		t.Fatal("the node led none of the partitions")
	}
}
