package broker

import (
	"strand/core/config"
	"strand/core/log"
)

// partitionManager is the broker's side of the partitions it hosts
// (Kafka's ReplicaManager): their logs in the log directories, the replica
// state machines that decide what happens to them, their idempotent
// producers' state, and what waits on them: acks=all produces for the HW,
// produces for the recovery point, parked fetches, DeleteRecords. It
// serves the partitions' APIs (Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch, DescribeLogDirs), copies records from leaders
// (fetcher.go), brings the partitions in line with the metadata
// (reconcilePartitions) and performs every replica decision
// (afterReplicaChange).
type partitionManager struct {
	*nodeEnv
	// meta is the metadata the partitions follow (the image, the broker
	// epoch); controllerRole carries ISR changes to the controller; groups
	// are the coordinators of the __consumer_offsets partitions, told of
	// every change of theirs.
	meta           *metadataFollower
	controllerRole *controllerRole
	groups         *groupCoordinators

	// logConfig is the broker's default log configuration (server.properties).
	logConfig log.Config
	// managers are the log directories, in log.dirs order.
	managers   []*log.Manager
	partitions map[partitionKey]*partition
	// offlinePartitions are the partitions assigned here whose log could
	// not be opened (storage_failure.go markPartitionOffline).
	offlinePartitions map[partitionKey]bool
	// topicConfigs caches resolved topic configurations for the image at
	// offset topicConfigsAt (topic_config.go).
	topicConfigs   map[string]config.TopicConfig
	topicConfigsAt int64
	// fetchers are the replica fetchers, by leader (fetcher.go).
	fetchers map[int32]*fetcher

	// produceWaits are the acks=all produces waiting for the HW, by the id
	// the replica's waiter carries; nextRequestID numbers them.
	nextRequestID uint64
	produceWaits  map[uint64]*produceSlot
	// fetchWaiters are the parked fetches, oldest first; each partition
	// also lists those waiting on it.
	fetchWaiters []*fetchWaiter
	// wakeQueue are the partitions whose parked fetches are to be
	// re-checked, and wakeAll asks for every parked fetch; waking guards
	// drainWakes against re-entry.
	wakeQueue       []*partition
	wakeAll, waking bool
	// fetchSessions are the consumers' and followers' fetch sessions
	// (KIP-227, fetch_session.go).
	fetchSessions *fetchSessionCache

	// produceListeners are the listeners that serve Produce, for the
	// pre-check's view; fixed at New.
	produceListeners map[string]bool
	// precheckView is the PrecheckView last handed to the environment
	// (publishPrecheckView), kept to publish a new one only on a change.
	precheckView *PrecheckView
	// loopRecompressions counts the batches produceOne recompressed on the
	// loop (storedForm): in realnet only those whose pre-check missed the
	// topic's codec, as each holds every partition of the broker for the
	// time it takes. Tests read it.
	loopRecompressions int64
}

// newPartitionManager makes the partition manager of a node; it opens no
// log directory yet (openManagers).
func newPartitionManager(e *nodeEnv, meta *metadataFollower, cr *controllerRole, produceListeners map[string]bool) *partitionManager {
	b := e.cfg.Broker
	pm := &partitionManager{
		nodeEnv:          e,
		meta:             meta,
		controllerRole:   cr,
		logConfig:        logConfigOf(b.TopicDefaults()),
		partitions:       map[partitionKey]*partition{},
		fetchers:         map[int32]*fetcher{},
		produceWaits:     map[uint64]*produceSlot{},
		produceListeners: produceListeners,
	}
	pm.fetchSessions = fetchSessionCacheOf(b.Limits.FetchSessionCacheSlots, e.incarnation)
	pm.fetchSessions.logStartUntold = e.cfg.Bugs.SessionLogStartUntold
	return pm
}
