package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsWhileHWLagsEpochStart: a leader that took a new epoch
// with its HW below its log end has not committed in the epoch yet; until
// it has, ListOffsets answers OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE
// before v5) for the latest offset and for a timestamp not found below the
// HW, as Kafka's Partition.fetchOffsetForTimestamp does (KIP-207), while
// the earliest offset and a Fetch are still answered. Without it, a client
// was told a latest offset below one a previous leader had told it (the
// simulator's HW model, SPEC.md §6.2).
func TestListOffsetsWhileHWLagsEpochStart(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.isolate(2)
	if r := c.produce(2, "r", 0, 1, recordBatch("c")); r.ErrorCode != 0 {
		t.Fatalf("acks=1 on the isolated leader: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	p := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	if hw, leo := p.replica.HighWatermark(), p.log.LogEndOffset(); hw != 2 || leo != 3 {
		t.Fatalf("HW %d, LEO %d; want 2, 3", hw, leo)
	}
	if r := c.listOffset(2, "r", 0, -1); r.ErrorCode != 0 || r.Offset != 2 {
		t.Fatalf("latest within the epoch: error %d offset %d, want the HW 2", r.ErrorCode, r.Offset)
	}
	// The leader takes a new epoch (as after a re-election) with its HW
	// at 2 and its log ending at 3: the epoch starts at 3.
	s := p.replica.State()
	s.LeaderEpoch++
	s.PartitionEpoch++
	if _, err := p.replica.ApplyState(s, 0); err != nil {
		t.Fatal(err)
	}
	if !p.replica.LaggingHighWatermark() {
		t.Fatal("the new epoch's HW does not lag its start")
	}
	if r := c.listOffset(2, "r", 0, -1); r.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Errorf("latest while the HW lags: error %d offset %d, want OFFSET_NOT_AVAILABLE", r.ErrorCode, r.Offset)
	}
	if r := c.listOffsetV(2, "r", 0, -1, 4); r.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Errorf("latest v4 while the HW lags: error %d, want LEADER_NOT_AVAILABLE", r.ErrorCode)
	}
	if r := c.listOffset(2, "r", 0, 1<<60); r.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Errorf("a timestamp past every record while the HW lags: error %d offset %d, want OFFSET_NOT_AVAILABLE", r.ErrorCode, r.Offset)
	}
	if r := c.listOffset(2, "r", 0, 0); r.ErrorCode != 0 || r.Offset != 0 {
		t.Errorf("a timestamp found below the HW: error %d offset %d, want offset 0", r.ErrorCode, r.Offset)
	}
	if r := c.listOffset(2, "r", 0, -2); r.ErrorCode != 0 || r.Offset != 0 {
		t.Errorf("earliest while the HW lags: error %d offset %d, want 0", r.ErrorCode, r.Offset)
	}
	if f := c.fetch(2, "r", 0, 0); f.ErrorCode != 0 || f.HighWatermark != 2 {
		t.Errorf("a consumer's fetch while the HW lags: error %d HW %d, want the lagging HW 2", f.ErrorCode, f.HighWatermark)
	}
}

// listOffsetV is listOffset with ListOffsets version v.
func (c *cluster) listOffsetV(node int32, topic string, p int32, ts int64, v int16) kmsg.ListOffsetsResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.request(node, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}
