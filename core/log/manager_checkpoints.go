package log

import (
	"errors"
	"fmt"

	"strand/core/env"
	"strand/core/log/checkpoint"
)

// DeleteLog closes tp's log and deletes its files and directory. done
// (optional) runs once the deletion is durable. A failed sync of the
// directory, or an I/O error removing the files, takes the directory
// offline (Fail), as a failed deletion does in Kafka (its
// LogDirFailureChannel): a removal that may or may not be durable could
// bring the log back at the next start.
func (m *Manager) DeleteLog(tp TopicPartition, done func(error)) error {
	l, ok := m.logs[tp]
	if !ok {
		return fmt.Errorf("delete log %s: %w", tp.DirName(), env.ErrNotExist)
	}
	delete(m.logs, tp)
	err := l.Close()
	names, listErr := m.disk.List(l.dir)
	err = errors.Join(err, listErr)
	for _, name := range names {
		err = errors.Join(err, m.disk.Remove(joinPath(l.dir, name)))
	}
	if err = errors.Join(err, m.disk.Remove(l.dir)); err != nil {
		err = fmt.Errorf("delete log %s: %w", tp.DirName(), err)
		if errors.Is(err, env.ErrIO) {
			m.Fail(err)
		}
		return err
	}
	m.disk.SyncDir(m.dir, func(err error) {
		if err != nil {
			err = fmt.Errorf("sync the log directory after deleting log %s: %w", tp.DirName(), err)
		}
		m.failOnError(done)(err)
	})
	return nil
}

// WriteRecoveryPoints writes recovery-point-offset-checkpoint from every
// log's recovery point, which is durable by construction. Until the write is
// durable the file may hold either content, so recoveryPointTrust keeps the
// larger of the two for each partition.
func (m *Manager) WriteRecoveryPoints(done func(error)) {
	if m.refuseOffline(done) {
		return
	}
	written := map[TopicPartition]int64{}
	for _, tp := range m.Partitions() {
		written[tp] = m.logs[tp].RecoveryPoint()
		m.recoveryPointTrust[tp] = max(m.recoveryPointTrust[tp], written[tp])
	}
	m.recoveryPointWrites++
	write := m.recoveryPointWrites
	m.recoveryPoints.Write(m.encode((*Log).RecoveryPoint), m.failOnError(func(err error) {
		if err == nil && write == m.recoveryPointWrites {
			m.recoveryPointTrust = written // the file holds exactly this now
		}
		if done != nil {
			done(err)
		}
	}))
}

// WriteLogStartOffsets writes log-start-offset-checkpoint. A failure takes
// the directory offline (Fail), as with every checkpoint write; an offline
// directory's checkpoints are not written (refuseOffline).
func (m *Manager) WriteLogStartOffsets(done func(error)) {
	if m.refuseOffline(done) {
		return
	}
	m.logStartOffsets.Write(m.encode((*Log).LogStartOffset), m.failOnError(done))
}

// WriteHighWatermarks writes replication-offset-checkpoint. The replica
// layer owns the high watermarks; it passes them in.
func (m *Manager) WriteHighWatermarks(highWatermarks map[TopicPartition]int64, done func(error)) {
	if m.refuseOffline(done) {
		return
	}
	entries := make([]checkpoint.PartitionOffset, 0, len(highWatermarks))
	for tp, hw := range highWatermarks { // order-independent: EncodeOffsets sorts
		entries = append(entries, checkpoint.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: hw})
	}
	m.replication.Write(checkpoint.EncodeOffsets(entries), m.failOnError(done))
}

func (m *Manager) encode(offsetOf func(*Log) int64) []byte {
	tps := m.Partitions()
	entries := make([]checkpoint.PartitionOffset, 0, len(tps))
	for _, tp := range tps {
		entries = append(entries, checkpoint.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsetOf(m.logs[tp])})
	}
	return checkpoint.EncodeOffsets(entries)
}

// MaybeFlushByTime applies log.flush.interval.ms to every log.
func (m *Manager) MaybeFlushByTime(nowMs int64) {
	for _, tp := range m.Partitions() {
		m.logs[tp].MaybeFlushByTime(nowMs)
	}
}

// Close closes every log.
func (m *Manager) Close() error {
	var err error
	for _, tp := range m.Partitions() {
		err = errors.Join(err, m.logs[tp].Close())
	}
	return err
}
