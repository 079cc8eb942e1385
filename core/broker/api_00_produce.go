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
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/log"
	"strand/core/producer"
	"strand/core/replica"
)

// pendingProduce is a produce request whose acks=all partitions wait for
// the HW.
type pendingProduce struct {
	conn      env.ConnID
	corr      int32
	timeoutMs int64
	resp      *kmsg.ProduceResponse
	remaining int
	// onDone, when set, takes the place of the reply: the produce is a
	// group coordinator's append (coordinators.go), not a client's.
	onDone func()
}

// produceSlot is one waiting partition of a pendingProduce: where its answer
// goes.
type produceSlot struct {
	pending *pendingProduce
	part    *kmsg.ProduceResponseTopicPartition
	// timeout expires the wait after the request's TimeoutMillis.
	timeout env.Timer
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
	pending := &pendingProduce{conn: conn, corr: hdr.CorrelationID, resp: resp, remaining: 1, timeoutMs: int64(max(req.TimeoutMillis, 0))}
	acksValid := validAcks(req.Acks)
	budget := prechecked.decompressionBudget(pm.cfg.Broker.Limits.ProduceRequestDecompressedBytesMax)
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for j, tp := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = tp.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
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

// produceOne validates and appends one partition's batch. For acks=all
// the slot is registered and answered later (pending.remaining counts it);
// otherwise the slot is filled now. It returns the partition's error code.
// The cheap checks (hosted, storage, size, leadership and acks) come
// before the batch's own; a batch checked here, not by the pre-check,
// decompresses within the request's budget.
func (pm *partitionManager) produceOne(key partitionKey, req *kmsg.ProduceRequest, records []byte, slot *produceSlot, budget *batch.DecompressionBudget) int16 {
	p := pm.partitions[key]
	if p == nil {
		return pm.notHostedCode(key)
	}
	if p.storageFailed() {
		return kerr.KafkaStorageError.Code
	}
	limits := pm.produceLimits(key.topic)
	if len(records) > limits.BatchBytesMax {
		return kerr.MessageTooLarge.Code
	}
	epoch, err := p.replica.AdmitProduce(req.Acks)
	if err != nil {
		return errorCodeOf(err)
	}
	var info batch.ProducedInfo
	precheck := slot.precheck
	// A waiting slot keeps nothing of the request (handleProduce).
	slot.precheck = nil
	if precheck != nil {
		info, err = precheck.check.Finish(records, limits, budget)
	} else {
		info, err = batch.CheckProducedWithin(records, limits, budget)
	}
	if err != nil {
		var berr *batch.Error
		if errors.As(err, &berr) {
			if berr.Code == kerr.InvalidRecord.Code || berr.Code == kerr.InvalidTimestamp.Code || berr.Code == kerr.MessageTooLarge.Code {
				// Kafka explains a record that failed validation (its
				// RecordValidationException) in ErrorMessage, v8+; a
				// batch too large says which bound it passed, the
				// request's decompression budget (Strand's own) included.
				msg := berr.Error()
				slot.part.ErrorMessage = &msg
			}
			return berr.Code
		}
		return kerr.CorruptMessage.Code
	}
	if err := pm.syncProducers(p); err != nil {
		return kerr.KafkaStorageError.Code
	}
	verdict, err := p.producers.Check(info.Header)
	if err != nil {
		var perr *producer.Error
		if errors.As(err, &perr) {
			return perr.Code.Code
		}
		return kerr.UnknownServerError.Code
	}
	var res log.AppendResult
	if verdict.Kind == producer.Duplicate {
		// A retry of a batch already in the log: nothing is appended, the
		// answer carries the original offsets (Kafka's
		// DUPLICATE_SEQUENCE_NUMBER is internal), and acks=all waits for
		// the original batch to commit.
		original := verdict.Original
		res = log.AppendResult{BaseOffset: original.FirstOffset(), LastOffset: original.LastOffset,
			AppendTimeMs: original.TimestampMs, LogStartOffset: p.log.LogStartOffset()}
	} else {
		stored, code := pm.storedForm(key.topic, records, info.Header.Codec(), precheck, limits)
		if code != 0 {
			return code
		}
		batch.SetMaxTimestamp(stored, limits.TimestampType, info.MaxTimestamp)
		// CheckProduced or Finish verified the CRC, recompressed computes
		// its own, and SetMaxTimestamp recomputes it if it changes the batch.
		if res, err = p.log.AppendCheckedAsLeader(stored, epoch, limits.NowMs); err != nil {
			return errorCodeOf(err)
		}
		if res.Rolled {
			// A roll: snapshot the state as it was before this batch, at
			// the new segment's base offset, as Kafka does.
			p.snapshots.Take(p.producers, nil)
		}
		h := info.Header
		h.MaxTimestamp = info.MaxTimestamp
		if err := p.producers.Update(h, res.BaseOffset); err != nil {
			panic("broker: producer state behind the log after an append: " + err.Error())
		}
	}
	slot.part.BaseOffset, slot.part.LogStartOffset = res.BaseOffset, res.LogStartOffset
	slot.p, slot.lastOffset = p, res.LastOffset
	if limits.TimestampType == batch.LogAppendTime {
		slot.part.LogAppendTime = res.AppendTimeMs
	}
	if verdict.Kind == producer.Duplicate && (req.Acks != replica.AcksAll || res.LastOffset < p.replica.HighWatermark()) {
		if req.Acks == replica.AcksLeader {
			pm.awaitDurable(slot)
		}
		return 0 // nothing appended, nothing more to wait for
	}
	pm.nextRequestID++
	id := pm.nextRequestID
	now := pm.nowMs()
	timeoutMs := slot.pending.timeoutMs
	if req.Acks == replica.AcksAll {
		pm.produceWaits[id] = slot
		slot.pending.remaining++
		slot.timeout = pm.after(timeoutMs, func() {
			p.replica.ExpireAcks(pm.nowMs())
			pm.afterReplicaChange(p)
		})
	}
	leaderAppend := replica.LeaderAppend{LastOffset: res.LastOffset, Acks: req.Acks, RequestID: id, DeadlineMs: now + timeoutMs}
	if err := p.replica.OnLeaderAppend(leaderAppend, now); err != nil {
		panic("broker: OnLeaderAppend refused an admitted append: " + err.Error())
	}
	if req.Acks == replica.AcksLeader {
		pm.awaitDurable(slot)
	}
	pm.afterReplicaChange(p)
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

// completeAcks answers the acks=all produces the replica has completed.
func (pm *partitionManager) completeAcks(results []replica.AckResult) {
	for _, r := range results {
		slot, ok := pm.produceWaits[r.RequestID]
		if !ok {
			continue
		}
		delete(pm.produceWaits, r.RequestID)
		if r.Error != 0 {
			slot.part.ErrorCode = r.Error
			slot.part.BaseOffset = -1
		}
		if r.Error == 0 && pm.parkUntilDurable(slot) {
			continue // the same timeout still runs
		}
		slot.timeout.Stop()
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
	pm.completeAcks(p.replica.TakeAckResults())
	pm.groups.syncCoordinator(p)
	if ap, ok := p.replica.PendingAlterPartition(); ok {
		pm.sendAlterPartition(p, ap)
	}
	if wake {
		pm.wakeFetchWaiters(p)
	}
	pm.completeDeleteRecords(p)
}

// storedForm returns the checked batch records as the topic stores it: in
// the codec its compression.type names now, at append time. That is
// records itself when the topic keeps the producer's codec or names the
// one sent (sentCodec); otherwise the pre-check's recompressed copy when it
// is in that codec, or a copy recompressed here on the loop (the request
// was not pre-checked, or the topic's codec changed since its pre-check).
// A recompressed batch must fit max.message.bytes too, as Kafka re-checks
// the size after recompressing; the answer is then an error code. The
// pre-check's size decides without its copy, which it keeps only within
// the broker's message.max.bytes.
func (pm *partitionManager) storedForm(topic string, records []byte, sentCodec batch.Codec, precheck *batchPrecheck, limits batch.ProduceLimits) ([]byte, int16) {
	codec, ok := storedCodec(pm.topicConfig(topic).CompressionType)
	if !ok || codec == sentCodec {
		return records, 0
	}
	if r := precheck.recompressionTo(codec); r != nil {
		if r.batchBytes > limits.BatchBytesMax {
			return nil, kerr.MessageTooLarge.Code
		}
		if r.stored != nil {
			return r.stored, 0
		}
	}
	pm.loopRecompressions++
	stored, err := recompressed(records, codec, limits.DecompressedBytesMax)
	if err != nil {
		return nil, kerr.CorruptMessage.Code
	}
	if len(stored) > limits.BatchBytesMax {
		return nil, kerr.MessageTooLarge.Code
	}
	return stored, 0
}

// recompressed returns a copy of the checked batch b with its records stored
// under codec, as Kafka's LogValidator rewrites a batch whose codec differs
// from the topic's compression.type: every header field but the codec bits,
// the length and the CRC is kept, so offsets, timestamps and the producer's
// sequence are unchanged. b was decompressed within decompressedBytesMax
// when it was checked, so decompressing again fails only on a broken
// invariant, reported as an error.
func recompressed(b []byte, codec batch.Codec, decompressedBytesMax int) ([]byte, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("recompress: %w", err)
	}
	raw, err := batch.Decompress(h.Codec(), b[batch.HeaderBytes:], decompressedBytesMax)
	if err != nil {
		return nil, fmt.Errorf("recompress from %s: %w", h.Codec(), err)
	}
	packed, err := batch.Compress(codec, raw)
	if err != nil {
		return nil, fmt.Errorf("recompress to %s: %w", codec, err)
	}
	h.Attributes = h.Attributes&^batch.AttrCodecMask | int16(codec)
	out := batch.Assemble(h, packed)
	return out, nil
}
