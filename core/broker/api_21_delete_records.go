package broker

// DeleteRecords (key 21), versions 0..2.
//
// Served by the leader: Offset -1 means the HW; an offset above the HW is
// OFFSET_OUT_OF_RANGE; otherwise the log start offset moves up to it
// (log.AdvanceStartOffset; segments wholly below it go at the next retention
// pass) and the answer is the new low watermark. Followers learn the new log
// start offset from their next fetch response and move theirs.
//
// Skipped: Kafka answers only once every replica's log start offset has
// moved (a delayed operation); Strand answers with the leader's at once.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (n *Node) handleDeleteRecords(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteRecordsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, dp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = dp.Partition
			rp.LowWatermark, rp.ErrorCode = n.deleteRecords(partitionKey{t.Topic, dp.Partition}, dp.Offset)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

// deleteRecords moves one partition's log start offset; it returns the low
// watermark and an error code.
func (n *Node) deleteRecords(key partitionKey, offset int64) (int64, int16) {
	p := n.partitions[key]
	switch {
	case p == nil:
		return -1, n.notHostedCode(key)
	case p.storageFailed():
		return -1, kerr.KafkaStorageError.Code
	}
	if d := p.replica.OnConsumerFetch(p.log.LogStartOffset(), -1); d.Error != 0 {
		return -1, d.Error
	}
	hw := p.replica.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange.Code
	}
	if err := p.log.AdvanceStartOffset(offset); err != nil {
		return -1, errorCodeOf(err)
	}
	producerStartOffsetMoved(p)
	return p.log.LogStartOffset(), 0
}
