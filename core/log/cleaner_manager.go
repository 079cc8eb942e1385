package log

import (
	"strand/core/log/checkpoint"
)

// CleanerOffsetCheckpointName is the per-directory checkpoint of the
// cleaner points of compacted logs, in Kafka's offset checkpoint format.
const CleanerOffsetCheckpointName = "cleaner-offset-checkpoint"

// managerCleaner is the Manager's side of compaction: which log it cleans
// and the checkpoint writer.
type managerCleaner struct {
	offsets *checkpoint.Writer
	// current is the log whose pass is under way, if any.
	current    TopicPartition
	hasCurrent bool
}

// CleanStep runs one bounded cleaning step in this directory, as Kafka's
// cleaner threads do, but on the event loop: it continues the pass under way
// or starts one on the dirtiest log that is due (see Log.DirtyRatio; logs
// past max.compaction.lag.ms first). highWatermark gives each partition's
// high watermark: nothing at or above it is cleaned. When a pass finishes,
// cleaner-offset-checkpoint is written. The broker calls it on a timer
// (e.g. every few milliseconds while it returns CleanWorking, less often
// when CleanIdle); an error wraps env.ErrIO and means the log went offline.
func (m *Manager) CleanStep(nowMs int64, highWatermark func(TopicPartition) int64, limits CleanLimits) (CleanStatus, error) {
	c := &m.cleaner
	if c.hasCurrent {
		if l, ok := m.logs[c.current]; !ok || !l.Cleaning() {
			c.hasCurrent = false
		}
	}
	if !c.hasCurrent {
		tp, ok := m.dirtiest(nowMs, highWatermark)
		if !ok {
			return CleanIdle, nil
		}
		c.current, c.hasCurrent = tp, true
	}
	status, err := m.logs[c.current].CleanStep(nowMs, highWatermark(c.current), limits)
	if status == CleanPassDone || status == CleanIdle || err != nil {
		c.hasCurrent = false
	}
	if status == CleanPassDone {
		m.WriteCleanerOffsets(nil)
	}
	return status, err
}

// dirtiest picks the log to clean: among those due, the one with the
// highest dirty ratio, ties to the first in partition order.
func (m *Manager) dirtiest(nowMs int64, highWatermark func(TopicPartition) int64) (TopicPartition, bool) {
	var best TopicPartition
	bestRatio, found := -1.0, false
	for _, tp := range m.Partitions() {
		ratio, due := m.logs[tp].DirtyRatio(nowMs, highWatermark(tp))
		if due && ratio > bestRatio {
			best, bestRatio, found = tp, ratio, true
		}
	}
	return best, found
}

// WriteCleanerOffsets writes cleaner-offset-checkpoint from the cleaner
// points of the compacted logs.
func (m *Manager) WriteCleanerOffsets(done func(error)) {
	if m.refuseOffline(done) {
		return
	}
	var entries []checkpoint.PartitionOffset
	for _, tp := range m.Partitions() {
		if l := m.logs[tp]; l.cfg.Compaction.Compact {
			entries = append(entries, checkpoint.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: l.CleanerPoint()})
		}
	}
	m.cleaner.offsets.Write(checkpoint.EncodeOffsets(entries), m.failOnError(done))
}
