package broker

import "strand/core/log"

const (
	// logCleanerBackoffMs is log.cleaner.backoff.ms (Kafka's default): how
	// long the cleaner sleeps when no compacted log is due.
	logCleanerBackoffMs = 15000
	// cleanStepPauseMs is the pause between steps of a cleaning pass under
	// way: each step is bounded (log.DefaultCleanLimits), and other events
	// run in between, as Kafka's cleaner threads share the machine.
	cleanStepPauseMs = 1
)

// scheduleCleaner runs one bounded cleaning step in every log directory
// after delayMs (log.Manager.CleanStep picks the dirtiest compacted log
// that is due), and schedules the next: soon while a pass is under way,
// after log.cleaner.backoff.ms when every directory is idle. A step's
// error means the log went offline; its directory's Err reports it.
func (pm *partitionManager) scheduleCleaner(delayMs int64) {
	pm.after(delayMs, func() {
		next := int64(logCleanerBackoffMs)
		for _, m := range pm.managers {
			status, err := m.CleanStep(pm.wallMs(), pm.cleanableBelow, log.DefaultCleanLimits())
			if err == nil && status != log.CleanIdle {
				next = cleanStepPauseMs
			}
		}
		pm.scheduleCleaner(next)
	})
}

// cleanableBelow is a partition's high watermark: the cleaner leaves
// everything at or above it alone. A partition this node does not host
// has nothing cleanable.
func (pm *partitionManager) cleanableBelow(tp log.TopicPartition) int64 {
	if p := pm.partitions[partitionKey{tp.Topic, tp.Partition}]; p != nil {
		return p.replica.HighWatermark()
	}
	return 0
}
