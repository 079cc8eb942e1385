package log

import (
	"errors"
	"fmt"
	"math"
)

// loadTrusted loads the segments wholly below the recovery point, which are
// trusted, and returns the index of the first segment to recover: the one
// holding the recovery point, or an earlier one whose files turned out
// inconsistent in a way an index rebuild cannot fix, or len(l.segments)
// when the last segment ends exactly at the recovery point
// (loadSyncedActive): nothing is left to recover.
func (l *Log) loadTrusted(recoveryPoint int64) int {
	recoverFrom := 0
	for recoverFrom+1 < len(l.segments) && l.segments[recoverFrom+1].baseOffset <= recoveryPoint {
		recoverFrom++
	}
	for i := 0; i < recoverFrom; i++ {
		// A trusted segment must end where the next one begins. Anything
		// else is a gap, or the stale tail of a cut (an earlier recovery's)
		// that was never synced: recover the segment up to the next base.
		s := l.segments[i]
		if err := l.loadTrustedSegment(s); err != nil || s.nextOffset != l.segments[i+1].baseOffset {
			return i
		}
	}
	if recoverFrom == len(l.segments)-1 && l.loadSyncedActive(l.segments[recoverFrom], recoveryPoint) == nil {
		return len(l.segments)
	}
	return recoverFrom
}

// loadSyncedActive loads the last segment unverified when it ends exactly at
// the recovery point: every byte of it was synced (a clean shutdown flushes
// every log and then checkpoints its recovery point, SPEC.md §3.4), so, as
// Kafka skips recovery after a clean shutdown, only the headers after the
// last offset index entry are read. Anything else, bytes past the recovery
// point (written after the last flush, maybe torn), an index that fails
// its check, or a file shorter than the recovery point says, returns an
// error, and the caller recovers the segment batch by batch as after a
// crash, starting from the files alone (recoverSegment rebuilds the
// indexes and forgets what this loaded).
func (l *Log) loadSyncedActive(s *segment, recoveryPoint int64) error {
	if s.indexesMissing || recoveryPoint <= s.baseOffset {
		return fmt.Errorf("segment %d: not wholly below the recovery point %d", s.baseOffset, recoveryPoint)
	}
	s.bytes = s.log.Size()
	first, err := readHeader(s.log, 0, s.bytes, l.scratch)
	if err != nil {
		return err
	}
	if first.BaseOffset != s.baseOffset {
		return fmt.Errorf("segment %d starts with offset %d", s.baseOffset, first.BaseOffset)
	}
	s.firstBatchTimestamp = first.MaxTimestamp
	if err := s.index.load(math.MaxInt64, s.bytes); err != nil {
		return err
	}
	if err := l.walkTail(s); err != nil {
		return err
	}
	if s.nextOffset != recoveryPoint {
		return fmt.Errorf("segment %d ends at offset %d, not at the recovery point %d", s.baseOffset, s.nextOffset, recoveryPoint)
	}
	if err := s.timeIndex.load(s.nextOffset); err != nil {
		return err
	}
	// The next index entry comes index.interval.bytes after the last one,
	// as if the segment had never been closed (indexBatch).
	s.bytesSinceIndexEntry = s.bytes - s.index.lastPosition
	// The active segment's time index has no final entry (becomeInactive):
	// its max timestamp is the last entry's or a later batch's, found by
	// walking the headers from the batch that entry names, as Kafka's
	// readLargestTimestamp does; a time index torn to a prefix (rebuilt by
	// an earlier recovery, never synced) is still right. The walk is short
	// when timestamps grow, and covers the segment when they never do, as
	// Kafka's.
	return s.recomputeMaxTimestamp(l.scratch)
}

// loadTrustedSegment finds a trusted segment's end and max timestamp, reading
// only the headers after the last offset index entry, and rebuilds the
// indexes if they fail the sanity check.
func (l *Log) loadTrustedSegment(s *segment) error {
	s.bytes = s.log.Size()
	first, err := readHeader(s.log, 0, s.bytes, l.scratch)
	if err != nil {
		return err
	}
	if first.BaseOffset != s.baseOffset {
		return fmt.Errorf("segment %d starts with offset %d", s.baseOffset, first.BaseOffset)
	}
	s.firstBatchTimestamp = first.MaxTimestamp
	if s.indexesMissing {
		return l.rebuildIndexes(s)
	}
	if err := s.index.load(math.MaxInt64, s.bytes); err != nil {
		return l.rebuildIndexes(s)
	}
	if err := l.walkTail(s); err != nil {
		return l.rebuildIndexes(s)
	}
	if err := s.timeIndex.load(s.nextOffset); err != nil {
		return l.rebuildIndexes(s)
	}
	// An inactive segment's time index ends with its max timestamp (the
	// entry written when it stopped being active), so it is at least the
	// tail's. Less means entries were lost: rebuild.
	if s.timeIndex.lastTimestamp < s.maxTimestamp {
		return l.rebuildIndexes(s)
	}
	// The max timestamp is the last time index entry's or a later batch's,
	// as Kafka's loadLargestTimestamp finds it: a time index that an earlier
	// recovery rewrote and a crash tore is a prefix of the true one, whose
	// last entry may come before the offset index's.
	return s.recomputeMaxTimestamp(l.scratch)
}

// walkTail reads the batches from the last offset index entry to the end,
// checking that the entry points at the batch it names, and sets nextOffset
// and the tail's max timestamp.
func (l *Log) walkTail(s *segment) error {
	expected, position := s.baseOffset, int64(0)
	if s.index.entries > 0 {
		position = s.index.lastPosition
		h, err := readHeader(s.log, position, s.bytes, l.scratch)
		if err != nil {
			return err
		}
		if h.LastOffset() != s.index.lastOffset {
			return fmt.Errorf("offset index entry %d points at a batch ending at %d", s.index.lastOffset, h.LastOffset())
		}
		expected = h.BaseOffset
	}
	var walkErr error
	err := s.walkHeaders(position, l.scratch, func(b batchAt) bool {
		if b.header.BaseOffset != expected || !s.canHold(b.header.LastOffset()) {
			walkErr = fmt.Errorf("segment %d: batch at %d has offset %d, want %d", s.baseOffset, b.position, b.header.BaseOffset, expected)
			return false
		}
		expected = b.header.NextOffset()
		if b.header.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = b.header.MaxTimestamp, b.header.LastOffset()
		}
		return true
	})
	s.nextOffset = expected
	return errors.Join(err, walkErr)
}

// rebuildIndexes rebuilds a trusted segment's indexes from its headers.
func (l *Log) rebuildIndexes(s *segment) error {
	if err := s.truncateFiles(s.log.Size()); err != nil {
		return err
	}
	s.resetStats()
	var walkErr error
	err := s.walkHeaders(0, l.scratch, func(b batchAt) bool {
		if b.header.BaseOffset != s.nextOffset || !s.canHold(b.header.LastOffset()) {
			walkErr = fmt.Errorf("segment %d: batch at %d has offset %d, want %d", s.baseOffset, b.position, b.header.BaseOffset, s.nextOffset)
			return false
		}
		walkErr = s.indexBatch(b.header, b.position)
		s.nextOffset = b.header.NextOffset()
		return walkErr == nil
	})
	if err = errors.Join(err, walkErr); err != nil {
		return err
	}
	return s.becomeInactive()
}

// recoverFrom verifies segments[first:] batch by batch, truncates at the
// first failure and deletes every later segment.
func (l *Log) recoverFrom(first int) error {
	for i := first; i < len(l.segments); i++ {
		s := l.segments[i]
		if i > 0 && s.baseOffset != l.segments[i-1].nextOffset {
			return l.removeSegments(i)
		}
		endOffset := int64(math.MaxInt64)
		if i+1 < len(l.segments) {
			endOffset = l.segments[i+1].baseOffset
		}
		complete, err := l.recoverSegment(s, endOffset)
		if err != nil {
			return err
		}
		if !complete || s.bytes == 0 {
			return l.removeSegments(i + 1)
		}
		if i < len(l.segments)-1 {
			if err := s.becomeInactive(); err != nil {
				return err
			}
		}
	}
	return nil
}

// recoverSegment verifies every batch of s from the start, rebuilding its
// indexes and assigning epochs newer than the cache's latest, as Kafka's
// LogSegment.recover does. It cuts the file after the last good batch, or at
// endOffset (the next segment's base: bytes beyond it are a stale tail), and
// reports whether the segment was whole.
func (l *Log) recoverSegment(s *segment, endOffset int64) (complete bool, err error) {
	size := s.log.Size()
	if err := s.truncateFiles(size); err != nil {
		return false, err
	}
	s.resetStats()
	position, buf := int64(0), l.scratch
	for position < size && s.nextOffset < endOffset {
		h, grown, err := readVerified(s.log, position, size, buf)
		buf = grown
		if errors.Is(err, errCorruptData) {
			break
		}
		if err != nil {
			return false, err
		}
		// BaseOffset and PartitionLeaderEpoch lie outside the CRC: check
		// what can be checked. Offsets are contiguous, and leader epochs
		// never decrease along a log.
		if h.BaseOffset != s.nextOffset || !s.canHold(h.LastOffset()) || position+h.TotalBytes() > positionMax ||
			h.PartitionLeaderEpoch < l.epochs.LatestEpoch() {
			break
		}
		if err := s.indexBatch(h, position); err != nil {
			return false, err
		}
		if h.PartitionLeaderEpoch > l.epochs.LatestEpoch() {
			l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		}
		s.nextOffset = h.NextOffset()
		position += h.TotalBytes()
	}
	if position < size {
		if err := s.log.Truncate(position); err != nil {
			return false, fmt.Errorf("truncate %s at %d: %w", s.log.Path(), position, err)
		}
		s.truncated = true // the next flush makes the cut durable
	}
	s.bytes = position
	return position == size || s.nextOffset == endOffset, nil
}
