package broker

// Produce (key 0), versions 3..11 (api_versions.go).
//
// Served: many topics and partitions per request; acks 0 (no response:
// env.Network.Skip; a partition error closes the connection instead, in
// request order, as in Kafka), 1 (answered after the leader's append) and
// -1/all (answered once the HW passes the batch, or REQUEST_TIMED_OUT after
// TimeoutMillis); per-partition errors UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), CORRUPT_MESSAGE,
// INVALID_RECORD, MESSAGE_TOO_LARGE (the topic's max.message.bytes) and
// KAFKA_STORAGE_ERROR; INVALID_REQUIRED_ACKS for an acks value Kafka refuses.
//
// Idempotent producers (producer_state.go): each batch carrying a producer
// id is checked against the partition's producer state in the same
// event-loop step as its append. A retry of one of the producer's last five
// batches is answered NONE with the original offsets and appended nothing;
// with acks=all it waits for the original to commit. A sequence gap answers
// OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch INVALID_PRODUCER_EPOCH.
//
// INVALID_RECORD and INVALID_TIMESTAMP say why in ErrorMessage (v8+), naming
// the batch field, as Kafka's record validation errors do.
//
// A topic whose compression.type names a codec (not "producer") stores each
// batch in that codec, recompressing one sent in another as Kafka's
// LogValidator does; the stored batch must fit max.message.bytes too. The
// pre-check recompresses on the connection goroutine when it knew the
// topic's codec (api_00_produce_precheck.go); the loop recompresses only a
// batch that was not pre-checked (the simulator) or whose topic changed its
// codec since.
//
// Skipped: transactions (TransactionID is ignored); per-record error lists
// (ErrorRecords); throttling. Produce does not auto-create topics, as in
// Kafka since 2.x only Metadata does.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/batch"
	"strand/core/env"
	"strand/core/replica"
)

// pendingProduce is a produce request some of whose partitions wait: the
// completion record of the request, answered once none waits.
type pendingProduce struct {
	conn env.ConnID
	corr int32
	// deadlineMs is when the request's TimeoutMillis runs out, in
	// monotonic ms: the one deadline of each of its partitions that waits,
	// for the HW or for durability (produce_waits.go).
	deadlineMs int64
	resp       *kmsg.ProduceResponse
	remaining  int
	// onDone, when set, takes the place of the reply: the produce is a
	// group coordinator's append (coordinators.go), not a client's.
	onDone func()
}

// produceSlot is one partition of a pendingProduce: where its answer goes.
// While it waits it is in exactly one place: the replica's acks=all waiters
// (its partition's ackWaits names it by the waiter's request id), or the
// partition's durableWaits.
type produceSlot struct {
	pending *pendingProduce
	part    *kmsg.ProduceResponseTopicPartition
	// p and lastOffset are the partition and the batch's last offset, for
	// waits on durability (durable.go).
	p          *partition
	lastOffset int64
	// precheck is the batch's pre-check (PrecheckView.Precheck), or nil: then
	// produceOne checks the batch in full. produceOne clears it once used,
	// as it refers to the request's bytes.
	precheck *batchPrecheck
}

// handleProduceRequest serves a Produce as decoded or as pre-checked on a
// connection goroutine (api_00_produce_precheck.go).
func (pm *partitionManager) handleProduceRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	switch r := req.(type) {
	case *PrecheckedProduce:
		pm.handleProduce(conn, hdr, r.ProduceRequest, r)
	case *kmsg.ProduceRequest:
		pm.handleProduce(conn, hdr, r, nil)
	default:
		pm.net.Close(conn, hdr.CorrelationID)
	}
}

// handleProduce serves a Produce. prechecked, when not nil, carries the
// verdicts of the pre-check (PrecheckView) on req's batches, which spare the loop the
// byte-level checks; without it every batch is checked here in full.
//
// Nothing of req outlives the call except the batches appended to a log
// (env.File's ownership rule then applies): responses, delayed ones too,
// are built from copies. realnet relies on this to recycle the request's
// frame (realnet/framepool.go); keep it so.
func (pm *partitionManager) handleProduce(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ProduceRequest, prechecked *PrecheckedProduce) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	// remaining starts at 1, held while the request is being handled, so that
	// acks completed during the loop (an ISR of one) cannot answer early.
	pending := &pendingProduce{conn: conn, corr: hdr.CorrelationID, resp: resp, remaining: 1,
		deadlineMs: pm.deadlineMs(int64(max(req.TimeoutMillis, 0)))}
	acksValid := validAcks(req.Acks)
	budget := prechecked.decompressionBudget(pm.cfg.Broker.Limits.ProduceRequestDecompressedBytesMax)
	g := pm.acls.current
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		writable := g.topic(acl.Write, t.Topic)
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for j, tp := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = tp.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if !writable {
				rp.ErrorCode = codeTopicAuthorization
				continue
			}
			if !acksValid {
				rp.ErrorCode = kerr.InvalidRequiredAcks.Code
				continue
			}
			if t.Topic == offsetsTopic {
				// Only the group coordinators write their records there
				// (coordinators.go); Kafka refuses client appends to
				// internal topics with INVALID_TOPIC_EXCEPTION.
				rp.ErrorCode = kerr.InvalidTopicException.Code
				continue
			}
			slot := &produceSlot{pending: pending, part: rp}
			slot.precheck = prechecked.precheckOf(i, j, tp.Records)
			if code := pm.produceOne(partitionKey{t.Topic, tp.Partition}, req, tp.Records, slot, budget); code != 0 {
				rp.ErrorCode = code
				rp.BaseOffset = -1
			}
		}
	}
	if req.Acks == replica.AcksNone {
		pm.answerNoAcks(conn, hdr.CorrelationID, resp)
		return
	}
	pm.releaseProduce(pending)
}

// answerNoAcks settles an acks=0 produce, which gets no response. If any
// partition failed, whatever the error, the connection is closed instead,
// as Kafka's KafkaApis.handleProduceRequest does (errorInResponse): the
// client cannot otherwise learn of the error, and a closed connection
// makes it refresh its metadata, so a producer writing to a former leader
// finds the new one. The close is in request order (env.Network.Close):
// the requests pipelined before this one, such as an acks=all produce
// still waiting for the ISR, are answered first, as Kafka, which reads
// one request at a time, has answered them; those pipelined after it are
// not executed.
func (pm *partitionManager) answerNoAcks(conn env.ConnID, correlationID int32, resp *kmsg.ProduceResponse) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				pm.net.Close(conn, correlationID)
				return
			}
		}
	}
	pm.net.Skip(conn, correlationID)
}

// releaseProduce drops one hold on a pending produce and answers it when
// none is left.
func (pm *partitionManager) releaseProduce(pending *pendingProduce) {
	pending.remaining--
	if pending.remaining == 0 && pending.onDone != nil {
		pending.onDone()
	} else if pending.remaining == 0 {
		pm.net.Reply(pending.conn, pending.corr, pending.resp)
	}
}

// produceOne hands one partition's batch to its leader
// (partition.appendRecordsToLeader) and keeps where its answer goes. For
// acks=all the slot is registered and answered later (pending.remaining
// counts it); otherwise the slot is filled now. It returns the partition's
// error code. A batch checked here, not by the pre-check, decompresses
// within the request's budget.
func (pm *partitionManager) produceOne(key partitionKey, req *kmsg.ProduceRequest, records []byte, slot *produceSlot, budget *batch.DecompressionBudget) int16 {
	p := pm.partitions[key]
	if p == nil {
		return pm.notHostedCode(key)
	}
	precheck := slot.precheck
	// A waiting slot keeps nothing of the request (handleProduce).
	slot.precheck = nil
	codec, recompress := storedCodec(pm.topicConfig(key.topic).CompressionType)
	pm.nextRequestID++
	now := pm.nowMs()
	in := leaderAppend{
		records: records, acks: req.Acks,
		limits: pm.produceLimits(key.topic), storageCodec: codec, recompress: recompress,
		precheck: precheck, budget: budget,
		requestID: pm.nextRequestID, deadlineMs: slot.pending.deadlineMs, nowMs: now,
	}
	out, refused, recompressedOnLoop := p.appendRecordsToLeader(in)
	if recompressedOnLoop {
		pm.loopRecompressions++
	}
	if refused != nil {
		if refused.message != "" {
			slot.part.ErrorMessage = &refused.message
		}
		return refused.code
	}
	res := out.result
	slot.part.BaseOffset, slot.part.LogStartOffset = res.BaseOffset, res.LogStartOffset
	slot.p, slot.lastOffset = p, res.LastOffset
	if in.limits.TimestampType == batch.LogAppendTime {
		slot.part.LogAppendTime = res.AppendTimeMs
	}
	if out.awaitsHW {
		p.ackWaits[in.requestID] = slot
		slot.pending.remaining++
	}
	if req.Acks == replica.AcksLeader {
		pm.awaitDurable(slot)
	}
	if out.duplicate && !out.awaitsHW {
		return 0 // nothing appended, nothing more to wait for
	}
	pm.afterReplicaChange(p)
	pm.armProduceExpiry(p)
	return 0
}

// notHostedCode is the answer for a partition this node does not host:
// KAFKA_STORAGE_ERROR if it is assigned here but its log could not be
// opened (storage_failure.go), NOT_LEADER_OR_FOLLOWER if the partition
// exists in the cluster (the client's metadata is stale),
// UNKNOWN_TOPIC_OR_PARTITION otherwise.
func (pm *partitionManager) notHostedCode(key partitionKey) int16 {
	if pm.partitionOffline(key) {
		return kerr.KafkaStorageError.Code
	}
	if _, ok := pm.meta.image.PartitionByName(key.topic, key.index); ok {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// completeAcks answers the acks=all produces p's replica has completed.
func (pm *partitionManager) completeAcks(p *partition) {
	for _, r := range p.replica.TakeAckResults() {
		slot, ok := p.ackWaits[r.RequestID]
		if !ok {
			continue
		}
		delete(p.ackWaits, r.RequestID)
		if r.Error != 0 {
			slot.part.ErrorCode = r.Error
			slot.part.BaseOffset = -1
		}
		if r.Error == 0 && pm.parkUntilDurable(slot) {
			continue // waits on, under the same deadline
		}
		pm.releaseProduce(slot.pending)
	}
}

// afterReplicaChange performs what a replica decided as a side effect of any
// input: answer completed acks, send an ISR change to the controller, and
// re-check parked fetches (the HW or LEO may have moved).
func (pm *partitionManager) afterReplicaChange(p *partition) { pm.settleReplicaChange(p, true) }

// settleReplicaChange is afterReplicaChange; with wake false it leaves the
// parked fetches alone, for a caller that knows nothing they watch has
// moved (afterFollowerFetch).
func (pm *partitionManager) settleReplicaChange(p *partition, wake bool) {
	pm.completeAcks(p)
	pm.groups.syncCoordinator(p)
	if ap, ok := p.replica.PendingAlterPartition(); ok {
		pm.sendAlterPartition(p, ap)
	}
	if wake {
		pm.wakeFetchWaiters(p)
	}
	pm.completeDeleteRecords(p)
}
