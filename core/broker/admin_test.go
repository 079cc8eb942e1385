package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords asks node to delete topic's partition 0 up to offset (-1:
// the HW) with DeleteRecords v2, waiting at most timeoutMs for the replicas.
func (c *cluster) deleteRecords(node int32, topic string, offset int64, timeoutMs int32) kmsg.DeleteRecordsResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(2)
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.request(node, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
}

func TestDeleteRecordsMovesLogStartOnEveryReplica(t *testing.T) {
	c := threeNodes(t)
	for _, v := range []string{"a", "b", "c"} {
		c.produce(2, "r", 0, -1, recordBatch(v))
	}
	del := func(offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		return c.deleteRecords(2, "r", offset, 15000)
	}
	if r := del(5); r.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("delete beyond the HW: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := del(2); r.ErrorCode != 0 || r.LowWatermark != 2 {
		t.Fatalf("delete to 2: error %v low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	if f := c.fetch(2, "r", 0, 1); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the new log start: %v", kerr.ErrorForCode(f.ErrorCode))
	}
	if f := c.fetch(2, "r", 0, 2); f.LogStartOffset != 2 || joined(values(t, f.RecordBatches)) != "c" {
		t.Fatalf("fetch at the log start: log start %d values %q", f.LogStartOffset, joined(values(t, f.RecordBatches)))
	}
	c.produce(2, "r", 0, -1, recordBatch("d")) // followers' next fetch carries the log start
	c.waitFor("followers move their log start", 5000, func() bool {
		for _, id := range []int32{1, 3} {
			if c.nodes[id].node.parts.partitions[partitionKey{"r", 0}].log.LogStartOffset() != 2 {
				return false
			}
		}
		return true
	})
}

// TestDeleteRecordsWaitsForLiveFollowers: as Kafka's DelayedDeleteRecords,
// the answer waits until every live replica's log start offset reached the
// offset, and carries that low watermark; a live follower cut off from the
// leader holds it until the timeout (REQUEST_TIMED_OUT, low watermark -1,
// though the leader's log start moved); a fenced follower does not hold it.
func TestDeleteRecordsWaitsForLiveFollowers(t *testing.T) {
	c := threeNodes(t) // r-0 led by node 2, followers 1 and 3
	for _, v := range []string{"a", "b", "c", "d"} {
		if r := c.produce(2, "r", 0, -1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	del := func(offset int64, timeoutMs int32) kmsg.DeleteRecordsResponseTopicPartition {
		return c.deleteRecords(2, "r", offset, timeoutMs)
	}
	logStart := func(id int32) int64 {
		return c.nodes[id].node.parts.partitions[partitionKey{"r", 0}].log.LogStartOffset()
	}

	if r := del(1, 10000); r.ErrorCode != 0 || r.LowWatermark != 1 {
		t.Fatalf("delete to 1: %v, low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	if logStart(1) < 1 || logStart(3) < 1 {
		t.Fatalf("answered before the followers moved: log starts %d and %d, want >= 1", logStart(1), logStart(3))
	}

	h2, h3 := c.nodes[2].nn.Host(), c.nodes[3].nn.Host()
	c.net.Block(h2, h3)
	c.net.Block(h3, h2)
	if r := del(2, 2000); r.ErrorCode != kerr.RequestTimedOut.Code || r.LowWatermark != -1 {
		t.Fatalf("delete to 2 with node 3 cut off: %v, low watermark %d; want REQUEST_TIMED_OUT, -1", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	if logStart(2) != 2 || logStart(3) != 1 {
		t.Fatalf("log starts: leader %d, node 3 %d; want 2 and 1", logStart(2), logStart(3))
	}
	c.net.Unblock(h2, h3)
	c.net.Unblock(h3, h2)
	if r := del(2, 10000); r.ErrorCode != 0 || r.LowWatermark != 2 || logStart(3) != 2 {
		t.Fatalf("delete to 2 healed: %v, low watermark %d, node 3 at %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark, logStart(3))
	}

	c.nodes[3].proc.Crash()
	c.waitFor("node 3 fenced", 30000, func() bool {
		b, _ := c.nodes[2].node.meta.image.Broker(3)
		return b.Fenced
	})
	if r := del(3, 10000); r.ErrorCode != 0 || r.LowWatermark != 3 {
		t.Fatalf("delete to 3 with node 3 fenced: %v, low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}

func TestDescribeConfigsAndCluster(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.retention.ms": "1000"})
	c.waitRegistered()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cfg", 1, 1
	v := "compact"
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", &v
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	c.request(1, req)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dc.IncludeSynonyms = true
	for _, res := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "cfg"}, {kmsg.ConfigResourceTypeTopic, "missing"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = res.typ, res.name
		dc.Resources = append(dc.Resources, r)
	}
	resp := c.request(1, dc).(*kmsg.DescribeConfigsResponse)
	find := func(res kmsg.DescribeConfigsResponseResource, name string) *kmsg.DescribeConfigsResponseResourceConfig {
		for i := range res.Configs {
			if res.Configs[i].Name == name {
				return &res.Configs[i]
			}
		}
		t.Fatalf("%s: no config %s", res.ResourceName, name)
		return nil
	}
	topic := resp.Resources[0]
	if e := find(topic, "cleanup.policy"); *e.Value != "compact" || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("cleanup.policy: %s from %v", *e.Value, e.Source)
	}
	if e := find(topic, "retention.ms"); *e.Value != "1000" || e.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("retention.ms: %s from %v, want 1000 from the broker's file", *e.Value, e.Source)
	}
	if resp.Resources[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing topic: %v", kerr.ErrorForCode(resp.Resources[1].ErrorCode))
	}
	if e := find(resp.Resources[2], "log.retention.ms"); *e.Value != "1000" || !e.ReadOnly {
		t.Errorf("broker log.retention.ms: %s read-only %v", *e.Value, e.ReadOnly)
	}

	cl := kmsg.NewPtrDescribeClusterRequest()
	cl.SetVersion(1)
	cl.EndpointType = 1
	cr := c.request(1, cl).(*kmsg.DescribeClusterResponse)
	if cr.ErrorCode != 0 || cr.ControllerID != 1 || len(cr.Brokers) != 1 || cr.Brokers[0].Port != 9002 {
		t.Fatalf("describe cluster: %+v", cr)
	}
}
