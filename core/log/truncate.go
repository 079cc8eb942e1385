package log

import (
	"fmt"
)

// TruncateTo removes every batch whose last offset >= offset, for a follower
// whose log diverged from the leader's. As in Kafka's LogSegment.truncateTo,
// truncation happens at batch boundaries: a batch holding offset goes whole.
// Unlike Kafka, which then sets the LEO to offset even when that cut a batch,
// the LEO becomes the end of the last remaining batch, so that the LEO always
// equals the last batch's next offset. Later segments are deleted, indexes
// trimmed, the epoch cache truncated from the end, and the recovery point
// lowered to the new LEO. An offset at or beyond the LEO changes nothing; one
// below the first segment truncates fully and starts there.
func (l *Log) TruncateTo(offset int64) error {
	if l.failed != nil {
		return l.failed
	}
	if offset < 0 {
		return fmt.Errorf("truncate %s to %d: negative offset", l.dir, offset)
	}
	if offset >= l.LogEndOffset() {
		return nil
	}
	if offset < l.segments[0].baseOffset {
		return l.TruncateFullyAndStartAt(offset, l.segments[0].createdMs)
	}
	i := l.segmentFor(offset)
	if err := l.removeSegments(i + 1); err != nil {
		return l.fail(err)
	}
	s := l.active()
	at, found, err := s.findBatch(offset, l.scratch)
	if err != nil {
		return l.fail(err)
	}
	switch {
	case found && at.position == 0 && s.pins > 0:
		// Emptying a pinned file would cut it under a send: replace the
		// segment with a new file instead (pin.go).
		if err := l.removeSegments(len(l.segments) - 1); err != nil {
			return l.fail(err)
		}
		if err := l.startAt(s.baseOffset, s.createdMs); err != nil {
			return l.fail(err)
		}
	case found:
		if err := l.truncateSegment(s, at); err != nil {
			return l.fail(err)
		}
	}
	l.afterTruncation()
	if s := l.active(); s.cutPending {
		// The file still holds the cut tail: later batches go to a new
		// segment at once, whose base offset also tells a reopen where the
		// stale tail starts (recoverSegment's endOffset).
		return l.roll(s.createdMs)
	}
	return nil
}

// truncateSegment cuts s before the batch at, as Kafka does: indexes first,
// then the file (once unpinned, if a region pins it), then the max timestamp
// is recomputed from what is left.
func (l *Log) truncateSegment(s *segment, at batchAt) error {
	if err := s.index.truncateTo(at.header.BaseOffset); err != nil {
		return err
	}
	if err := s.timeIndex.truncateTo(at.header.BaseOffset); err != nil {
		return err
	}
	if s.pins > 0 {
		s.cutPending = true // the last unpin cuts the file (pin.go)
	} else if err := s.log.Truncate(at.position); err != nil {
		return fmt.Errorf("truncate %s at %d: %w", s.log.Path(), at.position, err)
	}
	s.bytes, s.nextOffset = at.position, at.header.BaseOffset
	s.truncated = true
	s.bytesSinceIndexEntry = 0
	if s.bytes == 0 {
		s.resetStats()
		return nil
	}
	return s.recomputeMaxTimestamp(l.scratch)
}

// afterTruncation settles what depends on the LEO after it moved back.
func (l *Log) afterTruncation() {
	l.abortCleaning()
	l.clean.point = min(l.clean.point, l.LogEndOffset())
	leo := l.LogEndOffset()
	l.recoveryPoint = min(l.recoveryPoint, leo)
	l.logStartOffset = min(l.logStartOffset, leo)
	l.flush.truncations++
	l.epochs.truncateFromEnd(leo)
	l.persistEpochs(nil)
	l.lowerCheckpointedRecoveryPoint()
	l.checkInvariants()
}

// lowerCheckpointedRecoveryPoint asks for the lowered recovery point to be
// checkpointed at once, if the checkpoint on disk may hold a higher one, so
// that appends wait for it as little as possible (checkTrustedAppend).
func (l *Log) lowerCheckpointedRecoveryPoint() {
	if l.checkpointTrust != nil && l.recoveryPoint < l.checkpointTrust() {
		l.checkpointLowered()
	}
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset, for a follower whose fetch offset fell below the leader's log start
// offset. The epoch cache is cleared, as Kafka clears it. The recovery point
// does not move up to offset: the next flush, which syncs the directory,
// moves it.
func (l *Log) TruncateFullyAndStartAt(offset int64, nowMs int64) error {
	if l.failed != nil {
		return l.failed
	}
	if offset < 0 {
		return fmt.Errorf("truncate %s fully at %d: negative offset", l.dir, offset)
	}
	if err := l.removeSegments(0); err != nil {
		return l.fail(err)
	}
	if err := l.startAt(offset, nowMs); err != nil {
		return l.fail(err)
	}
	// The recovery point may fall but never rise here: until a flush has
	// synced the directory, a power loss can bring back the removed
	// segments and lose the new one, so offset is not yet durable. Kafka's
	// LocalLog.updateLogEndOffset likewise only lowers it.
	l.logStartOffset, l.recoveryPoint = offset, min(l.recoveryPoint, offset)
	l.flush.truncations++
	l.epochs.truncateFromEnd(0)
	l.persistEpochs(nil)
	l.lowerCheckpointedRecoveryPoint()
	l.checkInvariants()
	return nil
}
