package broker

// OffsetForLeaderEpoch (key 23), versions 0..4.
//
// Served by the leader (CurrentLeaderEpoch checked from v2: FENCED_LEADER_EPOCH
// or UNKNOWN_LEADER_EPOCH): the largest epoch <= the requested one and where
// it ends, from the leader epoch cache (KIP-101, KIP-279). For consumers
// (ReplicaID -1, KIP-320) the end offset of the latest epoch is capped at the
// HW, so a consumer never learns of records it may not read. Replicas
// (ReplicaID >= 0, v3+) see the LEO.
//
// Skipped: serving followers' epoch queries on followers (Kafka allows it
// for replicas only through the leader too).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
)

func (pm *partitionManager) handleOffsetForLeaderEpoch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.OffsetForLeaderEpochRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	consumer := req.Version < 3 || req.ReplicaID < 0
	g := pm.acls.current
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		// A replica's request was authorized whole (CLUSTER_ACTION).
		describable := !consumer || g.topic(acl.Describe, t.Topic)
		for _, ep := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = ep.Partition, -1, -1
			if !describable {
				rp.ErrorCode = codeTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.ErrorCode = pm.epochEndOffset(partitionKey{t.Topic, ep.Partition}, ep, consumer, &rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	pm.net.Reply(conn, hdr.CorrelationID, resp)
}

func (pm *partitionManager) epochEndOffset(key partitionKey, ep kmsg.OffsetForLeaderEpochRequestTopicPartition, consumer bool, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) int16 {
	p := pm.partitions[key]
	switch {
	case p == nil:
		return pm.notHostedCode(key)
	case p.storageFailed():
		return kerr.KafkaStorageError.Code
	}
	if d := p.replica.OnConsumerFetch(p.log.LogStartOffset(), ep.CurrentLeaderEpoch); d.Error != 0 {
		return d.Error
	}
	epoch, end := replicaLog{p.log}.EndOffsetForEpoch(ep.LeaderEpoch)
	if consumer && end > p.replica.HighWatermark() {
		end = p.replica.HighWatermark()
	}
	rp.LeaderEpoch, rp.EndOffset = epoch, end
	return 0
}
