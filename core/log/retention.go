package log

import (
	"errors"
	"fmt"
	"log/slog"
)

// ApplyRetention deletes old segments as Kafka's deleteOldSegments does, in
// three passes: segments older than retention.ms (by their largest
// timestamp), then the oldest segments while the log exceeds
// retention.bytes, then segments wholly below the log start offset. Only
// whole segments go; never the active segment, and never a segment holding
// an offset at or above highWatermark. The log start offset advances to the
// first remaining segment. It returns how many segments were deleted.
func (l *Log) ApplyRetention(nowMs, highWatermark int64) (deleted int, err error) {
	if l.failed != nil {
		return 0, l.failed
	}
	// Each pass measures the log as the previous passes left it, as Kafka's
	// do: retention.bytes counts only what retention.ms kept.
	passes := []func() func(*segment) bool{
		func() func(*segment) bool { return l.retentionMsBreached(nowMs) },
		l.retentionBytesBreached,
		func() func(*segment) bool { return func(s *segment) bool { return s.nextOffset <= l.logStartOffset } },
	}
	for i, pass := range passes {
		breached := pass()
		n := 0
		for n < len(l.segments)-1 && l.segments[n].nextOffset <= highWatermark && breached(l.segments[n]) {
			n++
		}
		l.logRetention(retentionReasons[i], l.segments[:n])
		if err := l.deleteOldest(n); err != nil {
			return deleted, err
		}
		deleted += n
	}
	return deleted, nil
}

// retentionReasons say why each of ApplyRetention's passes deletes, in
// its log lines.
var retentionReasons = [...]string{"retention.ms breached by the segment's largest timestamp",
	"retention.bytes breached by the log's size", "wholly below the log start offset"}

// logRetention logs, at INFO, each segment a retention pass is about to
// delete and why, as Kafka's "Deleting segment ... due to ..." lines.
func (l *Log) logRetention(reason string, segments []*segment) {
	if len(segments) == 0 || !l.logger.Enabled(slog.LevelInfo) {
		return
	}
	for _, s := range segments {
		l.logger.Info("deleting segment", slog.String("reason", reason),
			slog.Int64("base_offset", s.baseOffset), slog.Int64("next_offset", s.nextOffset),
			slog.Int64("size_bytes", s.bytes), slog.Int64("largest_timestamp_ms", s.maxTimestamp),
			slog.Int64("log_start_offset", l.logStartOffset), slog.Int64("retention_ms", l.cfg.RetentionMs),
			slog.Int64("retention_bytes", l.cfg.RetentionBytes))
	}
}

func (l *Log) retentionMsBreached(nowMs int64) func(*segment) bool {
	return func(s *segment) bool {
		if l.cfg.RetentionMs < 0 {
			return false
		}
		largestMs := s.maxTimestamp
		if largestMs < 0 {
			largestMs = s.createdMs // Kafka falls back to the file's mtime
		}
		return nowMs-largestMs > l.cfg.RetentionMs
	}
}

func (l *Log) retentionBytesBreached() func(*segment) bool {
	excessBytes := l.SizeBytes() - l.cfg.RetentionBytes
	return func(s *segment) bool {
		if l.cfg.RetentionBytes < 0 || excessBytes-s.bytes < 0 {
			return false
		}
		excessBytes -= s.bytes
		return true
	}
}

// deleteOldest deletes the n oldest segments and advances the log start
// offset past them.
func (l *Log) deleteOldest(n int) error {
	if n == 0 {
		return nil
	}
	l.abortCleaning()
	if n >= len(l.segments) {
		panic(fmt.Sprintf("log %s: deleting %d of %d segments, the active one included", l.dir, n, len(l.segments)))
	}
	var err error
	for _, s := range l.segments[:n] {
		err = errors.Join(err, s.remove(l.disk))
	}
	l.segments = append([]*segment(nil), l.segments[n:]...)
	l.flush.dirDirty = true
	if err != nil {
		return l.fail(err)
	}
	l.setLogStartOffset(max(l.logStartOffset, l.segments[0].baseOffset))
	return nil
}

// AdvanceStartOffset moves the log start offset up to offset, for
// DeleteRecords; the segments wholly below it go at the next ApplyRetention.
// An offset at or below the current start changes nothing.
func (l *Log) AdvanceStartOffset(offset int64) error {
	if l.failed != nil {
		return l.failed
	}
	if offset > l.LogEndOffset() {
		return fmt.Errorf("advance log start of %s to %d: beyond the log end offset %d: %w",
			l.dir, offset, l.LogEndOffset(), ErrOffsetOutOfRange)
	}
	if offset > l.logStartOffset {
		l.setLogStartOffset(offset)
	}
	return nil
}

func (l *Log) setLogStartOffset(offset int64) {
	l.logStartOffset = offset
	l.epochs.truncateFromStart(offset)
	l.persistEpochs(nil)
	l.checkInvariants()
}
