package broker

import (
	"log/slog"
	"maps"

	"strand/core/config"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/replica"
)

// partitionManager is the broker's side of the partitions it hosts
// (Kafka's ReplicaManager): their logs in the log directories, the replica
// state machines that decide what happens to them, their idempotent
// producers' state, and what waits on them: acks=all produces for the HW,
// produces for the recovery point, parked fetches, DeleteRecords. It
// serves the partitions' APIs (Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch, DescribeLogDirs), has its replica fetchers copy
// records from leaders (fetcher.go), brings the partitions in line with the
// metadata (reconcilePartitions) and performs every replica decision
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
	// acls authorizes the topics the partition APIs name, and gives the
	// produce pre-check its authorizer.
	acls *aclState

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
	// fetchers copy the partitions this node follows from their leaders
	// (fetcher.go).
	fetchers *replicaFetchers

	// nextRequestID numbers the replicas' acks=all waiters
	// (partition.ackWaits).
	nextRequestID uint64
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
		produceListeners: produceListeners,
	}
	pm.fetchers = &replicaFetchers{nodeEnv: e, parts: pm, byLeader: map[int32]*fetcher{}}
	pm.fetchSessions = fetchSessionCacheOf(b.Limits.FetchSessionCacheSlots, e.incarnation)
	pm.fetchSessions.logStartUntold = e.cfg.Bugs.SessionLogStartUntold
	return pm
}

// updateIneligibleReplicas hands every hosted partition the replicas the
// image shows unusable (fenced, shutting down, unregistered), when that set
// changed: a leader neither adds them to the ISR nor lets them hold its HW
// back (replica.SetIneligibleReplicas, Kafka's isReplicaIsrEligible).
func (pm *partitionManager) updateIneligibleReplicas(usableBefore map[int32]bool) {
	if maps.Equal(usableBefore, pm.meta.usableBrokers()) {
		return
	}
	for _, p := range pm.sortedPartitions() {
		pm.setIneligibleReplicas(p)
		pm.afterReplicaChange(p)
	}
}

// setIneligibleReplicas tells p's replica which of its replicas the image
// shows unusable.
func (pm *partitionManager) setIneligibleReplicas(p *partition) {
	usable := pm.meta.usableBrokers()
	var ineligible []int32
	for _, r := range p.replica.State().Replicas {
		if !usable[r] {
			ineligible = append(ineligible, r)
		}
	}
	p.replica.SetIneligibleReplicas(ineligible, pm.nowMs())
}

// reconsiderUnfenced hands the current state again to every partition this
// node leads that has a replica which just became usable. A leader whose
// ISR expansion the controller refused (INELIGIBLE_REPLICA, the replica was
// still fenced) proposes that replica again only after a pushed state, and
// unfencing is a broker record, not a partition change: Kafka's leader
// reads the fenced flag from its metadata cache instead.
func (pm *partitionManager) reconsiderUnfenced(usableBefore map[int32]bool) {
	usableNow := pm.meta.usableBrokers()
	for _, p := range pm.sortedPartitions() {
		if p.replica.Role() != replica.RoleLeader {
			continue
		}
		s := p.replica.State()
		for _, r := range s.Replicas {
			if usableNow[r] && !usableBefore[r] {
				if _, err := p.replica.ApplyState(s, pm.nowMs()); err == nil {
					pm.afterReplicaChange(p)
				}
				break
			}
		}
	}
}

// reconcilePartitions opens the partitions the image assigns to this broker
// and hands each its new state (become leader or follower, with the epoch),
// and retires the replicas of deleted topics.
func (pm *partitionManager) reconcilePartitions() {
	for _, p := range pm.sortedPartitions() {
		if t, ok := pm.meta.image.TopicByName(p.key.topic); !ok || t.ID != p.topicID {
			pm.retirePartition(p)
		}
	}
	for _, tp := range pm.meta.image.PartitionsOf(pm.id) {
		state, ok := pm.meta.image.Partition(tp.TopicID, tp.Partition)
		if !ok {
			continue
		}
		key := partitionKey{tp.Topic, tp.Partition}
		p := pm.partitions[key]
		if p == nil {
			var err error
			if p, err = pm.openPartition(tp); err != nil {
				pm.markPartitionOffline(tp, err)
				continue // the partition stays offline here
			}
			pm.partitions[key] = p
		}
		if p.appliedPartitionEpoch == state.PartitionEpoch && p.appliedLeaderEpoch == state.LeaderEpoch {
			continue
		}
		pm.applyPartitionState(p, state)
		pm.setIneligibleReplicas(p)
		pm.afterReplicaChange(p)
	}
	pm.forgetOfflinePartitions()
	pm.applyTopicConfigs()
	pm.wakeAllFetchWaiters()
}

// retirePartition stops serving a replica of a deleted topic and deletes
// its log. What waits on it is answered at once, as Kafka's stopPartitions
// completes the delayed operations of a partition it stops hosting: the
// produces waiting on it are taken from their purgatories in this step, so
// that nothing acknowledges them, and answered on the next turn
// (answerRetired); parked fetches notice at the wake that follows
// reconcilePartitions.
func (pm *partitionManager) retirePartition(p *partition) {
	pm.cfg.Log.Info("deleting the log of a deleted topic's partition", slog.String("topic", p.key.topic),
		slog.Int("partition", int(p.key.index)), slog.Int64("log_end_offset", p.log.LogEndOffset()))
	delete(pm.partitions, p.key)
	p.retired = true
	waits := pm.takeProduceWaits(p)
	pm.after(0, func() { pm.answerRetired(p, waits) })
	pm.fetchers.unfollow(p)
	_ = p.manager.DeleteLog(log.TopicPartition{Topic: p.key.topic, Partition: p.key.index}, nil) // a failure leaves files behind only
}

// applyPartitionState performs what ApplyState decides.
func (pm *partitionManager) applyPartitionState(p *partition, state metadata.PartitionState) {
	tr, err := p.replica.ApplyState(replicaStateOf(state), pm.nowMs())
	if err != nil {
		return // older than what the replica already holds
	}
	if state.LeaderEpoch != p.appliedLeaderEpoch {
		pm.fetchers.endFetchBackoff(p)
	}
	p.appliedPartitionEpoch, p.appliedLeaderEpoch = state.PartitionEpoch, state.LeaderEpoch
	if tr.TruncateToOffset != replica.NoOffset {
		_ = p.log.TruncateTo(tr.TruncateToOffset) // a failed log fails later calls
	}
	if tr.Role == replica.RoleFollower && state.Leader >= 0 && state.Leader != pm.id {
		pm.fetchers.follow(p, state.Leader)
	} else {
		pm.fetchers.unfollow(p)
	}
	pm.afterReplicaChange(p)
}

func replicaStateOf(s metadata.PartitionState) replica.PartitionState {
	return replica.PartitionState{
		LeaderID: s.Leader, LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch,
		Replicas: s.Replicas, ISR: s.ISR, ELR: s.ELR, LastKnownELR: s.LastKnownELR,
	}
}
