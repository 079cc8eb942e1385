package broker

import (
	"log/slog"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/group"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/replica"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group
// metadata. Each of its partitions has a group coordinator (core/group)
// on the broker that leads it.
const offsetsTopic = "__consumer_offsets"

const (
	// offsetCommitTimeoutMs is offsets.commit.timeout.ms (Kafka's default):
	// how long a coordinator's append waits for acks=all before it fails.
	offsetCommitTimeoutMs = 5000
	// offsetsLoadStepBytes bounds the log bytes one loading step reads
	// (Kafka's offsets.load.buffer.size), so that loading a large
	// partition does not hold the event loop.
	offsetsLoadStepBytes = 5 << 20
	// offsetsLoadStepPauseMs is the pause between loading steps: other
	// events run in between, and requests meanwhile get
	// COORDINATOR_LOAD_IN_PROGRESS.
	offsetsLoadStepPauseMs = 1
)

// groupCoordinators are the group coordinators of the __consumer_offsets
// partitions this broker leads (Kafka's GroupCoordinator), with the group
// APIs they serve: loaded from their partition's log when this broker
// becomes its leader, unloaded when it stops, writing through the
// partition's acks=all produce path.
type groupCoordinators struct {
	*nodeEnv
	// meta is the metadata (the offsets topic, the topics offsets are
	// committed for), parts the __consumer_offsets partitions' logs, and
	// controllerRole how __consumer_offsets is created.
	meta           *metadataFollower
	parts          *partitionManager
	controllerRole *controllerRole
	// acls authorizes the groups and topics the group APIs name
	// (authorize_groups.go).
	acls *aclState
	// coordinators are the coordinators of the __consumer_offsets
	// partitions this broker leads, by partition.
	coordinators map[int32]*coordinatorSlot
	// unloadedCoordinator answers NOT_COORDINATOR for the others.
	unloadedCoordinator *group.Coordinator
	// offsetsTopicCreating is set while a creation of __consumer_offsets
	// is in flight.
	offsetsTopicCreating bool
}

// coordinatorSlot is the group coordinator of one __consumer_offsets
// partition this broker leads.
type coordinatorSlot struct {
	c *group.Coordinator
	// leaderEpoch is the epoch the coordinator was loaded for: a new epoch,
	// even with this broker leading again, reloads from the log.
	leaderEpoch int32
	// loadNext is the next offset to load and loadEnd the LEO when loading
	// began; loading is over when loadNext reaches loadEnd.
	loadNext, loadEnd int64
	// awaitingHW is set once the log is read up to loadEnd while the high
	// watermark is still below it: loading finishes when the HW gets there.
	awaitingHW bool
	// retired is set when the slot is replaced; its pending load steps stop.
	retired bool
}

// offsetsStore is a coordinator's group.Store: the normal leader append
// path of its partition, with acks=all.
type offsetsStore struct {
	gc    *groupCoordinators
	index int32
}

// Append appends b to the partition as an acks=all produce would, and
// calls done once the HW passes it (or with the produce's error). done
// always runs from a later event, never inside Append, so the coordinator
// never sees its completion re-enter it.
func (s offsetsStore) Append(b []byte, done func(error)) {
	s.gc.appendOffsets(s.index, b, done)
}

func (gc *groupCoordinators) appendOffsets(index int32, b []byte, done func(error)) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = replica.AcksAll, offsetCommitTimeoutMs
	part := kmsg.NewProduceResponseTopicPartition()
	part.Partition = index
	pending := &pendingProduce{remaining: 1, deadlineMs: gc.deadlineMs(offsetCommitTimeoutMs)}
	pending.onDone = func() {
		code := part.ErrorCode
		gc.after(0, func() {
			if code != 0 {
				done(kerr.ErrorForCode(code))
				return
			}
			done(nil)
		})
	}
	slot := &produceSlot{pending: pending, part: &part}
	// The coordinator's own batch: no client's decompression budget.
	if code := gc.parts.produceOne(partitionKey{offsetsTopic, index}, req, b, slot, nil); code != 0 {
		part.ErrorCode = code
	}
	gc.parts.releaseProduce(pending)
}

// offsetsPartitions is the number of __consumer_offsets partitions: the
// topic's own once it exists (the configuration may have changed since it
// was created), offsets.topic.num.partitions before.
func (gc *groupCoordinators) offsetsPartitions() int32 {
	if t, ok := gc.meta.image.TopicByName(offsetsTopic); ok && t.Partitions > 0 {
		return t.Partitions
	}
	return gc.cfg.Broker.OffsetsTopicNumPartitions
}

// coordinatorFor is the coordinator that answers for groupID: the loaded
// (or loading) coordinator of its partition, or one that answers
// NOT_COORDINATOR when this broker does not lead that partition.
func (gc *groupCoordinators) coordinatorFor(groupID string) *group.Coordinator {
	if s := gc.coordinators[group.PartitionFor(groupID, gc.offsetsPartitions())]; s != nil {
		return s.c
	}
	return gc.notCoordinator()
}

// notCoordinator is a coordinator that is never loaded: it answers every
// request NOT_COORDINATOR in that request's own response shape.
func (gc *groupCoordinators) notCoordinator() *group.Coordinator {
	if gc.unloadedCoordinator == nil {
		c, err := group.New(group.DefaultConfig(0, 1), gc.clock, offsetsStore{gc: gc, index: 0}, group.IDSource(gc.newID))
		if err != nil {
			panic("broker: group.DefaultConfig refused: " + err.Error())
		}
		gc.unloadedCoordinator = c
	}
	return gc.unloadedCoordinator
}

// groupConfig is the coordinator configuration for partition index of
// partitions, from server.properties.
func (gc *groupCoordinators) groupConfig(index, partitions int32) group.Config {
	cfg := group.DefaultConfig(index, partitions)
	cfg.GroupInitialRebalanceDelayMs = gc.cfg.Broker.GroupInitialRebalanceDelayMs
	cfg.OffsetsRetentionMs = int64(gc.cfg.Broker.OffsetsRetentionMinutes) * 60 * 1000
	cfg.Bugs = gc.cfg.Bugs.Group
	cfg.Log = gc.cfg.Log.With(slog.String("component", "group_coordinator"), slog.Int("offsets_partition", int(index)))
	cfg.PartitionExists = func(topic string, p int32) bool {
		_, ok := gc.meta.image.PartitionByName(topic, p)
		return ok
	}
	return cfg
}

// syncCoordinator starts or stops the coordinator of a __consumer_offsets
// partition as this broker gains or loses its leadership. It runs after
// every change of the partition's replica (afterReplicaChange).
func (gc *groupCoordinators) syncCoordinator(p *partition) {
	if p.key.topic != offsetsTopic {
		return
	}
	index := p.key.index
	leading := p.replica.Role() == replica.RoleLeader && !p.storageFailed() &&
		gc.parts.partitions[p.key] == p && index < gc.offsetsPartitions()
	epoch := p.replica.LeaderEpoch()
	if s := gc.coordinators[index]; s != nil {
		if leading && s.leaderEpoch == epoch {
			gc.finishLoadAtHW(p, s)
			return
		}
		s.retired = true
		s.c.Unload()
		delete(gc.coordinators, index)
		gc.cfg.Log.Info("resigned as the group coordinator", slog.String("topic", offsetsTopic),
			slog.Int("partition", int(index)), slog.Int("leader_epoch", int(s.leaderEpoch)))
	}
	if !leading {
		return
	}
	c, err := group.New(gc.groupConfig(index, gc.offsetsPartitions()), gc.clock, offsetsStore{gc: gc, index: index}, group.IDSource(gc.newID))
	if err != nil {
		// New validated the same settings (groupConfig(0, 1)); only the
		// partition count differs, and the image never holds a topic
		// without partitions.
		panic("broker: group coordinator settings refused after New accepted them: " + err.Error())
	}
	s := &coordinatorSlot{c: c, leaderEpoch: epoch, loadNext: p.log.LogStartOffset(), loadEnd: p.log.LogEndOffset()}
	gc.cfg.Log.Info("elected as the group coordinator; loading the partition", slog.String("topic", offsetsTopic),
		slog.Int("partition", int(index)), slog.Int("leader_epoch", int(epoch)),
		slog.Int64("load_from_offset", s.loadNext), slog.Int64("load_to_offset", s.loadEnd))
	gc.coordinators[index] = s
	c.BeginLoad()
	gc.after(0, func() { gc.loadStep(p, s) })
}

// loadStep loads one bounded stretch of the partition's log into the
// coordinator, and finishes loading at the LEO the load began with.
// Batches the coordinator cannot decode (written by someone else) are
// skipped: the rest of the partition's groups still load.
func (gc *groupCoordinators) loadStep(p *partition, s *coordinatorSlot) {
	if s.retired {
		return
	}
	if s.loadNext < p.log.LogStartOffset() {
		s.loadNext = p.log.LogStartOffset() // retention or compaction moved the start
	}
	if s.loadNext >= s.loadEnd {
		s.awaitingHW = true
		gc.finishLoadAtHW(p, s)
		return
	}
	res, err := p.log.Read(s.loadNext, offsetsLoadStepBytes, s.loadEnd, true)
	var data []byte
	if err == nil {
		data, err = log.CopyRegions(res.Regions)
	}
	if err != nil || res.NextOffset <= s.loadNext {
		// The log failed or was truncated under the load: a leadership
		// change follows; until then retry.
		gc.after(replicaFetchBackoffMs, func() { gc.loadStep(p, s) })
		return
	}
	for _, b := range splitBatches(data) {
		if recs, err := group.DecodeBatch(b); err == nil {
			_ = s.c.Load(recs) // a record it cannot decode is skipped with its batch
		}
	}
	s.loadNext = res.NextOffset
	gc.after(offsetsLoadStepPauseMs, func() { gc.loadStep(p, s) })
}

// finishLoadAtHW ends a load whose records are all read once the high
// watermark has passed them. Until then the loaded state may include
// records the previous leader appended but never got replicated: if this
// leader failed too, they could vanish, and an OffsetFetch answered from
// them would have shown a commit that then disappears.
func (gc *groupCoordinators) finishLoadAtHW(p *partition, s *coordinatorSlot) {
	if s.awaitingHW && p.replica.HighWatermark() >= s.loadEnd {
		s.awaitingHW = false
		s.c.FinishLoad()
		gc.scheduleOffsetsExpiry(s)
	}
}

// scheduleOffsetsExpiry runs the loaded coordinator's offset expiry every
// offsets.retention.check.interval.ms until the slot is retired, as
// Kafka's coordinator schedules its cleanup when it loads a partition.
func (gc *groupCoordinators) scheduleOffsetsExpiry(s *coordinatorSlot) {
	intervalMs := gc.cfg.Broker.OffsetsRetentionCheckIntervalMs
	if intervalMs <= 0 {
		panic("broker: offsets.retention.check.interval.ms is not positive; config validates it")
	}
	gc.after(intervalMs, func() {
		if s.retired {
			return
		}
		s.c.ExpireOffsets()
		gc.scheduleOffsetsExpiry(s)
	})
}

// splitBatches cuts concatenated RecordBatches at their length fields.
// The log hands out whole batches only, so a short tail is dropped.
func splitBatches(data []byte) [][]byte {
	var out [][]byte
	for len(data) >= batch.HeaderBytes {
		h, err := batch.ParseHeader(data)
		if err != nil || h.TotalBytes() <= batch.LogOverheadBytes || h.TotalBytes() > int64(len(data)) {
			break
		}
		out = append(out, data[:h.TotalBytes()])
		data = data[h.TotalBytes():]
	}
	return out
}

// ensureOffsetsTopic asks the controller to create __consumer_offsets, as
// Kafka's broker does on the first FindCoordinator for a group: compacted,
// with offsets.topic.num.partitions partitions and
// offsets.topic.replication.factor replicas. With fewer live brokers than
// that the controller refuses (INVALID_REPLICATION_FACTOR), as Kafka
// does, and the next FindCoordinator asks again. One request is in
// flight at a time.
func (gc *groupCoordinators) ensureOffsetsTopic() {
	if gc.offsetsTopicCreating {
		return
	}
	if _, ok := gc.meta.image.TopicByName(offsetsTopic); ok {
		return
	}
	gc.offsetsTopicCreating = true
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = offsetsTopic
	t.NumPartitions = gc.cfg.Broker.OffsetsTopicNumPartitions
	t.ReplicationFactor = gc.cfg.Broker.OffsetsTopicReplicationFactor
	// Kafka's groupMetadataTopicConfigs.
	segmentBytes := strconv.FormatInt(int64(gc.cfg.Broker.OffsetsTopicSegmentBytes), 10)
	for _, kv := range [][2]string{{"cleanup.policy", "compact"}, {"compression.type", "producer"}, {"segment.bytes", segmentBytes}} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		name, value := kv[0], kv[1]
		c.Name, c.Value = name, &value
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	gc.controllerRole.toController(req, func(kmsg.Response, error) { gc.offsetsTopicCreating = false })
}

// groupFanout is a request naming several groups on its way to their
// coordinators: owners[i] answers for the i-th group.
type groupFanout struct {
	owners    []*group.Coordinator
	answers   map[*group.Coordinator]kmsg.Response
	remaining int
}

// fanOutGroups serves a request naming several groups: each distinct
// coordinator gets the whole request (it answers NOT_COORDINATOR for the
// groups that are not its own), and merge gets, for the i-th group, the
// answer of that group's coordinator. With no groups, merge gets one answer
// (NOT_COORDINATOR's shape) to build an empty response from.
func (gc *groupCoordinators) fanOutGroups(req kmsg.Request, client group.Client, groups []string, merge func(answers []kmsg.Response)) {
	f := &groupFanout{answers: map[*group.Coordinator]kmsg.Response{}}
	var distinct []*group.Coordinator
	for _, g := range groups {
		c := gc.coordinatorFor(g)
		f.owners = append(f.owners, c)
		if _, seen := f.answers[c]; !seen {
			f.answers[c] = nil
			distinct = append(distinct, c)
		}
	}
	if len(distinct) == 0 {
		distinct = append(distinct, gc.notCoordinator())
	}
	f.remaining = len(distinct)
	for _, c := range distinct {
		c.Handle(req, client, func(resp kmsg.Response) {
			f.answers[c] = resp
			f.remaining--
			if f.remaining > 0 {
				return
			}
			out := make([]kmsg.Response, len(f.owners))
			for i, owner := range f.owners {
				out[i] = f.answers[owner]
			}
			if len(out) == 0 {
				out = append(out, f.answers[distinct[0]])
			}
			merge(out)
		})
	}
}

// handleGroupRequest serves a request about one group: its coordinator
// answers.
func (gc *groupCoordinators) handleGroupRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request, groupID string) {
	gc.handleGroupRequestThen(conn, hdr, req, groupID, func(resp kmsg.Response) kmsg.Response { return resp })
}

// handleGroupRequestThen serves a request about one group, completing its
// coordinator's answer with complete (the parts authorization refused).
func (gc *groupCoordinators) handleGroupRequestThen(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request, groupID string, complete func(kmsg.Response) kmsg.Response) {
	gc.coordinatorFor(groupID).Handle(req, group.Client{ClientID: hdr.ClientID, ClientHost: hdr.ClientHost}, func(resp kmsg.Response) {
		gc.net.Reply(conn, hdr.CorrelationID, complete(resp))
	})
}

// onTopicsDeleted tells every group coordinator this broker leads, by
// partition, that topics were deleted, in the order the metadata log
// deleted them: each appends tombstones for its groups' committed offsets
// of them (group.Coordinator.OnTopicDeleted), as Kafka's
// GroupCoordinatorService.onPartitionsDeleted does, so that a topic
// created again under the same name is not read from the old topic's
// offsets. A coordinator still loading ignores them, as Kafka's does.
func (gc *groupCoordinators) onTopicsDeleted(topics []string) {
	if len(topics) == 0 {
		return
	}
	indexes := make([]int32, 0, len(gc.coordinators))
	for index := range gc.coordinators { // order-independent: sorted below
		indexes = append(indexes, index)
	}
	slices.Sort(indexes)
	for _, index := range indexes {
		for _, topic := range topics {
			gc.coordinators[index].c.OnTopicDeleted(topic)
		}
	}
}

// topicsDeletedBetween are the topics of before that after no longer has
// (absent, or a new topic of the same name), by name: what a metadata
// snapshot replacing the image deleted.
func topicsDeletedBetween(before, after *metadata.Image) []string {
	var deleted []string
	for _, t := range before.Topics() {
		if now, ok := after.TopicByName(t.Name); !ok || now.ID != t.ID {
			deleted = append(deleted, t.Name)
		}
	}
	return deleted
}
