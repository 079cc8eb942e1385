package broker

// ListOffsets (key 2), versions 1..7.
//
// Served by the leader only, with the request's CurrentLeaderEpoch checked
// (v4+): timestamp -2 (earliest) answers the log start offset; -1 (latest)
// answers the HW, which is also the LSO until transactions exist, so both
// isolation levels agree; -3 (max timestamp, v7, KIP-734) the offset of the
// batch holding the largest timestamp; any other timestamp the first batch
// at or after it below the HW, at batch granularity (log.OffsetForTimestamp),
// or offset -1 when none is that recent. The answer carries the leader epoch.
//
// Skipped: v0's list of old-style offsets; v8's tiered-storage timestamps
// (-4, -5); replicas asking with ReplicaID >= 0 are answered as consumers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// ListOffsets' special timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
)

func (n *Node) handleListOffsets(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ListOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rt.Partitions = append(rt.Partitions, n.listOffset(partitionKey{t.Topic, lp.Partition}, lp))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

func (n *Node) listOffset(key partitionKey, lp kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	rp := kmsg.NewListOffsetsResponseTopicPartition()
	rp.Partition, rp.Timestamp, rp.Offset, rp.LeaderEpoch = lp.Partition, -1, -1, -1
	p := n.partitions[key]
	if p == nil {
		rp.ErrorCode = n.notHostedCode(key)
		return rp
	}
	if p.storageFailed() {
		rp.ErrorCode = kerr.KafkaStorageError.Code
		return rp
	}
	if d := p.replica.OnConsumerFetch(p.log.LogStartOffset(), lp.CurrentLeaderEpoch); d.Error != 0 {
		rp.ErrorCode = d.Error
		return rp
	}
	rp.LeaderEpoch = p.replica.LeaderEpoch()
	hw := p.replica.HighWatermark()
	switch lp.Timestamp {
	case listEarliest:
		rp.Offset = p.log.LogStartOffset()
	case listLatest:
		rp.Offset = hw
	case listMaxTimestamp:
		if offset, ts, found := p.log.MaxTimestamp(); found && offset < hw {
			rp.Offset, rp.Timestamp = offset, ts
		}
	default:
		offset, ts, found, err := p.log.OffsetForTimestamp(lp.Timestamp)
		switch {
		case err != nil:
			rp.ErrorCode = errorCodeOf(err)
		case found && offset < hw:
			rp.Offset, rp.Timestamp = offset, ts
		}
	}
	return rp
}
