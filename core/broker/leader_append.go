package broker

// The leader's append (Kafka's Partition.appendRecordsToLeader): one type,
// the hosted partition, takes a produced batch through every step in one
// event-loop step, so that no step can be left out or reordered:
//
//  1. the cheap checks: the log has not failed, the batch is within the
//     topic's max.message.bytes, and the replica admits the produce (it
//     leads, the acks value is valid, for acks=all the ISR is at least
//     min.insync.replicas and the purgatory has room);
//  2. the batch's own validation (core/batch: framing, CRC, decompression,
//     every record), finished from the pre-check's verdict when there is
//     one;
//  3. the idempotent producer's check (a duplicate is answered with the
//     original offsets and appends nothing);
//  4. the append, in the codec the topic stores, with the producer state
//     snapshotted at a segment roll;
//  5. the producer state's update;
//  6. the replica's update (replica.OnLeaderAppend), which registers an
//     acks=all produce's waiter and may advance the HW.
//
// The partition manager looks the partition up, keeps where each answer
// goes and performs what the replica decides (api_00_produce.go).

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/producer"
	"strand/core/replica"
)

// leaderAppend is one produced batch for the leader to take.
type leaderAppend struct {
	records []byte
	acks    int16
	// limits are the topic's produce rules, at the append's wall clock;
	// storageCodec is the codec the topic's compression.type stores
	// batches in, when recompress (storedCodec).
	limits       batch.ProduceLimits
	storageCodec batch.Codec
	recompress   bool
	// precheck is the batch's pre-check (PrecheckView.Precheck), or nil:
	// then the batch is checked here in full, within budget.
	precheck *batchPrecheck
	budget   *batch.DecompressionBudget
	// requestID names an acks=all produce's waiter in the replica
	// (replica.AckResult), which times out at deadlineMs; nowMs is the
	// monotonic clock.
	requestID  uint64
	deadlineMs int64
	nowMs      int64
}

// leaderAppended is what the leader did with a batch it took.
type leaderAppended struct {
	// result has the batch's offsets, append time and the log start; a
	// duplicate's are the original batch's.
	result log.AppendResult
	// awaitsHW is set when the replica holds an acks=all waiter for it
	// (requestID); a duplicate whose original the HW has passed has none.
	awaitsHW bool
	// duplicate is set for a retry of a batch the log holds: nothing was
	// appended.
	duplicate bool
}

// appendRefused is why the leader refused a batch: a Kafka error code and,
// for a batch that failed validation, the message naming why
// (ErrorMessage, v8+).
type appendRefused struct {
	code    int16
	message string
}

// appendRecordsToLeader takes one produced batch through the leader's
// steps (the file comment). recompressedOnLoop reports whether it had to
// recompress the batch itself (storedForm), whatever came of the append.
func (p *partition) appendRecordsToLeader(in leaderAppend) (out leaderAppended, refused *appendRefused, recompressedOnLoop bool) {
	if p.storageFailed() {
		return out, &appendRefused{code: kerr.KafkaStorageError.Code}, false
	}
	if len(in.records) > in.limits.BatchBytesMax {
		return out, &appendRefused{code: kerr.MessageTooLarge.Code}, false
	}
	epoch, err := p.replica.AdmitProduce(in.acks)
	if err != nil {
		return out, &appendRefused{code: errorCodeOf(err)}, false
	}
	info, refused := validateProduced(in)
	if refused != nil {
		return out, refused, false
	}
	if err := p.syncProducers(); err != nil {
		return out, &appendRefused{code: kerr.KafkaStorageError.Code}, false
	}
	verdict, err := p.producers.Check(info.Header)
	if err != nil {
		var perr *producer.Error
		if errors.As(err, &perr) {
			return out, &appendRefused{code: perr.Code.Code}, false
		}
		return out, &appendRefused{code: kerr.UnknownServerError.Code}, false
	}
	if verdict.Kind == producer.Duplicate {
		// A retry of a batch already in the log: nothing is appended, the
		// answer carries the original offsets (Kafka's
		// DUPLICATE_SEQUENCE_NUMBER is internal), and acks=all waits for
		// the original batch to commit.
		original := verdict.Original
		out.duplicate = true
		out.result = log.AppendResult{BaseOffset: original.FirstOffset(), LastOffset: original.LastOffset,
			AppendTimeMs: original.TimestampMs, LogStartOffset: p.log.LogStartOffset()}
		if in.acks != replica.AcksAll || out.result.LastOffset < p.replica.HighWatermark() {
			return out, nil, false // nothing appended, nothing more to wait for
		}
	} else {
		stored, notStored, onLoop := storedForm(in, info)
		if notStored != nil {
			return out, notStored, onLoop
		}
		recompressedOnLoop = onLoop
		batch.SetMaxTimestamp(stored, in.limits.TimestampType, info.MaxTimestamp)
		// CheckProduced or Finish verified the CRC, recompressed computes
		// its own, and SetMaxTimestamp recomputes it if it changes the batch.
		if out.result, err = p.log.AppendCheckedAsLeader(stored, epoch, in.limits.NowMs); err != nil {
			return out, &appendRefused{code: errorCodeOf(err)}, recompressedOnLoop
		}
		if out.result.Rolled {
			// A roll: snapshot the state as it was before this batch, at
			// the new segment's base offset, as Kafka does.
			p.snapshots.Take(p.producers, nil)
		}
		h := info.Header
		h.MaxTimestamp = info.MaxTimestamp
		if err := p.producers.Update(h, out.result.BaseOffset); err != nil {
			panic("broker: producer state behind the log after an append: " + err.Error())
		}
	}
	update := replica.LeaderAppend{LastOffset: out.result.LastOffset, Acks: in.acks, RequestID: in.requestID, DeadlineMs: in.deadlineMs}
	if err := p.replica.OnLeaderAppend(update, in.nowMs); err != nil {
		panic("broker: OnLeaderAppend refused an admitted append: " + err.Error())
	}
	out.awaitsHW = in.acks == replica.AcksAll
	return out, nil, recompressedOnLoop
}

// validateProduced checks the batch in full, or finishes its pre-check.
func validateProduced(in leaderAppend) (batch.ProducedInfo, *appendRefused) {
	var info batch.ProducedInfo
	var err error
	if in.precheck != nil {
		info, err = in.precheck.check.Finish(in.records, in.limits, in.budget)
	} else {
		info, err = batch.CheckProducedWithin(in.records, in.limits, in.budget)
	}
	if err == nil {
		return info, nil
	}
	var berr *batch.Error
	if !errors.As(err, &berr) {
		return info, &appendRefused{code: kerr.CorruptMessage.Code}
	}
	refused := &appendRefused{code: berr.Code}
	if berr.Code == kerr.InvalidRecord.Code || berr.Code == kerr.InvalidTimestamp.Code || berr.Code == kerr.MessageTooLarge.Code {
		// Kafka explains a record that failed validation (its
		// RecordValidationException) in ErrorMessage, v8+; a batch too
		// large says which bound it passed, the request's decompression
		// budget (Strand's own) included.
		refused.message = berr.Error()
	}
	return info, refused
}

// storedForm returns the checked batch as the topic stores it: in the
// codec its compression.type names now, at append time. That is the
// records themselves when the topic keeps the producer's codec or names
// the one sent; otherwise the pre-check's recompressed copy
// when it is in that codec, or a copy recompressed here on the loop
// (onLoop: the request was not pre-checked, or the topic's codec changed
// since its pre-check). A recompressed batch must fit max.message.bytes
// too, as Kafka re-checks the size after recompressing; the answer is then
// an error code. The pre-check's size decides without its copy, which it
// keeps only within the broker's message.max.bytes. Decompressing the
// records again on the loop must fit the request's decompression budget
// (strand.produce.request.decompressed.bytes.max), or the batch is refused
// MESSAGE_TOO_LARGE naming it.
func storedForm(in leaderAppend, info batch.ProducedInfo) (stored []byte, refused *appendRefused, onLoop bool) {
	codec := in.storageCodec
	if !in.recompress || codec == info.Header.Codec() {
		return in.records, nil, false
	}
	if r := in.precheck.recompressionTo(codec); r != nil {
		if r.batchBytes > in.limits.BatchBytesMax {
			return nil, &appendRefused{code: kerr.MessageTooLarge.Code}, false
		}
		if r.stored != nil {
			return r.stored, nil, false
		}
	}
	// Decompressing the records again costs the request's budget what
	// checking them did, as every decompression of the request does.
	if err := in.budget.ChargeAgain(info.DecompressedBytes); err != nil {
		return nil, &appendRefused{code: kerr.MessageTooLarge.Code, message: err.Error()}, false
	}
	stored, err := recompressed(in.records, codec, in.limits.DecompressedBytesMax)
	if err != nil {
		return nil, &appendRefused{code: kerr.CorruptMessage.Code}, true
	}
	if len(stored) > in.limits.BatchBytesMax {
		return nil, &appendRefused{code: kerr.MessageTooLarge.Code}, true
	}
	return stored, nil, true
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
	return batch.Assemble(h, packed), nil
}
