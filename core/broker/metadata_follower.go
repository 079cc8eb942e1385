package broker

import (
	"log/slog"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/controller"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/replica"
)

// metadataFollower is the broker's side of the metadata log: it fetches
// __cluster_metadata-0 from the active controller and applies each batch to
// the node's Image (design-broker.md, metadata fetch). On the controller's
// own node the controller hands committed batches over directly instead.
type metadataFollower struct {
	inFlight bool
	// err is the first record that did not apply: the follower stops,
	// because applying later records would diverge from the controller.
	err error
}

// startBroker registers this broker with the controller (once the removal
// of the clean-shutdown marker is durable), starts following the metadata
// log and arms the ISR-shrink timer.
func (n *Node) startBroker() {
	n.disks[0].SyncDir(".", func(err error) {
		if err != nil {
			// The marker may come back after a crash: register as unclean.
			n.previousBrokerEpoch = -1
		}
		n.register()
	})
	n.fetchMetadata()
	n.scheduleISRCheck()
}

// registrationRequest is this broker's BrokerRegistration, with the epoch
// of the last clean shutdown or -1 (KIP-966: an unclean restart leaves every
// ELR).
func (n *Node) registrationRequest() *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(3)
	req.BrokerID = n.id
	req.IncarnationID = n.incarnation
	req.PreviousBrokerEpoch = n.previousBrokerEpoch
	for _, l := range n.cfg.Broker.AdvertisedListeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port, rl.SecurityProtocol = l.Name, l.Host, l.Port, securityProtocolID(l.SecurityProtocol)
		req.Listeners = append(req.Listeners, rl)
	}
	return req
}

// register sends BrokerRegistration, retrying until the controller accepts
// it (a restarted broker is refused until its old session expires). Retries
// back off from 100 ms, as Kafka's BrokerLifecycleManager's do, doubling up
// to 1 s (Kafka goes on to half the session timeout, which would make a
// restarted broker wait up to 4.5 s past its old session's expiry).
func (n *Node) register() {
	n.toController(n.registrationRequest(), func(r kmsg.Response, err error) {
		if err != nil || r.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
			n.registerBackoffMs = min(max(2*n.registerBackoffMs, registerBackoffMsMin), registerBackoffMsMax)
			n.after(n.registerBackoffMs, n.register)
			return
		}
		n.registerBackoffMs = 0
		n.brokerEpoch = r.(*kmsg.BrokerRegistrationResponse).BrokerEpoch
		n.previousBrokerEpoch = -1 // spent: a later registration follows a crash
		n.reconcilePartitions()
		n.heartbeat()
	})
}

// heartbeat sends one BrokerHeartbeat and schedules the next. A stale
// epoch (the controller lost or replaced our registration) registers again.
// A broker with a failed log directory asks to be fenced, so that its
// leaderships move (CLARIFICATIONS.md, "Disk faults in the broker").
func (n *Node) heartbeat() {
	epoch := n.brokerEpoch
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = n.id, epoch, n.image.Offset()
	req.WantFence = n.storageFailed()
	req.WantShutdown = n.shutdownDone != nil
	n.heartbeatSeq++
	seq := n.heartbeatSeq
	n.toController(req, func(r kmsg.Response, err error) {
		if n.brokerEpoch != epoch || n.heartbeatSeq != seq {
			return // superseded by a newer heartbeat or registration
		}
		var resp *kmsg.BrokerHeartbeatResponse
		if err == nil {
			resp = r.(*kmsg.BrokerHeartbeatResponse)
		}
		switch {
		case resp != nil && resp.ErrorCode == kerr.StaleBrokerEpoch.Code:
			n.brokerEpoch = -1
			n.register()
			return
		case resp != nil && resp.ErrorCode == 0 && resp.ShouldShutdown && n.shutdownDone != nil:
			done := n.shutdownDone
			n.shutdownDone = nil
			done()
			return
		}
		interval := int64(n.cfg.Broker.BrokerHeartbeatIntervalMs)
		if n.shutdownDone != nil {
			interval = min(interval, shutdownHeartbeatIntervalMs)
		}
		if resp != nil && resp.ErrorCode == 0 && !resp.IsCaughtUp {
			interval = min(interval, startingHeartbeatIntervalMs)
		}
		n.after(interval, n.heartbeat)
	})
}

// storageFailed reports whether a log directory is offline or a hosted
// partition's log has failed. Until log directories have ids, one failed
// directory fences the whole broker: coarse, but it moves every affected
// leadership away. An offline directory counts even while it holds no
// log: it refuses new ones, so a broker left unfenced would be given
// replicas, and leaderships, it cannot host.
func (n *Node) storageFailed() bool {
	for _, m := range n.managers {
		if m.Err() != nil {
			return true
		}
	}
	for _, p := range n.sortedPartitions() {
		if p.storageFailed() {
			return true
		}
	}
	return false
}

// fetchMetadata sends the next metadata-log fetch to the controller (the
// local one in process when this node is it).
func (n *Node) fetchMetadata() {
	f := n.metadataFetch
	if f.inFlight || f.err != nil {
		return
	}
	f.inFlight = true
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = n.id
	req.MaxWaitMillis = replicaFetchMaxWaitMs
	req.MinBytes = 1
	req.MaxBytes = replicaFetchResponseMaxBytes
	t := kmsg.NewFetchRequestTopic()
	t.Topic = controller.MetadataTopic
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset = n.image.Offset() + 1
	p.PartitionMaxBytes = replicaFetchResponseMaxBytes
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	n.toController(req, func(r kmsg.Response, err error) {
		f.inFlight = false
		if err != nil || !n.onMetadataFetched(r.(*kmsg.FetchResponse)) {
			if !f.inFlight { // unless a snapshot fetch took over
				n.after(metadataFetchBackoffMs, n.fetchMetadata)
			}
			return
		}
		n.fetchMetadata()
	})
}

// fetchMetadataSnapshot reads the controller's snapshot (endOffset,
// snapshotEpoch) in chunks with FetchSnapshot from position len(data), in
// the quorum's leaderEpoch, then replaces the image with it and follows the
// log from there (KIP-630, as a broker behind the log start does). Any
// failure starts over with a metadata fetch, which names the current
// snapshot.
func (n *Node) fetchMetadataSnapshot(endOffset int64, snapshotEpoch, leaderEpoch int32, data []byte) {
	f := n.metadataFetch
	f.inFlight = true
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.SetVersion(0)
	req.ReplicaID, req.MaxBytes = n.id, replicaFetchResponseMaxBytes
	p := kmsg.NewFetchSnapshotRequestTopicPartition()
	p.CurrentLeaderEpoch, p.Position = leaderEpoch, int64(len(data))
	p.SnapshotID.EndOffset, p.SnapshotID.Epoch = endOffset, snapshotEpoch
	t := kmsg.NewFetchSnapshotRequestTopic()
	t.Topic, t.Partitions = controller.MetadataTopic, []kmsg.FetchSnapshotRequestTopicPartition{p}
	req.Topics = []kmsg.FetchSnapshotRequestTopic{t}
	n.toController(req, func(r kmsg.Response, err error) {
		f.inFlight = false
		resp, _ := r.(*kmsg.FetchSnapshotResponse)
		if err != nil || resp == nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			n.after(metadataFetchBackoffMs, n.fetchMetadata)
			return
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.Position != int64(len(data)) || rp.Size < rp.Position+int64(len(rp.Bytes)) {
			n.after(metadataFetchBackoffMs, n.fetchMetadata)
			return
		}
		data = append(data, rp.Bytes...)
		if int64(len(data)) < rp.Size {
			if len(rp.Bytes) == 0 {
				n.after(metadataFetchBackoffMs, n.fetchMetadata) // no progress
				return
			}
			n.fetchMetadataSnapshot(endOffset, snapshotEpoch, leaderEpoch, data)
			return
		}
		im, err := metadata.DecodeSnapshot(data)
		if err != nil || im.Offset() != endOffset-1 {
			n.after(metadataFetchBackoffMs, n.fetchMetadata)
			return
		}
		usableBefore := n.usableBrokers()
		deleted := topicsDeletedBetween(n.image, im)
		n.image = im
		n.onTopicsDeleted(deleted)
		n.reconcilePartitions()
		n.updateIneligibleReplicas(usableBefore)
		n.reconsiderUnfenced(usableBefore)
		n.fetchMetadata()
	})
}

// onMetadataFetched applies a metadata fetch response; it reports whether
// the next fetch may go at once.
func (n *Node) onMetadataFetched(resp *kmsg.FetchResponse) bool {
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return false
	}
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode == kerr.OffsetOutOfRange.Code && part.SnapshotID.EndOffset > n.image.Offset()+1 {
		// Behind the metadata log's start: read the snapshot instead.
		n.fetchMetadataSnapshot(part.SnapshotID.EndOffset, part.SnapshotID.Epoch, part.CurrentLeader.LeaderEpoch, nil)
		return false
	}
	if part.ErrorCode != 0 {
		return false
	}
	batches, err := metadata.DecodeBatches(part.RecordBatches)
	if err != nil {
		return false
	}
	n.applyMetadata(batches)
	return n.metadataFetch.err == nil
}

// applyMetadata applies committed metadata batches to the image, tells the
// group coordinators which topics were deleted, then brings the hosted
// partitions in line with it.
func (n *Node) applyMetadata(batches []metadata.Batch) {
	usableBefore := n.usableBrokers()
	var deleted []string // topic names, in the log's order
apply:
	for _, b := range batches {
		for i, rec := range b.Records {
			offset := b.BaseOffset + int64(i)
			if offset <= n.image.Offset() {
				continue
			}
			var removed metadata.Topic
			if r, ok := rec.(*metadata.RemoveTopicRecord); ok {
				removed, _ = n.image.TopicByID(r.TopicID)
			}
			if err := n.image.Apply(offset, rec); err != nil {
				n.metadataFetch.err = err
				break apply
			}
			if removed.Name != "" {
				deleted = append(deleted, removed.Name)
			}
		}
	}
	n.onTopicsDeleted(deleted)
	n.reconcilePartitions()
	n.updateIneligibleReplicas(usableBefore)
	n.reconsiderUnfenced(usableBefore)
}

// updateIneligibleReplicas hands every hosted partition the replicas the
// image shows unusable (fenced, shutting down, unregistered), when that set
// changed: a leader neither adds them to the ISR nor lets them hold its HW
// back (replica.SetIneligibleReplicas, Kafka's isReplicaIsrEligible).
func (n *Node) updateIneligibleReplicas(usableBefore map[int32]bool) {
	if maps.Equal(usableBefore, n.usableBrokers()) {
		return
	}
	for _, p := range n.sortedPartitions() {
		n.setIneligibleReplicas(p)
		n.afterReplicaChange(p)
	}
}

// setIneligibleReplicas tells p's replica which of its replicas the image
// shows unusable.
func (n *Node) setIneligibleReplicas(p *partition) {
	usable := n.usableBrokers()
	var ineligible []int32
	for _, r := range p.replica.State().Replicas {
		if !usable[r] {
			ineligible = append(ineligible, r)
		}
	}
	p.replica.SetIneligibleReplicas(ineligible, n.nowMs())
}

// usableBrokers is the set of registered, unfenced brokers not shutting
// down: those a leader may add to an ISR (KIP-841).
func (n *Node) usableBrokers() map[int32]bool {
	usable := map[int32]bool{}
	for _, id := range n.image.BrokerIDs() {
		if b, _ := n.image.Broker(id); !b.Fenced && !b.InControlledShutdown {
			usable[id] = true
		}
	}
	return usable
}

// reconsiderUnfenced hands the current state again to every partition this
// node leads that has a replica which just became usable. A leader whose
// ISR expansion the controller refused (INELIGIBLE_REPLICA, the replica was
// still fenced) proposes that replica again only after a pushed state, and
// unfencing is a broker record, not a partition change: Kafka's leader
// reads the fenced flag from its metadata cache instead.
func (n *Node) reconsiderUnfenced(usableBefore map[int32]bool) {
	usableNow := n.usableBrokers()
	for _, p := range n.sortedPartitions() {
		if p.replica.Role() != replica.RoleLeader {
			continue
		}
		s := p.replica.State()
		for _, r := range s.Replicas {
			if usableNow[r] && !usableBefore[r] {
				if _, err := p.replica.ApplyState(s, n.nowMs()); err == nil {
					n.afterReplicaChange(p)
				}
				break
			}
		}
	}
}

// reconcilePartitions opens the partitions the image assigns to this broker
// and hands each its new state (become leader or follower, with the epoch),
// and retires the replicas of deleted topics.
//
// Nothing happens until this incarnation is registered and the image has
// caught up with its registration, as Kafka's broker waits for its initial
// catch-up: until then the image may still name this broker leader on
// behalf of its previous incarnation, whose log a power loss may have
// emptied. The registration takes the new incarnation out of every ISR
// and leadership, so it starts as a follower.
func (n *Node) reconcilePartitions() {
	if !n.cfg.Broker.Roles.Broker || !n.caughtUpWithRegistration() {
		return
	}
	if !n.initialCatchUpDone {
		n.deleteStrayLogs()
	}
	n.noticeInitialCatchUp()
	for _, p := range n.sortedPartitions() {
		if t, ok := n.image.TopicByName(p.key.topic); !ok || t.ID != p.topicID {
			n.retirePartition(p)
		}
	}
	for _, tp := range n.image.PartitionsOf(n.id) {
		state, ok := n.image.Partition(tp.TopicID, tp.Partition)
		if !ok {
			continue
		}
		key := partitionKey{tp.Topic, tp.Partition}
		p := n.partitions[key]
		if p == nil {
			var err error
			if p, err = n.openPartition(tp); err != nil {
				n.markPartitionOffline(tp, err)
				continue // the partition stays offline here
			}
			n.partitions[key] = p
		}
		if p.appliedPartitionEpoch == state.PartitionEpoch && p.appliedLeaderEpoch == state.LeaderEpoch {
			continue
		}
		n.applyPartitionState(p, state)
		n.setIneligibleReplicas(p)
		n.afterReplicaChange(p)
	}
	n.forgetOfflinePartitions()
	n.applyTopicConfigs()
	n.publishScramCredentials()
	n.wakeAllFetchWaiters()
}

// retirePartition stops serving a replica of a deleted topic and deletes
// its log. What waits on it is answered at once, as Kafka's stopPartitions
// completes the delayed operations of a partition it stops hosting: the
// produces waiting on it are taken from their purgatories in this step, so
// that nothing acknowledges them, and answered on the next turn
// (answerRetired); parked fetches notice at the wake that follows
// reconcilePartitions.
func (n *Node) retirePartition(p *partition) {
	n.cfg.Log.Info("deleting the log of a deleted topic's partition", slog.String("topic", p.key.topic),
		slog.Int("partition", int(p.key.index)), slog.Int64("log_end_offset", p.log.LogEndOffset()))
	delete(n.partitions, p.key)
	p.retired = true
	waits := n.takeProduceWaits(p)
	n.after(0, func() { n.answerRetired(p, waits) })
	n.unfollow(p)
	_ = p.manager.DeleteLog(log.TopicPartition{Topic: p.key.topic, Partition: p.key.index}, nil) // a failure leaves files behind only
}

// caughtUpWithRegistration reports whether this incarnation's
// registration is in the image it has applied.
func (n *Node) caughtUpWithRegistration() bool {
	if n.brokerEpoch < 0 {
		return false
	}
	b, ok := n.image.Broker(n.id)
	return ok && b.Epoch == n.brokerEpoch && b.IncarnationID == n.incarnation
}

// applyPartitionState performs what ApplyState decides.
func (n *Node) applyPartitionState(p *partition, state metadata.PartitionState) {
	tr, err := p.replica.ApplyState(replicaStateOf(state), n.nowMs())
	if err != nil {
		return // older than what the replica already holds
	}
	if state.LeaderEpoch != p.appliedLeaderEpoch {
		n.endFetchBackoff(p)
	}
	p.appliedPartitionEpoch, p.appliedLeaderEpoch = state.PartitionEpoch, state.LeaderEpoch
	if tr.TruncateToOffset != replica.NoOffset {
		_ = p.log.TruncateTo(tr.TruncateToOffset) // a failed log fails later calls
	}
	if tr.Role == replica.RoleFollower && state.Leader >= 0 && state.Leader != n.id {
		n.follow(p, state.Leader)
	} else {
		n.unfollow(p)
	}
	n.afterReplicaChange(p)
}

func replicaStateOf(s metadata.PartitionState) replica.PartitionState {
	return replica.PartitionState{
		LeaderID: s.Leader, LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch,
		Replicas: s.Replicas, ISR: s.ISR, ELR: s.ELR, LastKnownELR: s.LastKnownELR,
	}
}

// securityProtocolID is Kafka's SecurityProtocol id.
func securityProtocolID(name string) int16 {
	switch name {
	case "SSL":
		return 1
	case "SASL_PLAINTEXT":
		return 2
	case "SASL_SSL":
		return 3
	}
	return 0
}
