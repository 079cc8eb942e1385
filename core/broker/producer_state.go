package broker

import (
	"fmt"

	"strand/core/producer"
)

// Each partition replica keeps the idempotent producer's state
// (core/producer) beside its log, as Kafka's ProducerStateManager does:
//
//   - the leader checks every produced batch against it and updates it in
//     the same event-loop step as the append (api_00_produce.go);
//   - a follower replays what it copied (CatchUp after AppendAsFollower), so
//     that a new leader deduplicates retries of batches its predecessor
//     wrote;
//   - it is rebuilt at open from the newest .snapshot file plus a replay of
//     the log after it, and after every truncation;
//   - a snapshot is taken when a segment rolls and at a clean shutdown.
//
// Truncations the metadata follower performs (applyPartitionState) are
// noticed by syncProducers, which every user of the state calls first: a
// log end below the state's map end offset means the log was truncated.

// producerConfig is the producer state configuration of every partition:
// Kafka's defaults, with the planted bug dedup-off from Config.Bugs.
func (pm *partitionManager) producerConfig() producer.Config {
	cfg := producer.DefaultConfig()
	cfg.DedupOff = pm.cfg.Bugs.DedupOff
	return cfg
}

// loadProducers rebuilds p's producer state from its snapshots and log.
func (p *partition) loadProducers() error {
	l := p.log
	state, err := producer.Load(p.producerConfig, p.snapshots, l.LogStartOffset(), l.LogEndOffset(), producer.LogReader(l))
	if err != nil {
		return fmt.Errorf("load producer state of %s: %w", p.key, err)
	}
	p.producers = state
	return nil
}

// syncProducers brings p's producer state in line with its log before it
// is used: after a truncation it is reloaded (TruncateTo), and a state that
// failed earlier is loaded again. A state that cannot be brought in line is
// dropped (nil), so that it is never trusted while stale; the caller
// answers KAFKA_STORAGE_ERROR.
func (p *partition) syncProducers() error {
	l := p.log
	if p.producers == nil {
		return p.loadProducers()
	}
	var err error
	switch end := l.LogEndOffset(); {
	case end < p.producers.MapEndOffset():
		err = p.producers.TruncateTo(l.LogStartOffset(), end, p.snapshots, producer.LogReader(l))
	case end > p.producers.MapEndOffset():
		err = p.producers.CatchUp(end, producer.LogReader(l))
	}
	if err != nil {
		p.producers = nil
		return fmt.Errorf("producer state of %s: %w", p.key, err)
	}
	return nil
}

// producerStartOffsetMoved deletes the snapshots below p's new log start
// offset (retention, DeleteRecords, a follower following its leader's).
func producerStartOffsetMoved(p *partition) {
	_ = p.snapshots.DeleteBelow(p.log.LogStartOffset(), nil) // a stale snapshot is skipped by Load
}

// scheduleProducerExpiry forgets, every
// producer.id.expiration.check.interval.ms, the producers whose last batch
// is older than producer.id.expiration.ms by this node's wall clock.
func (pm *partitionManager) scheduleProducerExpiry() {
	pm.after(producer.DefaultExpirationCheckIntervalMs, func() {
		now := pm.wallMs()
		for _, p := range pm.sortedPartitions() {
			if p.producers != nil {
				p.producers.ExpireProducers(now)
			}
		}
		pm.scheduleProducerExpiry()
	})
}
