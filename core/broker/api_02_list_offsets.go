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
// A new leader whose HW still lags the start of its epoch (it has not
// committed in it: replica.Partition.LaggingHighWatermark) answers the
// latest offset, and a timestamp not found below its HW, with
// OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5), as Kafka does since
// KIP-207, so that the latest offset a client is told never goes back
// across a leader change (SPEC.md §4.2, TestListOffsetsWhileHWLagsEpochStart).
//
// As Kafka, a partition named twice is INVALID_REQUEST (each time), and a
// negative timestamp the version does not define (-3 before v7, -4, -5, any
// other) UNSUPPORTED_VERSION.
//
// Skipped: v0's list of old-style offsets; v8's tiered-storage timestamps
// (-4, -5); replicas asking with ReplicaID >= 0 are answered as consumers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/log"
)

// ListOffsets' special timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
)

func (pm *partitionManager) handleListOffsets(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ListOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	named := map[partitionKey]int{}
	for _, t := range req.Topics {
		for _, lp := range t.Partitions {
			named[partitionKey{t.Topic, lp.Partition}]++
		}
	}
	g := pm.acls.current
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		describable := g.topic(acl.Describe, t.Topic)
		for _, lp := range t.Partitions {
			key := partitionKey{t.Topic, lp.Partition}
			var rp kmsg.ListOffsetsResponseTopicPartition
			switch {
			case !describable:
				rp = listOffsetError(lp, codeTopicAuthorization)
			case named[key] > 1:
				// Kafka refuses a partition named twice (its
				// duplicatePartitions) rather than answer one of them.
				rp = listOffsetError(lp, kerr.InvalidRequest.Code)
			case !listTimestampServed(lp.Timestamp, req.Version):
				rp = listOffsetError(lp, kerr.UnsupportedVersion.Code)
			default:
				rp = pm.listOffset(key, lp, req.Version)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	pm.net.Reply(conn, hdr.CorrelationID, resp)
}

// listTimestampServed reports whether a ListOffsets timestamp is one the
// version may ask for, as Kafka's isListOffsetsTimestampUnsupported decides:
// any time, earliest and latest from v1, max timestamp from v7; any other
// negative timestamp (v8's tiered-storage ones, or none at all) is
// UNSUPPORTED_VERSION rather than a search for the first record after it.
func listTimestampServed(timestamp int64, version int16) bool {
	switch {
	case timestamp >= 0, timestamp == listEarliest, timestamp == listLatest:
		return true
	case timestamp == listMaxTimestamp:
		return version >= 7
	}
	return false
}

// listOffsetError is a ListOffsets partition answer carrying only an error.
func listOffsetError(lp kmsg.ListOffsetsRequestTopicPartition, code int16) kmsg.ListOffsetsResponseTopicPartition {
	rp := kmsg.NewListOffsetsResponseTopicPartition()
	rp.Partition, rp.Timestamp, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = lp.Partition, -1, -1, -1, code
	return rp
}

func (pm *partitionManager) listOffset(key partitionKey, lp kmsg.ListOffsetsRequestTopicPartition, version int16) kmsg.ListOffsetsResponseTopicPartition {
	rp := listOffsetError(lp, 0)
	p := pm.partitions[key]
	if p == nil {
		rp.ErrorCode = pm.notHostedCode(key)
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
	notAvailable := kerr.OffsetNotAvailable.Code
	if version < 5 {
		notAvailable = kerr.LeaderNotAvailable.Code
	}
	switch lp.Timestamp {
	case listEarliest:
		rp.Offset = p.log.LogStartOffset()
	case listLatest:
		if p.replica.LaggingHighWatermark() {
			return listOffsetError(lp, notAvailable)
		}
		rp.Offset = hw
	default:
		// Records are decompressed within the bound produce used for this
		// topic; a batch beyond it is answered at batch granularity.
		decompressedBytesMax := decompressedBytesMaxOf(pm.topicConfig(key.topic).MaxMessageBytes)
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
		case p.replica.LaggingHighWatermark():
			return listOffsetError(lp, notAvailable)
		}
	}
	return rp
}
