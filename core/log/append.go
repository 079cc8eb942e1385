package log

import (
	"fmt"

	"strand/core/batch"
)

// AppendResult describes an append.
type AppendResult struct {
	// BaseOffset and LastOffset are the offsets of the first and last
	// records appended.
	BaseOffset int64
	LastOffset int64
	// AppendTimeMs is the wall time the append was made at, what a
	// LogAppendTime topic reports to the producer.
	AppendTimeMs int64
	// LogStartOffset is the log start offset after the append, for the
	// produce response.
	LogStartOffset int64
	// Rolled is set when the append started a new segment (before its
	// first batch, or before any of a follower's batches): the producer
	// state is snapshotted at a roll, as Kafka does, and the caller learns
	// of it here rather than by counting segments.
	Rolled bool
}

// AppendAsLeader appends b, which must be exactly one batch already checked
// by the caller against record-level rules. The log still verifies the
// framing (batch.Verify: lengths, magic, CRC-32C, count), then stamps
// BaseOffset = LEO and PartitionLeaderEpoch = leaderEpoch in place (both lie
// outside the CRC) and appends the very slice: the log takes ownership of b.
func (l *Log) AppendAsLeader(b []byte, leaderEpoch int32, nowMs int64) (AppendResult, error) {
	return l.appendAsLeader(b, leaderEpoch, nowMs, batch.Verify)
}

// AppendCheckedAsLeader is AppendAsLeader for a batch whose CRC-32C the
// caller has verified since it last changed, other than by
// batch.SetMaxTimestamp, which recomputes it: the produce path, whose
// batch.CheckProduced or Precheck.Finish ran batch.Verify already. The log
// checks everything else batch.Verify does (batch.VerifyExceptCRC), so
// the CRC is computed once per produced batch instead of twice.
func (l *Log) AppendCheckedAsLeader(b []byte, leaderEpoch int32, nowMs int64) (AppendResult, error) {
	return l.appendAsLeader(b, leaderEpoch, nowMs, batch.VerifyExceptCRC)
}

// appendAsLeader is AppendAsLeader with the batch's check, verify.
func (l *Log) appendAsLeader(b []byte, leaderEpoch int32, nowMs int64, verify func([]byte) (batch.Header, error)) (AppendResult, error) {
	if l.failed != nil {
		return AppendResult{}, l.failed
	}
	if err := l.checkTrustedAppend(); err != nil {
		return AppendResult{}, err
	}
	h, err := verify(b)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append to %s: %w: %w", l.dir, ErrInvalidBatch, err)
	}
	if h.TotalBytes() > l.cfg.SegmentBytes {
		return AppendResult{}, fmt.Errorf("append to %s: batch of %d bytes, segment.bytes %d: %w",
			l.dir, h.TotalBytes(), l.cfg.SegmentBytes, ErrBatchTooLarge)
	}
	if leaderEpoch < 0 || leaderEpoch < l.epochs.LatestEpoch() {
		return AppendResult{}, fmt.Errorf("append to %s: leader epoch %d is older than the log's latest epoch %d",
			l.dir, leaderEpoch, l.epochs.LatestEpoch())
	}
	base := l.LogEndOffset()
	batch.SetBaseOffset(b, base)
	batch.SetPartitionLeaderEpoch(b, leaderEpoch)
	h.BaseOffset, h.PartitionLeaderEpoch = base, leaderEpoch
	rolled, err := l.appendBatch(b, h, nowMs)
	if err != nil {
		return AppendResult{}, err
	}
	if l.epochs.assign(leaderEpoch, base) {
		l.persistEpochs(nil)
	}
	l.maybeFlushByMessages(int64(h.LastOffsetDelta) + 1)
	return AppendResult{BaseOffset: base, LastOffset: h.LastOffset(), AppendTimeMs: nowMs,
		LogStartOffset: l.logStartOffset, Rolled: rolled}, l.failed
}

// AppendAsFollower appends b, one or more batches whose offsets the leader
// assigned: they must start exactly at the LEO and be contiguous. Every batch
// is verified before any is written, so a bad fetch response appends
// nothing. Epochs found in the batches enter the epoch cache. The log takes
// ownership of b. An empty b appends nothing.
func (l *Log) AppendAsFollower(b []byte, nowMs int64) (AppendResult, error) {
	if l.failed != nil {
		return AppendResult{}, l.failed
	}
	if err := l.checkTrustedAppend(); err != nil {
		return AppendResult{}, err
	}
	batches, err := l.splitFollowerBatches(b)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append to %s: %w", l.dir, err)
	}
	result := AppendResult{BaseOffset: l.LogEndOffset(), LastOffset: l.LogEndOffset() - 1, AppendTimeMs: nowMs}
	var records int64
	for _, at := range batches {
		end := at.position + at.header.TotalBytes()
		rolled, err := l.appendBatch(b[at.position:end:end], at.header, nowMs)
		if err != nil {
			return AppendResult{}, err
		}
		result.Rolled = result.Rolled || rolled
		l.epochs.assign(at.header.PartitionLeaderEpoch, at.header.BaseOffset)
		records += int64(at.header.LastOffsetDelta) + 1
		result.LastOffset = at.header.LastOffset()
	}
	l.persistEpochs(nil)
	l.maybeFlushByMessages(records)
	result.LogStartOffset = l.logStartOffset
	return result, l.failed
}

// splitFollowerBatches verifies every batch of b and their offsets.
func (l *Log) splitFollowerBatches(b []byte) ([]batchAt, error) {
	var batches []batchAt
	expected := l.LogEndOffset()
	for position := int64(0); position < int64(len(b)); {
		rest := b[position:]
		if len(rest) < batch.HeaderBytes {
			return nil, fmt.Errorf("%w: %d trailing bytes at %d, shorter than a batch header", ErrInvalidBatch, len(rest), position)
		}
		header, _ := batch.ParseHeader(rest) // length checked above
		if header.Length < 0 || header.TotalBytes() > int64(len(rest)) {
			return nil, fmt.Errorf("%w: batch at %d claims %d bytes, %d remain", ErrInvalidBatch, position, header.TotalBytes(), len(rest))
		}
		h, err := batch.Verify(rest[:header.TotalBytes()])
		if err != nil {
			return nil, fmt.Errorf("%w: batch at byte %d: %w", ErrInvalidBatch, position, err)
		}
		if h.BaseOffset != expected {
			return nil, fmt.Errorf("%w: batch at byte %d starts at offset %d, want %d", ErrUnexpectedOffset, position, h.BaseOffset, expected)
		}
		if h.TotalBytes() > l.cfg.SegmentBytes {
			return nil, fmt.Errorf("batch at offset %d of %d bytes, segment.bytes %d: %w", h.BaseOffset, h.TotalBytes(), l.cfg.SegmentBytes, ErrBatchTooLarge)
		}
		batches = append(batches, batchAt{header: h, position: position})
		expected = h.NextOffset()
		position += h.TotalBytes()
	}
	return batches, nil
}

// appendBatch rolls if needed and appends one stamped, verified batch. It
// reports whether it rolled.
func (l *Log) appendBatch(b []byte, h batch.Header, nowMs int64) (rolled bool, err error) {
	if l.shouldRoll(h, nowMs) { // never for an empty segment, the one roll keeps
		if err := l.roll(nowMs); err != nil {
			return false, err
		}
		rolled = true
	}
	if err := l.active().append(b, h); err != nil {
		return rolled, l.fail(err)
	}
	return rolled, nil
}

// shouldRoll is Kafka's LogSegment.shouldRoll: roll before this batch if it
// would push the segment past segment.bytes, if segment.ms has passed since
// the segment's first batch (by record timestamps, or by the clock when
// batches carry none), if an index is full, or if the batch's offsets do not
// fit the indexes' 32-bit relative offsets. An empty segment never rolls.
func (l *Log) shouldRoll(h batch.Header, nowMs int64) bool {
	s := l.active()
	if s.bytes == 0 {
		return false
	}
	waitedMs := nowMs - s.createdMs
	if s.firstBatchTimestamp >= 0 {
		waitedMs = h.MaxTimestamp - s.firstBatchTimestamp
	}
	return s.bytes > l.cfg.SegmentBytes-h.TotalBytes() ||
		waitedMs > l.cfg.SegmentMs ||
		s.index.isFull() || s.timeIndex.isFull() ||
		!s.canHold(h.LastOffset())
}

// Roll closes the active segment and starts a new one at the LEO, unless the
// active segment is empty. As Kafka does on every roll, it then flushes the
// old segment in the background.
func (l *Log) Roll(nowMs int64) error {
	if l.failed != nil {
		return l.failed
	}
	return l.roll(nowMs)
}

func (l *Log) roll(nowMs int64) error {
	old := l.active()
	if old.bytes == 0 {
		return nil
	}
	if err := old.becomeInactive(); err != nil {
		return l.fail(err)
	}
	s, err := createSegment(l.disk, l.dir, l.LogEndOffset(), l.cfg, nowMs)
	if err != nil {
		return l.fail(err)
	}
	l.segments = append(l.segments, s)
	l.flush.dirDirty = true
	l.checkInvariants()
	l.Flush(s.baseOffset, nil)
	return nil
}
