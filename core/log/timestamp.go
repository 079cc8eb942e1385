package log

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
)

// TimestampOffset is a record found by timestamp for ListOffsets: its
// offset, its timestamp, and the leader epoch of its batch (-1 for a batch
// written without one), which Kafka returns with it (KIP-320 clients check
// their position against it).
type TimestampOffset struct {
	Offset      int64
	TimestampMs int64
	LeaderEpoch int32
}

// OffsetForTimestamp answers ListOffsets by timestamp as Kafka's
// LogSegment.findOffsetByTimestamp does: the first record, at or after the
// log start offset, whose timestamp >= timestampMs. The segments' max
// timestamps, the time index and a header scan find the first batch whose max
// timestamp is that recent; its records, decompressed within
// decompressedBytesMax, give the record. found is false when no record is that
// recent.
//
// A batch that does not decompress within the bound (the topic's
// max.message.bytes was lowered after it was written) is answered at batch
// granularity instead, its first offset and max timestamp: a consumer seeking
// there reads at most one batch of earlier records.
func (l *Log) OffsetForTimestamp(timestampMs int64, decompressedBytesMax int) (TimestampOffset, bool, error) {
	if l.failed != nil {
		return TimestampOffset{}, false, l.failed
	}
	for _, s := range l.segments {
		if s.nextOffset <= l.logStartOffset || s.maxTimestamp < timestampMs {
			continue
		}
		answer, found, err := l.searchSegmentByTime(s, timestampMs, decompressedBytesMax)
		if err != nil || found {
			return answer, found, err
		}
	}
	return TimestampOffset{}, false, nil
}

// searchSegmentByTime is OffsetForTimestamp within s: from the time index's
// entry on, each batch ending at or after the log start offset whose max
// timestamp >= timestampMs is searched record by record (Kafka's
// FileRecords.searchForTimestamp), until one holds the record.
func (l *Log) searchSegmentByTime(s *segment, timestampMs int64, decompressedBytesMax int) (answer TimestampOffset, found bool, err error) {
	_, indexedOffset, err := s.timeIndex.lookup(timestampMs)
	if err != nil {
		return TimestampOffset{}, false, l.fail(err)
	}
	start, err := s.lookup(max(indexedOffset, l.logStartOffset))
	if err != nil {
		return TimestampOffset{}, false, l.fail(err)
	}
	var searchErr error
	err = s.walkFrom(start, l.scratch, func(b batchAt) bool {
		if b.header.LastOffset() < l.logStartOffset || b.header.MaxTimestamp < timestampMs {
			return true
		}
		answer, found, searchErr = l.recordInBatch(s, b, timestampMs, l.logStartOffset, decompressedBytesMax)
		return !found && searchErr == nil
	})
	if err != nil {
		return TimestampOffset{}, false, l.fail(err)
	}
	return answer, found, searchErr
}

// recordInBatch reads the batch at b (of segment s) and finds in it the first
// record at or above minOffset with a timestamp >= timestampMs. The batch's
// max timestamp is >= timestampMs, so such a record exists unless minOffset
// passes it; a batch over the decompression bound is answered at batch
// granularity (OffsetForTimestamp).
func (l *Log) recordInBatch(s *segment, b batchAt, timestampMs, minOffset int64, decompressedBytesMax int) (TimestampOffset, bool, error) {
	h, buf, err := readVerified(s.log, b.position, s.bytes, l.scratch)
	if err != nil {
		return TimestampOffset{}, false, l.fail(fmt.Errorf("segment %d: %w", s.baseOffset, err))
	}
	whole := buf[:h.TotalBytes()]
	answer := TimestampOffset{LeaderEpoch: h.PartitionLeaderEpoch}
	offset, timestamp, found, err := batch.FindRecordByTimestamp(whole, timestampMs, minOffset, decompressedBytesMax)
	var berr *batch.Error
	switch {
	case errors.As(err, &berr) && berr.Code == kerr.MessageTooLarge.Code:
		answer.Offset, answer.TimestampMs = max(h.BaseOffset, minOffset), h.MaxTimestamp
		return answer, true, nil
	case err != nil:
		// The CRC holds, so these are the bytes a leader sent, but their
		// records do not decode (a follower checks only the CRC). The
		// question fails, not the log: the batch reads back as it came.
		return TimestampOffset{}, false, fmt.Errorf("segment %d: batch at %d: %w: %w", s.baseOffset, h.BaseOffset, ErrInvalidBatch, err)
	}
	answer.Offset, answer.TimestampMs = offset, timestamp
	return answer, found, nil
}

// MaxTimestamp answers ListOffsets with MAX_TIMESTAMP (KIP-734) as Kafka
// does since KAFKA-16310: the first record carrying the largest timestamp, in
// the first batch carrying it, of the first segment (holding an offset at or
// above the log start offset) whose max timestamp is the largest. found is
// false when the log holds no timestamped batch. Records are decompressed
// within decompressedBytesMax, as in OffsetForTimestamp.
func (l *Log) MaxTimestamp(decompressedBytesMax int) (TimestampOffset, bool, error) {
	if l.failed != nil {
		return TimestampOffset{}, false, l.failed
	}
	var latest *segment
	for _, s := range l.segments {
		if s.nextOffset > l.logStartOffset && s.maxTimestamp > noTimestamp && (latest == nil || s.maxTimestamp > latest.maxTimestamp) {
			latest = s
		}
	}
	if latest == nil {
		return TimestampOffset{}, false, nil
	}
	b, ok, err := latest.findBatch(latest.offsetOfMaxTimestamp, l.scratch)
	if err != nil {
		return TimestampOffset{}, false, l.fail(err)
	}
	if !ok {
		// The batch is gone (the cleaner dropped its records) while the
		// segment keeps its max timestamp, as Kafka's does: answer the
		// offset the segment remembers.
		return TimestampOffset{Offset: latest.offsetOfMaxTimestamp, TimestampMs: latest.maxTimestamp, LeaderEpoch: -1}, true, nil
	}
	return l.recordInBatch(latest, b, latest.maxTimestamp, math.MinInt64, decompressedBytesMax)
}
