package broker

// DeleteRecords (key 21), versions 0..2.
//
// Served by the leader: a topic whose cleanup.policy lacks delete (compact
// only) is POLICY_VIOLATION, as in Kafka; Offset -1 means the HW; an offset
// above the HW is OFFSET_OUT_OF_RANGE; otherwise the log start offset moves up to it
// (log.AdvanceStartOffset; segments wholly below it go at the next retention
// pass). As Kafka's DelayedDeleteRecords, the answer waits until the
// partition's low watermark (replica.Partition.LowWatermark: the smallest log
// start offset among the leader and its live followers, which report theirs
// in every fetch) reaches the offset, and carries that low watermark.
// Followers learn the new log start offset from their next fetch answer (at
// most replica.fetch.wait.max.ms later) and report theirs in the fetch after
// it. A partition still short at the request's timeout answers
// REQUEST_TIMED_OUT with low watermark -1, as Kafka's; one whose leadership
// moved meanwhile NOT_LEADER_OR_FOLLOWER. At most
// strand.purgatory.requests.per.partition.max requests wait per partition;
// beyond that a partition answers REQUEST_TIMED_OUT before anything moves.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
)

// deleteRecordsRequest is a DeleteRecords request waiting for low
// watermarks; resp is its answer, complete but for the partitions waiting.
type deleteRecordsRequest struct {
	conn    env.ConnID
	corr    int32
	resp    *kmsg.DeleteRecordsResponse
	waiting int
	timer   env.Timer
}

// deleteRecordsWait is one partition of a waiting request: the answer to
// fill in once the low watermark reaches offset, under the leader epoch the
// log start offset moved in.
type deleteRecordsWait struct {
	req         *deleteRecordsRequest
	answer      *kmsg.DeleteRecordsResponseTopicPartition
	offset      int64
	leaderEpoch int32
}

func (pm *partitionManager) handleDeleteRecords(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteRecordsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, dp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = dp.Partition, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// The answers are in place and will not move: waits point into them.
	dr := &deleteRecordsRequest{conn: conn, corr: hdr.CorrelationID, resp: resp}
	var waits []*partition
	g := pm.acls.current
	for i, t := range req.Topics {
		deletable := g.topic(acl.Delete, t.Topic)
		for j, dp := range t.Partitions {
			answer := &resp.Topics[i].Partitions[j]
			if !deletable {
				answer.ErrorCode = codeTopicAuthorization
				continue
			}
			p, offset, code := pm.deleteRecords(partitionKey{t.Topic, dp.Partition}, dp.Offset)
			if answer.ErrorCode = code; code != 0 {
				continue
			}
			if lw, _ := p.replica.LowWatermark(pm.meta.brokerAlive); lw >= offset {
				answer.LowWatermark = lw
				continue
			}
			answer.ErrorCode = kerr.RequestTimedOut.Code // unless the wait completes
			p.deleteRecordsWaits = append(p.deleteRecordsWaits, deleteRecordsWait{req: dr, answer: answer, offset: offset, leaderEpoch: p.replica.LeaderEpoch()})
			dr.waiting++
			waits = append(waits, p)
		}
	}
	if dr.waiting == 0 {
		pm.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	dr.timer = pm.clock.SetTimer(int64(max(req.TimeoutMillis, 0))*1e6, func() {
		for _, p := range waits {
			p.deleteRecordsWaits = slices.DeleteFunc(p.deleteRecordsWaits, func(w deleteRecordsWait) bool { return w.req == dr })
		}
		pm.net.Reply(dr.conn, dr.corr, dr.resp)
	})
}

// deleteRecords moves one partition's log start offset to offset (-1: the
// HW); it returns the partition and the offset the low watermark must reach,
// or an error code.
func (pm *partitionManager) deleteRecords(key partitionKey, offset int64) (*partition, int64, int16) {
	p := pm.partitions[key]
	switch {
	case p == nil:
		return nil, -1, pm.notHostedCode(key)
	case p.storageFailed():
		return nil, -1, kerr.KafkaStorageError.Code
	}
	if d := p.replica.OnConsumerFetch(p.log.LogStartOffset(), -1); d.Error != 0 {
		return nil, -1, d.Error
	}
	if !pm.topicConfig(key.topic).CleanupPolicy.Delete {
		// Kafka's Partition.deleteRecordsOnLeader: only a topic whose
		// cleanup.policy includes delete may lose records on request.
		return nil, -1, kerr.PolicyViolation.Code
	}
	hw := p.replica.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return nil, -1, kerr.OffsetOutOfRange.Code
	}
	if len(p.deleteRecordsWaits) >= int(pm.cfg.Broker.Limits.PurgatoryRequestsPerPartitionMax) {
		return nil, -1, kerr.RequestTimedOut.Code
	}
	if err := p.log.AdvanceStartOffset(offset); err != nil {
		return nil, -1, errorCodeOf(err)
	}
	producerStartOffsetMoved(p)
	return p, offset, 0
}

// completeDeleteRecords answers the waits on p that are settled: the low
// watermark reached their offset, or the partition's leadership, storage or
// topic went away. A request is answered once its last wait is.
func (pm *partitionManager) completeDeleteRecords(p *partition) {
	if len(p.deleteRecordsWaits) == 0 {
		return
	}
	lw, leader := p.replica.LowWatermark(pm.meta.brokerAlive)
	p.deleteRecordsWaits = slices.DeleteFunc(p.deleteRecordsWaits, func(w deleteRecordsWait) bool {
		switch {
		case p.retired:
			w.answer.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case p.storageFailed():
			w.answer.ErrorCode = kerr.KafkaStorageError.Code
		case !leader || p.replica.LeaderEpoch() != w.leaderEpoch:
			w.answer.ErrorCode = kerr.NotLeaderForPartition.Code
		case lw >= w.offset:
			w.answer.ErrorCode, w.answer.LowWatermark = 0, lw
		default:
			return false
		}
		if w.req.waiting--; w.req.waiting == 0 {
			w.req.timer.Stop()
			pm.net.Reply(w.req.conn, w.req.corr, w.req.resp)
		}
		return true
	})
}
