package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/controller"
	"strand/core/metadata"
)

// metadataFollower is the broker's side of the metadata log: it fetches
// __cluster_metadata-0 from the active controller and applies each batch to
// the node's Image (design-broker.md, metadata fetch), then brings the
// partitions and group coordinators in line with it. It also keeps the
// broker's registration in that log (Kafka's BrokerLifecycleManager:
// register, heartbeats, the controlled shutdown), and answers the APIs
// read from the image alone (Metadata, DescribeCluster, DescribeConfigs).
type metadataFollower struct {
	*nodeEnv
	// controllerRole carries the fetches, registrations and heartbeats to
	// the active controller; parts and groups are brought in line with
	// each metadata change.
	controllerRole *controllerRole
	parts          *partitionManager
	groups         *groupCoordinators

	// acls is rebuilt from the image's ACLs as ACL records apply.
	acls *aclState

	// image is the committed metadata this node has applied.
	image *metadata.Image
	// scramPublished is the SCRAM credential set last handed to the
	// environment (publishScramCredentials).
	scramPublished *metadata.ScramCredentials
	// inFlight is set while a metadata fetch is.
	inFlight bool
	// err is the first record that did not apply: the follower stops,
	// because applying later records would diverge from the controller.
	err error

	// brokerEpoch is the epoch the controller gave our registration, -1
	// until registered.
	brokerEpoch int64
	// previousBrokerEpoch is the epoch of the last clean shutdown, -1 if
	// the last process did not shut down cleanly.
	previousBrokerEpoch int64
	// registerBackoffMs is the wait before the next BrokerRegistration
	// retry (register); 0 after a success.
	registerBackoffMs int64
	// heartbeatSeq numbers heartbeats, so that only the newest one's answer
	// schedules the next (BeginShutdown sends one out of turn).
	heartbeatSeq uint64
	// initialCatchUpDone latches the first caughtUpWithRegistration
	// (noticeInitialCatchUp).
	initialCatchUpDone bool
	// initialUnfenceDone latches Config.OnInitialUnfence (noticeReady).
	initialUnfenceDone bool
	// shutdownDone is set during a controlled shutdown; shutdownClean once
	// the controller has allowed it.
	shutdownDone  func()
	shutdownClean bool
}

// startBroker registers this broker with the controller (once the removal
// of the clean-shutdown marker is durable), starts following the metadata
// log and arms the ISR-shrink timer.
func (mf *metadataFollower) startBroker() {
	mf.disks[0].SyncDir(".", func(err error) {
		if err != nil {
			// The marker may come back after a crash: register as unclean.
			mf.previousBrokerEpoch = -1
		}
		mf.register()
	})
	mf.fetchMetadata()
	mf.parts.scheduleISRCheck()
}

// registrationRequest is this broker's BrokerRegistration, with the epoch
// of the last clean shutdown or -1 (KIP-966: an unclean restart leaves every
// ELR).
func (mf *metadataFollower) registrationRequest() *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(3)
	req.BrokerID = mf.id
	req.IncarnationID = mf.incarnation
	req.PreviousBrokerEpoch = mf.previousBrokerEpoch
	for _, l := range mf.cfg.Broker.AdvertisedListeners {
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
func (mf *metadataFollower) register() {
	mf.controllerRole.toController(mf.registrationRequest(), func(r kmsg.Response, err error) {
		if err != nil || r.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
			mf.registerBackoffMs = min(max(2*mf.registerBackoffMs, registerBackoffMsMin), registerBackoffMsMax)
			mf.after(mf.registerBackoffMs, mf.register)
			return
		}
		mf.registerBackoffMs = 0
		mf.brokerEpoch = r.(*kmsg.BrokerRegistrationResponse).BrokerEpoch
		mf.previousBrokerEpoch = -1 // spent: a later registration follows a crash
		mf.reconcilePartitions()
		mf.heartbeat()
	})
}

// heartbeat sends one BrokerHeartbeat and schedules the next. A stale
// epoch (the controller lost or replaced our registration) registers again.
// A broker with a failed log directory asks to be fenced, so that its
// leaderships move (CLARIFICATIONS.md, "Disk faults in the broker").
func (mf *metadataFollower) heartbeat() {
	epoch := mf.brokerEpoch
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = mf.id, epoch, mf.image.Offset()
	req.WantFence = mf.parts.storageFailed()
	req.WantShutdown = mf.shutdownDone != nil
	mf.heartbeatSeq++
	seq := mf.heartbeatSeq
	mf.controllerRole.toController(req, func(r kmsg.Response, err error) {
		if mf.brokerEpoch != epoch || mf.heartbeatSeq != seq {
			return // superseded by a newer heartbeat or registration
		}
		var resp *kmsg.BrokerHeartbeatResponse
		if err == nil {
			resp = r.(*kmsg.BrokerHeartbeatResponse)
		}
		switch {
		case resp != nil && resp.ErrorCode == kerr.StaleBrokerEpoch.Code:
			mf.brokerEpoch = -1
			mf.register()
			return
		case resp != nil && resp.ErrorCode == 0 && resp.ShouldShutdown && mf.shutdownDone != nil:
			done := mf.shutdownDone
			mf.shutdownDone = nil
			done()
			return
		}
		interval := int64(mf.cfg.Broker.BrokerHeartbeatIntervalMs)
		if mf.shutdownDone != nil {
			interval = min(interval, shutdownHeartbeatIntervalMs)
		}
		if resp != nil && resp.ErrorCode == 0 && !resp.IsCaughtUp {
			interval = min(interval, startingHeartbeatIntervalMs)
		}
		mf.after(interval, mf.heartbeat)
	})
}

// fetchMetadata sends the next metadata-log fetch to the controller (the
// local one in process when this node is it).
func (mf *metadataFollower) fetchMetadata() {
	if mf.inFlight || mf.err != nil {
		return
	}
	mf.inFlight = true
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = mf.id
	req.MaxWaitMillis = replicaFetchMaxWaitMs
	req.MinBytes = 1
	req.MaxBytes = replicaFetchResponseMaxBytes
	t := kmsg.NewFetchRequestTopic()
	t.Topic = controller.MetadataTopic
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset = mf.image.Offset() + 1
	p.PartitionMaxBytes = replicaFetchResponseMaxBytes
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	sentNs := mf.clock.MonotonicNs()
	mf.controllerRole.toController(req, func(r kmsg.Response, err error) {
		mf.inFlight = false
		if err != nil || !mf.onMetadataFetched(r.(*kmsg.FetchResponse), sentNs) {
			if !mf.inFlight { // unless a snapshot fetch took over
				mf.after(metadataFetchBackoffMs, mf.fetchMetadata)
			}
			return
		}
		mf.fetchMetadata()
	})
}

// fetchMetadataSnapshot reads the controller's snapshot (endOffset,
// snapshotEpoch) in chunks with FetchSnapshot from position len(data), in
// the quorum's leaderEpoch, then replaces the image with it and follows the
// log from there (KIP-630, as a broker behind the log start does). Any
// failure starts over with a metadata fetch, which names the current
// snapshot.
func (mf *metadataFollower) fetchMetadataSnapshot(endOffset int64, snapshotEpoch, leaderEpoch int32, data []byte) {
	mf.inFlight = true
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.SetVersion(0)
	req.ReplicaID, req.MaxBytes = mf.id, replicaFetchResponseMaxBytes
	p := kmsg.NewFetchSnapshotRequestTopicPartition()
	p.CurrentLeaderEpoch, p.Position = leaderEpoch, int64(len(data))
	p.SnapshotID.EndOffset, p.SnapshotID.Epoch = endOffset, snapshotEpoch
	t := kmsg.NewFetchSnapshotRequestTopic()
	t.Topic, t.Partitions = controller.MetadataTopic, []kmsg.FetchSnapshotRequestTopicPartition{p}
	req.Topics = []kmsg.FetchSnapshotRequestTopic{t}
	mf.controllerRole.toController(req, func(r kmsg.Response, err error) {
		mf.inFlight = false
		resp, _ := r.(*kmsg.FetchSnapshotResponse)
		if err != nil || resp == nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			mf.after(metadataFetchBackoffMs, mf.fetchMetadata)
			return
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.Position != int64(len(data)) || rp.Size < rp.Position+int64(len(rp.Bytes)) {
			mf.after(metadataFetchBackoffMs, mf.fetchMetadata)
			return
		}
		data = append(data, rp.Bytes...)
		if int64(len(data)) < rp.Size {
			if len(rp.Bytes) == 0 {
				mf.after(metadataFetchBackoffMs, mf.fetchMetadata) // no progress
				return
			}
			mf.fetchMetadataSnapshot(endOffset, snapshotEpoch, leaderEpoch, data)
			return
		}
		im, err := metadata.DecodeSnapshot(data)
		if err != nil || im.Offset() != endOffset-1 {
			mf.after(metadataFetchBackoffMs, mf.fetchMetadata)
			return
		}
		usableBefore := mf.usableBrokers()
		deleted := topicsDeletedBetween(mf.image, im)
		mf.image = im
		mf.rebuildAuthorizer()
		mf.groups.onTopicsDeleted(deleted)
		mf.reconcilePartitions()
		mf.parts.updateIneligibleReplicas(usableBefore)
		mf.parts.reconsiderUnfenced(usableBefore)
		mf.fetchMetadata()
	})
}

// onMetadataFetched applies a metadata fetch response to a fetch sent at
// sentNs; it reports whether the next fetch may go at once.
func (mf *metadataFollower) onMetadataFetched(resp *kmsg.FetchResponse, sentNs int64) bool {
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return false
	}
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode == kerr.OffsetOutOfRange.Code && part.SnapshotID.EndOffset > mf.image.Offset()+1 {
		// Behind the metadata log's start: read the snapshot instead.
		mf.fetchMetadataSnapshot(part.SnapshotID.EndOffset, part.SnapshotID.Epoch, part.CurrentLeader.LeaderEpoch, nil)
		return false
	}
	if part.ErrorCode != 0 {
		return false
	}
	batches, err := metadata.DecodeBatches(part.RecordBatches)
	if err != nil {
		return false
	}
	mf.applyMetadata(batches)
	if mf.err != nil {
		return false
	}
	mf.acls.noteCaughtUp(sentNs, mf.image.Offset(), part.HighWatermark)
	return true
}

// applyMetadata applies committed metadata batches to the image, tells the
// group coordinators which topics were deleted, then brings the hosted
// partitions in line with it.
func (mf *metadataFollower) applyMetadata(batches []metadata.Batch) {
	usableBefore := mf.usableBrokers()
	var deleted []string // topic names, in the log's order
	aclsChanged := false
apply:
	for _, b := range batches {
		for i, rec := range b.Records {
			offset := b.BaseOffset + int64(i)
			if offset <= mf.image.Offset() {
				continue
			}
			var removed metadata.Topic
			if r, ok := rec.(*metadata.RemoveTopicRecord); ok {
				removed, _ = mf.image.TopicByID(r.TopicID)
			}
			if err := mf.image.Apply(offset, rec); err != nil {
				mf.err = err
				break apply
			}
			if removed.Name != "" {
				deleted = append(deleted, removed.Name)
			}
			switch rec.(type) {
			case *metadata.AccessControlEntryRecord, *metadata.RemoveAccessControlEntryRecord:
				aclsChanged = true
			}
		}
	}
	if aclsChanged {
		mf.rebuildAuthorizer()
	}
	mf.groups.onTopicsDeleted(deleted)
	mf.reconcilePartitions()
	mf.parts.updateIneligibleReplicas(usableBefore)
	mf.parts.reconsiderUnfenced(usableBefore)
}

// rebuildAuthorizer builds the authorizer from the image's ACLs and hands
// the produce pre-check the new one.
func (mf *metadataFollower) rebuildAuthorizer() {
	if mf.acls.rebuild(mf.image) {
		mf.parts.publishPrecheckView()
	}
}

// usableBrokers is the set of registered, unfenced brokers not shutting
// down: those a leader may add to an ISR (KIP-841).
func (mf *metadataFollower) usableBrokers() map[int32]bool {
	usable := map[int32]bool{}
	for _, id := range mf.image.BrokerIDs() {
		if b, _ := mf.image.Broker(id); !b.Fenced && !b.InControlledShutdown {
			usable[id] = true
		}
	}
	return usable
}

// reconcilePartitions brings the hosted partitions in line with the image
// (partitionManager.reconcilePartitions).
//
// Nothing happens until this incarnation is registered and the image has
// caught up with its registration, as Kafka's broker waits for its initial
// catch-up: until then the image may still name this broker leader on
// behalf of its previous incarnation, whose log a power loss may have
// emptied. The registration takes the new incarnation out of every ISR
// and leadership, so it starts as a follower.
func (mf *metadataFollower) reconcilePartitions() {
	if !mf.cfg.Broker.Roles.Broker || !mf.caughtUpWithRegistration() {
		return
	}
	if !mf.initialCatchUpDone {
		mf.parts.deleteStrayLogs()
	}
	mf.noticeInitialCatchUp()
	mf.parts.reconcilePartitions()
	mf.publishScramCredentials()
}

// caughtUpWithRegistration reports whether this incarnation's
// registration is in the image it has applied.
func (mf *metadataFollower) caughtUpWithRegistration() bool {
	if mf.brokerEpoch < 0 {
		return false
	}
	b, ok := mf.image.Broker(mf.id)
	return ok && b.Epoch == mf.brokerEpoch && b.IncarnationID == mf.incarnation
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

// brokerAlive reports whether broker id is registered and unfenced: only
// such followers hold a DeleteRecords low watermark back (Kafka's
// metadataCache.hasAliveBroker).
func (mf *metadataFollower) brokerAlive(id int32) bool {
	b, ok := mf.image.Broker(id)
	return ok && !b.Fenced
}

// noticeInitialCatchUp runs where the image has caught up with this
// incarnation's registration.
func (mf *metadataFollower) noticeInitialCatchUp() {
	mf.initialCatchUpDone = true
	mf.noticeReady()
}

// noticeReady reports the broker ready for clients (Config.OnInitialUnfence)
// the first time its image, which Metadata answers from, has caught up and
// shows this incarnation unfenced.
func (mf *metadataFollower) noticeReady() {
	if mf.initialUnfenceDone || !mf.initialCatchUpDone || !mf.caughtUpWithRegistration() {
		return
	}
	if b, _ := mf.image.Broker(mf.id); b.Fenced {
		return
	}
	mf.initialUnfenceDone = true
	if mf.cfg.OnInitialUnfence != nil {
		mf.cfg.OnInitialUnfence()
	}
}
