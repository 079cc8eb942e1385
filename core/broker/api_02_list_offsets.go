package broker

// ListOffsets (key 2), versions 1..7.
//
// Served by the leader only, with the request's CurrentLeaderEpoch checked
// (v4+): timestamp -2 (earliest) answers the log start offset; -1 (latest)
// answers the HW, which is also the LSO until transactions exist, so both
// isolation levels agree; -3 (max timestamp, v7, KIP-734) the first record
// carrying the largest timestamp (KAFKA-16310); any other timestamp the first
// record at or after it (log.OffsetForTimestamp), in both cases only below the
// HW, else offset -1. Earliest and latest carry the current leader epoch, a
// record found by timestamp its batch's epoch, as Kafka's do.
//
// Skipped: v0's list of old-style offsets; v8's tiered-storage timestamps
// (-4, -5); replicas asking with ReplicaID >= 0 are answered as consumers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/log"
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
	default:
		// Records are decompressed within the bound produce used for this
		// topic; a batch beyond it is answered at batch granularity.
		decompressedBytesMax := decompressedBytesMaxOf(n.topicConfig(key.topic).MaxMessageBytes)
		var found log.TimestampOffset
		var ok bool
		var err error
		if lp.Timestamp == listMaxTimestamp {
			found, ok, err = p.log.MaxTimestamp(decompressedBytesMax)
		} else {
			found, ok, err = p.log.OffsetForTimestamp(lp.Timestamp, decompressedBytesMax)
		}
		switch {
		case err != nil:
			rp.ErrorCode, rp.LeaderEpoch = errorCodeOf(err), -1
		case ok && found.Offset < hw:
			// Kafka answers the found batch's epoch (-1 for none), which a
			// KIP-320 client validates its new position against.
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = found.Offset, found.TimestampMs, found.LeaderEpoch
		}
	}
	return rp
}
