package broker

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/env"
	"strand/core/log"
	"strand/core/metadata"
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
	replica *replica.Partition
	// appliedPartitionEpoch and appliedLeaderEpoch are the metadata state
	// last handed to ApplyState (-1 before the first).
	appliedPartitionEpoch int32
	appliedLeaderEpoch    int32
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

// openPartition opens (recovering) or creates the log of tp on the log
// directory that already holds it, else on the directory hosting the fewest
// partitions, and wraps it in a replica state machine.
func (n *Node) openPartition(tp metadata.TopicPartition) (*partition, error) {
	key := partitionKey{tp.Topic, tp.Partition}
	dir := key.String()
	disk, err := n.diskFor(dir)
	if err != nil {
		return nil, err
	}
	l, err := log.Open(disk, dir, n.logConfig, log.OpenOptions{NowMs: n.wallMs()})
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	rcfg := replica.Config{
		ReplicaID:           n.id,
		MinInsyncReplicas:   int(n.cfg.Broker.MinInsyncReplicas),
		ReplicaLagTimeMaxMs: n.cfg.Broker.ReplicaLagTimeMaxMs,
		AckWaitersMax:       int(n.cfg.Broker.Limits.PurgatoryRequestsPerPartitionMax),
		Bugs:                n.cfg.Bugs,
	}
	// No replication-offset-checkpoint yet: the HW restarts at the log
	// start and is re-learnt from the leader (never used to truncate).
	r, err := replica.New(rcfg, replicaLog{l}, 0)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	return &partition{key: key, topicID: tp.TopicID, log: l, replica: r, appliedPartitionEpoch: -1, appliedLeaderEpoch: -1}, nil
}

// diskFor picks the log directory for a partition directory.
func (n *Node) diskFor(dir string) (env.Disk, error) {
	counts := make([]int, len(n.disks))
	for i, d := range n.disks {
		names, err := d.List(".")
		if err != nil && !errors.Is(err, env.ErrNotExist) {
			return nil, fmt.Errorf("list log dir %d: %w", i, err)
		}
		for _, name := range names {
			if name == dir {
				return d, nil
			}
		}
		counts[i] = len(names)
	}
	best := 0
	for i := range counts {
		if counts[i] < counts[best] {
			best = i
		}
	}
	return n.disks[best], nil
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
	default:
		return kerr.UnknownServerError.Code
	}
}

// sortedPartitions lists the hosted partitions by topic, then index.
func (n *Node) sortedPartitions() []*partition {
	out := make([]*partition, 0, len(n.partitions))
	for _, p := range n.partitions { // order-independent: sorted below
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
