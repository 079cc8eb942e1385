package log

import (
	"errors"
	"fmt"
	"math"
)

// CompactionConfig holds the topic settings of log compaction, named after
// Kafka's. The zero value is not valid; start from DefaultCompactionConfig.
type CompactionConfig struct {
	// Compact is cleanup.policy containing "compact". With "compact" alone
	// the broker does not call ApplyRetention's time and size passes (Kafka
	// skips deletion for compact-only topics); with "compact,delete" it
	// calls both.
	Compact bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a log is cleaned
	// once its dirty bytes are at least this share of its cleanable bytes.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose largest
	// timestamp is younger than this stays dirty.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a log whose first dirty
	// segment is older than this is cleaned whatever its dirty ratio.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms: a tombstone survives this
	// long after the cleaning pass that first kept it (Kafka's delete
	// horizon, KIP-534), so that consumers reading from the start see it.
	DeleteRetentionMs int64
}

// DefaultCompactionConfig returns Kafka's defaults, with compaction off
// (cleanup.policy=delete).
func DefaultCompactionConfig() CompactionConfig {
	return CompactionConfig{
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * 60 * 60 * 1000,
	}
}

// validate reports every invalid setting, naming it as Kafka does.
func (c CompactionConfig) validate() error {
	var errs []error
	if !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio %v: must be in [0, 1]", c.MinCleanableDirtyRatio))
	}
	if c.MinCompactionLagMs < 0 {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms %d: must not be negative", c.MinCompactionLagMs))
	}
	if c.MaxCompactionLagMs < 1 {
		errs = append(errs, fmt.Errorf("max.compaction.lag.ms %d: must be at least 1", c.MaxCompactionLagMs))
	}
	if c.DeleteRetentionMs < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms %d: must not be negative", c.DeleteRetentionMs))
	}
	return errors.Join(errs...)
}
