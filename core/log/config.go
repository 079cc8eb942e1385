package log

import (
	"errors"
	"fmt"
	"math"
)

// Config holds the Kafka topic settings the log obeys. Field names follow
// Kafka's (segment.bytes → SegmentBytes, and so on).
type Config struct {
	// SegmentBytes is segment.bytes (log.segment.bytes): a segment rolls
	// before an append would make it larger than this.
	SegmentBytes int64
	// SegmentMs is segment.ms (log.roll.ms): a segment rolls once its
	// records span this much time.
	SegmentMs int64
	// SegmentIndexBytes is segment.index.bytes (log.index.size.max.bytes):
	// the most an offset or time index may hold; a full index rolls.
	SegmentIndexBytes int64
	// IndexIntervalBytes is index.interval.bytes (log.index.interval.bytes):
	// how many log bytes lie between two offset index entries.
	IndexIntervalBytes int64
	// RetentionMs is retention.ms (log.retention.ms); -1 keeps segments
	// forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes (log.retention.bytes); -1 means no
	// size limit.
	RetentionBytes int64
	// FlushIntervalMessages is flush.messages (log.flush.interval.messages):
	// flush after this many appended records. The default never flushes.
	FlushIntervalMessages int64
	// FlushIntervalMs is flush.ms (log.flush.interval.ms): flush when this
	// long has passed since the last flush. The default never flushes.
	FlushIntervalMs int64
	// Compaction is cleanup.policy=compact and its settings (compact_config.go).
	Compaction CompactionConfig
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:          1 << 30,
		SegmentMs:             7 * 24 * 60 * 60 * 1000,
		SegmentIndexBytes:     10 << 20,
		IndexIntervalBytes:    4096,
		RetentionMs:           7 * 24 * 60 * 60 * 1000,
		RetentionBytes:        -1,
		FlushIntervalMessages: math.MaxInt64,
		FlushIntervalMs:       math.MaxInt64,
		Compaction:            DefaultCompactionConfig(),
	}
}

// Smallest allowed values, as Kafka's LogConfig defines them.
const (
	segmentBytesMin      = 14 // Kafka: LegacyRecord.RECORD_OVERHEAD_V0
	segmentIndexBytesMin = 4 * offsetIndexEntryBytes
	// positionMax bounds a segment: positions in the offset index are int32.
	positionMax = math.MaxInt32
)

// Validate reports the first invalid setting, naming it as Kafka does.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.SegmentBytes >= segmentBytesMin && c.SegmentBytes <= positionMax,
		"segment.bytes %d: must be in [%d, %d]", c.SegmentBytes, segmentBytesMin, positionMax)
	check(c.SegmentMs >= 1, "segment.ms %d: must be at least 1", c.SegmentMs)
	check(c.SegmentIndexBytes >= segmentIndexBytesMin && c.SegmentIndexBytes <= positionMax,
		"segment.index.bytes %d: must be in [%d, %d]", c.SegmentIndexBytes, segmentIndexBytesMin, positionMax)
	check(c.IndexIntervalBytes >= 0, "index.interval.bytes %d: must not be negative", c.IndexIntervalBytes)
	check(c.RetentionMs >= -1, "retention.ms %d: must be -1 (unlimited) or more", c.RetentionMs)
	check(c.RetentionBytes >= -1, "retention.bytes %d: must be -1 (unlimited) or more", c.RetentionBytes)
	check(c.FlushIntervalMessages >= 1, "flush.messages %d: must be at least 1", c.FlushIntervalMessages)
	check(c.FlushIntervalMs >= 0, "flush.ms %d: must not be negative", c.FlushIntervalMs)
	if err := c.Compaction.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("log config: %w", errors.Join(errs...))
	}
	return nil
}
