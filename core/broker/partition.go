package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/env"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/producer"
	"strand/core/replica"
)

// partitionKey names a partition by topic name and index.
type partitionKey struct {
	topic string
	index int32
}

func (k partitionKey) String() string { return fmt.Sprintf("%s-%d", k.topic, k.index) }

// partition is one partition replica hosted here: the log and the pure
// replication state machine that decides what happens to it
// (design-broker.md, partition on a broker).
type partition struct {
	key     partitionKey
	topicID metadata.TopicID
	log     *log.Log
	// manager is the log directory holding log.
	manager *log.Manager
	replica *replica.Partition
	// producers is the idempotent producers' state (producer_state.go),
	// nil while it could not be loaded; snapshots are its .snapshot files,
	// and producerConfig what it is loaded with.
	producers      *producer.State
	snapshots      *producer.Snapshots
	producerConfig producer.Config
	// syncAcks is set for topics with flush.messages=1: an acknowledged
	// record must be durable, so acks wait for the leader's Sync and
	// followers fetch again only once their appends are synced (durable.go).
	syncAcks bool
	// ackWaits are where the answers of the acks=all produces waiting in
	// the replica (its ack tracker, the one purgatory of the HW wait) go,
	// by the request id of their waiter. durableWaits are produces
	// answered once the recovery point passes them, oldest first.
	// produceExpiry is the one timer of both, at produceExpiryAtMs, the
	// earliest deadline among them (produce_waits.go).
	ackWaits          map[uint64]*produceSlot
	durableWaits      []*produceSlot
	produceExpiry     env.Timer
	produceExpiryAtMs int64
	// flushRequested is set while a flush a follower asked for is pending.
	flushRequested bool
	// appliedPartitionEpoch and appliedLeaderEpoch are the metadata state
	// last handed to ApplyState (-1 before the first).
	appliedPartitionEpoch int32
	appliedLeaderEpoch    int32
	// deleteRecordsWaits are the DeleteRecords requests waiting for the
	// low watermark (api_21_delete_records.go), oldest first.
	deleteRecordsWaits []deleteRecordsWait
	// fetchWaiters are the parked fetches waiting on this partition,
	// oldest first; wakeQueued is set while it is in the partition
	// manager's wakeQueue.
	fetchWaiters []*fetchWaiter
	wakeQueued   bool
	// retired is set once the partition has left the partition manager's
	// partitions (its topic was deleted): holders of p, such as parked
	// fetches, check it instead of looking the key up again.
	retired bool
	// followerAppendErrLogged is the text of the last follower append
	// error logged (fetcher.go logFollowerAppendError), "" after a
	// success: a follower stuck on one error logs it once. Only logging
	// reads it.
	followerAppendErrLogged string
	// fetchBackoff is set while this follower partition waits out
	// replica.fetch.backoff.ms after an error of its own (fetcher.go
	// delayFetch): its fetcher leaves it out of its requests meanwhile and
	// goes on fetching the others, as Kafka's delayed partitions do.
	fetchBackoff env.Timer
}

// partitionLog is the node's Log with the partition's topic and index bound.
func (pm *partitionManager) partitionLog(key partitionKey) env.Log {
	return pm.cfg.Log.With(slog.String("topic", key.topic), slog.Int("partition", int(key.index)))
}

// replicaLog adapts *log.Log to replica.Log.
type replicaLog struct{ *log.Log }

// LatestEpoch is the newest epoch in the log's epoch cache.
func (l replicaLog) LatestEpoch() int32 { return l.Epochs().LatestEpoch() }

// EndOffsetForEpoch answers as replica.Log documents: NoEpoch asks nothing.
func (l replicaLog) EndOffsetForEpoch(requested int32) (int32, int64) {
	if requested == replica.NoEpoch {
		return replica.NoEpoch, replica.NoOffset
	}
	return l.Log.EndOffsetForEpoch(requested)
}

// storageFailed reports whether the partition's log has failed (its
// directory is offline): every request on it gets KAFKA_STORAGE_ERROR.
func (p *partition) storageFailed() bool { return p.log.Err() != nil }

// openPartition takes tp's log from the log directory that recovered it at
// start, or creates it in the live directory hosting the fewest logs
// (logDirFor), and wraps it in a replica state machine started from the
// checkpointed HW.
func (pm *partitionManager) openPartition(tp metadata.TopicPartition) (*partition, error) {
	key := partitionKey{tp.Topic, tp.Partition}
	ltp := log.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	dir, err := pm.logDirFor(ltp)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", key, err)
	}
	m, disk := pm.managers[dir], pm.disks[dir]
	l, err := pm.claimLog(m, disk, ltp, tp.TopicID)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", key, err)
	}
	snapshots, err := producer.OpenSnapshots(disk, l.Dir())
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", key, err)
	}
	rcfg := replica.Config{
		ReplicaID:           pm.id,
		MinInsyncReplicas:   int(pm.topicConfig(tp.Topic).MinInsyncReplicas),
		ReplicaLagTimeMaxMs: pm.cfg.Broker.ReplicaLagTimeMaxMs,
		AckWaitersMax:       int(pm.cfg.Broker.Limits.PurgatoryRequestsPerPartitionMax),
		// -1 before registration; AlterPartition v2 carries no broker
		// epochs anyway (KIP-903 needs v3 and Fetch v15).
		BrokerEpoch: max(pm.meta.brokerEpoch, -1),
		Bugs:        pm.cfg.Bugs.Replica,
		Log:         pm.partitionLog(key),
	}
	r, err := replica.New(rcfg, replicaLog{l}, m.HighWatermark(ltp))
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", key, err)
	}
	l.SetLogger(rcfg.Log)
	p := &partition{
		key: key, topicID: tp.TopicID, log: l, manager: m, replica: r, snapshots: snapshots, producerConfig: pm.producerConfig(),
		appliedPartitionEpoch: -1, appliedLeaderEpoch: -1, ackWaits: map[uint64]*produceSlot{},
		syncAcks: pm.topicConfig(tp.Topic).FlushMessages == 1,
	}
	_ = p.loadProducers() // on failure the state stays nil and syncProducers retries
	l.SetRecoveryPointListener(func(int64) { pm.onDurable(p) })
	l.SetFailureListener(func(error) { pm.onLogFailure(p) })
	return p, nil
}

// openManagers opens every log directory, recovering the logs in it. The
// metadata log lives in its own subdirectory of the first (see
// metadataLogDir), out of the Manager's sight.
//
// A directory other than the first that cannot be opened starts offline
// (log.FailedManager), as Kafka's LogManager starts without the
// directories it cannot load: the broker runs on the others (and, one
// directory offline, asks to be fenced). The first one failing refuses the
// start, as Kafka stops when its metadata log directory fails: it holds
// the metadata log and the clean-shutdown marker. An offline directory
// makes the restart unclean, as Kafka reads no clean-shutdown epoch when
// a directory is offline: its logs were not recovered; openManagers
// reports whether one is.
func (pm *partitionManager) openManagers() (someOffline bool, err error) {
	for i, d := range pm.disks {
		logger := pm.cfg.Log.With(pm.logDirAttr(i))
		m, err := log.OpenManager(d, "", pm.logConfigFor, pm.wallMs())
		switch {
		case err == nil:
			m.SetLogger(logger)
			if why := m.RecoveryPointsUnreadable(); why != nil {
				logger.Warn("the recovery-point checkpoint does not parse: every log in the directory was recovered from its first segment",
					slog.Any("err", why))
			}
		case i == 0:
			return false, fmt.Errorf("broker: the first log dir, which holds the metadata log and the clean-shutdown marker: %w", err)
		default:
			m = log.FailedManager(d, "", pm.logConfigFor, logger, fmt.Errorf("open the log directory: %w", err))
			someOffline = true
		}
		pm.managers = append(pm.managers, m)
	}
	return someOffline, nil
}

// logDirAttr names log directory i in a log line: its log.dirs path, or
// its index where the configuration names none (the simulator).
func (pm *partitionManager) logDirAttr(i int) slog.Attr {
	if i < len(pm.cfg.Broker.LogDirs) {
		return slog.String("log_dir", pm.cfg.Broker.LogDirs[i])
	}
	return slog.Int("log_dir_index", i)
}

// highWatermarksByManager returns, for each log directory (n.parts.managers'
// order), the high watermark of each partition it holds: the content of
// its replication-offset-checkpoint.
func (pm *partitionManager) highWatermarksByManager() []map[log.TopicPartition]int64 {
	hws := make([]map[log.TopicPartition]int64, len(pm.managers))
	for i := range hws {
		hws[i] = map[log.TopicPartition]int64{}
	}
	for _, p := range pm.sortedPartitions() {
		for i, m := range pm.managers {
			if m == p.manager {
				hws[i][log.TopicPartition{Topic: p.key.topic, Partition: p.key.index}] = p.replica.HighWatermark()
			}
		}
	}
	return hws
}

// scheduleCheckpoints writes each log directory's checkpoints (HW,
// recovery points, log start offsets) every
// replica.high.watermark.checkpoint.interval.ms, applies the time flush
// policy, and deletes segments past retention every
// log.retention.check.interval.ms.
func (pm *partitionManager) scheduleCheckpoints(sinceRetentionMs int64) {
	pm.after(hwCheckpointIntervalMs, func() {
		hws := pm.highWatermarksByManager()
		retention := sinceRetentionMs+hwCheckpointIntervalMs >= pm.cfg.Broker.LogRetentionCheckIntervalMs
		for _, p := range pm.sortedPartitions() {
			// A compact-only topic keeps old segments: the cleaner thins
			// them (Kafka skips deletion without cleanup.policy=delete).
			if retention && !p.storageFailed() && pm.topicConfig(p.key.topic).CleanupPolicy.Delete {
				_, _ = p.log.ApplyRetention(pm.wallMs(), p.replica.HighWatermark()) // a failure fails the log
				producerStartOffsetMoved(p)
			}
		}
		for i, m := range pm.managers {
			m.MaybeFlushByTime(pm.wallMs())
			m.WriteHighWatermarks(hws[i], nil)
			m.WriteRecoveryPoints(nil)
			m.WriteLogStartOffsets(nil)
		}
		if retention {
			sinceRetentionMs = 0
		} else {
			sinceRetentionMs += hwCheckpointIntervalMs
		}
		pm.scheduleCheckpoints(sinceRetentionMs)
	})
}

// errorCodeOf maps an error from the log or the replica to a Kafka code.
func errorCodeOf(err error) int16 {
	var rerr *replica.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &rerr):
		return rerr.Code
	case errors.Is(err, env.ErrIO), errors.Is(err, env.ErrNoSpace), errors.Is(err, env.ErrClosed):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrInvalidBatch):
		return kerr.CorruptMessage.Code
	case errors.Is(err, log.ErrBatchTooLarge):
		return kerr.RecordListTooLarge.Code
	case errors.Is(err, log.ErrRecoveryPointPending):
		// A moment after a truncation (SPEC.md §3.4); clients retry it.
		return kerr.RequestTimedOut.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// sortedPartitions lists the hosted partitions by topic, then index.
func (pm *partitionManager) sortedPartitions() []*partition {
	out := make([]*partition, 0, len(pm.partitions))
	for _, p := range pm.partitions { // order-independent: sorted below
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.topic != out[j].key.topic {
			return out[i].key.topic < out[j].key.topic
		}
		return out[i].key.index < out[j].key.index
	})
	return out
}
