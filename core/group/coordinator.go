package group

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// Store persists the coordinator's records in its __consumer_offsets
// partition. Append takes one RecordBatch v2 built with core/batch.Build
// (uncompressed, BaseOffset 0: the partition assigns offsets) and calls done
// on the event loop once the batch is committed as acks=all would commit it,
// or with an error if it will not be. An error that wraps a *kerr.Error
// tells the coordinator which Kafka error it was (NOT_LEADER_OR_FOLLOWER,
// NOT_ENOUGH_REPLICAS, ...); any other error counts as
// COORDINATOR_NOT_AVAILABLE. done runs exactly once per Append. The
// coordinator does not need dones in append order, but the log must hold
// batches in append order.
type Store interface {
	Append(batch []byte, done func(err error))
}

// IDSource returns fresh 16-byte ids for member ids. core/ has no
// randomness, so the environment injects it (seeded in the simulator).
// Member ids must never repeat, not even across coordinator failovers,
// which is why a counter will not do.
type IDSource func() [16]byte

// Bugs are planted coordinator bugs the simulator must catch (SPEC.md,
// planted bugs). They travel in the per-coordinator Config, never in
// globals. All false is the correct protocol.
type Bugs struct {
	// GroupDoubleAssign ("group-double-assign"): SyncGroup hands out the
	// leader's assignment and makes the group Stable as soon as the leader's
	// SyncGroup arrives, before the group's metadata record is committed,
	// and ignores a failed append (api_14_sync_group.go). If the coordinator
	// then fails over before the record is replicated, the new coordinator
	// loads the previous generation, the members' next rebalance forms the
	// same generation number again with a different membership, and one
	// generation ends up with two different assignments: a partition is
	// assigned to two members within one generation. Kafka answers SyncGroup
	// only after the append is committed precisely to prevent this.
	GroupDoubleAssign bool
}

// Client is what the coordinator knows of the connection a request came
// on: it is stored with each member and shown by DescribeGroups.
type Client struct {
	ClientID   string
	ClientHost string
}

// phase is the coordinator's relation to its partition.
type phase int8

const (
	phaseUnloaded phase = iota // not the leader: NOT_COORDINATOR
	phaseLoading               // replaying the log: COORDINATOR_LOAD_IN_PROGRESS
	phaseActive
)

// Coordinator is the group coordinator for the groups of one
// __consumer_offsets partition. All methods run on the node's event loop.
type Coordinator struct {
	cfg   Config
	clock env.Clock
	store Store
	newID IDSource

	phase phase
	// incarnation changes at every Unload and BeginLoad; timers and append
	// completions from an earlier incarnation are ignored.
	incarnation uint64
	groups      map[string]*group
	// appendSeq numbers appends; inFlight holds the ones not yet done,
	// so that Unload can answer their requests.
	appendSeq uint64
	inFlight  map[uint64]*appendOp
}

// appendOp is one Append in flight.
type appendOp struct {
	seq  uint64
	done func(err error)
	// abort answers the op's parked request with NOT_COORDINATOR at Unload,
	// nil when the request is parked in a member (Unload answers those).
	abort func()
}

// New returns a coordinator for partition cfg.Partition, unloaded: it
// answers NOT_COORDINATOR until BeginLoad and FinishLoad.
func New(cfg Config, clock env.Clock, store Store, ids IDSource) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clock == nil || store == nil || ids == nil {
		return nil, errors.New("group: New needs a clock, a store and an id source")
	}
	return &Coordinator{
		cfg:      cfg,
		clock:    clock,
		store:    store,
		newID:    ids,
		groups:   map[string]*group{},
		inFlight: map[uint64]*appendOp{},
	}, nil
}

// BeginLoad starts taking over the partition (this node became its
// leader): every request now gets COORDINATOR_LOAD_IN_PROGRESS until
// FinishLoad. Any earlier state is dropped.
func (c *Coordinator) BeginLoad() {
	c.Unload()
	c.phase = phaseLoading
}

// Load replays records of the partition's log, in log order, and may be
// called any number of times between BeginLoad and FinishLoad. The last
// record per key wins; a tombstone deletes. A record it cannot decode is an
// error naming it, and Load stops there; records of types Strand does not
// serve are skipped.
func (c *Coordinator) Load(records []LogRecord) error {
	if c.phase != phaseLoading {
		return errors.New("group: Load outside BeginLoad/FinishLoad")
	}
	for i, rec := range records {
		p, err := parseRecord(rec)
		if errors.Is(err, errSkippedRecord) {
			continue
		}
		if err == nil && p.group != nil && len(p.group.members) > 0 && (p.group.protocol == nil || *p.group.protocol == "") {
			err = fmt.Errorf("group %q has %d members but no protocol", p.groupID, len(p.group.members))
		}
		if err != nil {
			return fmt.Errorf("group: __consumer_offsets partition %d, record %d of this load: %w", c.cfg.Partition, i, err)
		}
		c.replay(p)
	}
	return nil
}

// replay applies one loaded record.
func (c *Coordinator) replay(p parsedRecord) {
	g := c.groups[p.groupID]
	if !p.isGroup {
		if p.offset == nil {
			if g != nil {
				delete(g.offsets, p.tp)
				c.forgetIfUnused(g) // kept while its commits are in the log, as Kafka's replay keeps it
			}
			return
		}
		if g == nil {
			g = newGroup(p.groupID)
			c.groups[p.groupID] = g
		}
		g.offsets[p.tp] = *p.offset
		g.inLog = true
		return
	}
	if p.group == nil {
		if g != nil {
			g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
			g.members, g.order, g.static = map[string]*member{}, nil, map[string]string{}
			g.state, g.prevState = Empty, Empty
			g.inLog = false
			c.forgetIfUnused(g)
		}
		return
	}
	offsets, inLog := map[topicPartition]offsetValue{}, false
	if g != nil {
		offsets, inLog = g.offsets, g.inLog
	}
	g = groupFromRecord(p.groupID, p.group)
	g.offsets, g.inLog = offsets, inLog
	c.groups[p.groupID] = g
}

// forgetIfUnused drops an empty group with no offsets that the log holds
// nothing of (see group.inLog).
func (c *Coordinator) forgetIfUnused(g *group) {
	if g.state == Empty && g.protocolType == "" && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.offsetsInFlight) == 0 && !g.inLog && c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
}

// groupFromRecord rebuilds a group from its GroupMetadataValue: Stable with
// the recorded members and assignment, or Empty without members.
func groupFromRecord(id string, v *groupValue) *group {
	g := newGroup(id)
	g.protocolType = v.protocolType
	g.generation = v.generation
	g.stateTimestampMs = v.stateTimestampMs
	if v.protocol != nil {
		g.protocol = *v.protocol
	}
	for _, mv := range v.members {
		m := &member{
			id:                 mv.memberID,
			clientID:           mv.clientID,
			clientHost:         mv.clientHost,
			rebalanceTimeoutMs: mv.rebalanceTimeoutMs,
			sessionTimeoutMs:   mv.sessionTimeoutMs,
			protocolType:       v.protocolType,
			protocols:          []protocol{{name: g.protocol, metadata: mv.subscription}},
			assignment:         mv.assignment,
		}
		if mv.instanceID != nil {
			m.instanceID = *mv.instanceID
		}
		if _, dup := g.members[m.id]; dup {
			continue
		}
		if _, dup := g.static[m.instanceID]; m.isStatic() && dup {
			continue
		}
		g.add(m, nil)
	}
	if v.leader != nil {
		if _, ok := g.members[*v.leader]; ok {
			g.leader = *v.leader
		}
	}
	if len(g.members) > 0 {
		g.state, g.prevState = Stable, CompletingRebalance
	}
	return g
}

// FinishLoad ends loading: requests are served, and every loaded member
// gets a session deadline (its heartbeats went to the previous leader).
func (c *Coordinator) FinishLoad() {
	if c.phase != phaseLoading {
		panic("group: FinishLoad without BeginLoad")
	}
	c.phase = phaseActive
	for _, id := range sortedGroupIDs(c.groups) {
		g := c.groups[id]
		for _, m := range g.membersInOrder() {
			c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		}
		c.assertInvariants(g)
	}
}

// Unload gives up the partition (another node leads it, or this one stops):
// every parked request and every request whose append is in flight gets
// NOT_COORDINATOR, timers stop, the state is dropped. Completions of
// appends made before arrive later and are ignored.
func (c *Coordinator) Unload() {
	c.incarnation++
	c.phase = phaseUnloaded
	seqs := make([]uint64, 0, len(c.inFlight))
	for seq := range c.inFlight { // order-independent: sorted below
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		if op := c.inFlight[seq]; op.abort != nil {
			op.abort()
		}
	}
	c.inFlight = map[uint64]*appendOp{}
	for _, id := range sortedGroupIDs(c.groups) {
		g := c.groups[id]
		for _, m := range g.membersInOrder() {
			g.answerJoin(m, joinError(kerr.NotCoordinator.Code, m.id))
			answerSync(m, kerr.NotCoordinator.Code, nil)
			if m.heartbeatTimer != nil {
				m.heartbeatTimer.Stop()
			}
		}
		for _, pid := range sortedKeys(g.pending) {
			g.stopPending(pid)
		}
		stopTimer(&g.joinTimer)
		stopTimer(&g.syncTimer)
	}
	c.groups = map[string]*group{}
}

// Handles reports whether Handle serves req's API key.
func Handles(req kmsg.Request) bool {
	switch req.(type) {
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest,
		*kmsg.LeaveGroupRequest, *kmsg.OffsetCommitRequest, *kmsg.OffsetFetchRequest,
		*kmsg.OffsetDeleteRequest, *kmsg.DescribeGroupsRequest, *kmsg.ListGroupsRequest,
		*kmsg.DeleteGroupsRequest:
		return true
	}
	return false
}

// Handle serves one group request. reply is called exactly once, now or
// later (a JoinGroup waits for the join phase, a SyncGroup and an
// OffsetCommit for their records to commit), on the event loop. A request
// Handles refuses panics: dispatching it here is the caller's bug.
//
// Requests naming several groups (DescribeGroups, DeleteGroups, OffsetFetch
// v8+) are answered per group; a group that does not hash to this
// coordinator's partition gets NOT_COORDINATOR, so a broker hosting several
// coordinators sends the request to each and keeps every group's answer
// from its own coordinator.
func (c *Coordinator) Handle(req kmsg.Request, client Client, reply func(kmsg.Response)) {
	reply = once(reply)
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		c.handleJoinGroup(r, client, reply)
	case *kmsg.SyncGroupRequest:
		c.handleSyncGroup(r, reply)
	case *kmsg.HeartbeatRequest:
		c.handleHeartbeat(r, reply)
	case *kmsg.LeaveGroupRequest:
		c.handleLeaveGroup(r, reply)
	case *kmsg.OffsetCommitRequest:
		c.handleOffsetCommit(r, reply)
	case *kmsg.OffsetFetchRequest:
		c.handleOffsetFetch(r, reply)
	case *kmsg.OffsetDeleteRequest:
		c.handleOffsetDelete(r, reply)
	case *kmsg.DescribeGroupsRequest:
		c.handleDescribeGroups(r, reply)
	case *kmsg.ListGroupsRequest:
		c.handleListGroups(r, reply)
	case *kmsg.DeleteGroupsRequest:
		c.handleDeleteGroups(r, reply)
	default:
		panic(fmt.Sprintf("group: Handle given api key %d", req.Key()))
	}
}

// once wraps reply so that a second call panics: every request is answered
// exactly once, and a second answer would be a coordinator bug.
func once(reply func(kmsg.Response)) func(kmsg.Response) {
	done := false
	return func(r kmsg.Response) {
		if done {
			panic(fmt.Sprintf("group: second reply to one request (api key %d)", r.Key()))
		}
		done = true
		reply(r)
	}
}

// availability is the error every request for groupID gets before it is
// looked at: NOT_COORDINATOR when unloaded or when the group belongs to
// another partition, COORDINATOR_LOAD_IN_PROGRESS while loading, and
// INVALID_GROUP_ID for an empty id.
func (c *Coordinator) availability(groupID string) int16 {
	switch {
	case c.phase == phaseUnloaded:
		return kerr.NotCoordinator.Code
	case groupID != "" && PartitionFor(groupID, c.cfg.OffsetsTopicPartitions) != c.cfg.Partition:
		return kerr.NotCoordinator.Code
	case c.phase == phaseLoading:
		return kerr.CoordinatorLoadInProgress.Code
	case groupID == "":
		return kerr.InvalidGroupID.Code
	}
	return 0
}

// append builds records into one batch and hands it to the Store. done
// runs with the outcome unless the coordinator was unloaded meanwhile (then
// abort already answered, or Unload answered the parked members).
func (c *Coordinator) append(records []batch.Record, done func(err error), abort func()) {
	if len(records) == 0 {
		panic("group: append of no records")
	}
	c.appendSeq++
	op := &appendOp{seq: c.appendSeq, done: done, abort: abort}
	c.inFlight[op.seq] = op
	incarnation := c.incarnation
	b := batch.Build(batch.BuildSpec{FirstTimestamp: c.clock.WallMs(), Records: records})
	c.store.Append(b, func(err error) {
		if c.incarnation != incarnation {
			return
		}
		if _, ok := c.inFlight[op.seq]; !ok {
			panic(fmt.Sprintf("group: Store completed append %d twice", op.seq))
		}
		delete(c.inFlight, op.seq)
		op.done(err)
	})
}

// appendErrorCode maps a failed append to what the client should see, as
// Kafka's coordinator maps it: retriable unavailability for replication
// trouble, NOT_COORDINATOR when leadership moved, and for oversized
// batches UNKNOWN_SERVER_ERROR (group metadata) or INVALID_COMMIT_OFFSET_SIZE
// (offsets).
func appendErrorCode(err error, offsets bool) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch ke.Code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		if offsets {
			return kerr.InvalidCommitOffsetSize.Code
		}
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}

// after arms a timer that runs fire on the event loop after delayMs,
// unless the coordinator was unloaded or reloaded meanwhile.
func (c *Coordinator) after(delayMs int32, fire func()) env.Timer {
	incarnation := c.incarnation
	return c.clock.SetTimer(int64(delayMs)*1e6, func() {
		if c.incarnation == incarnation {
			fire()
		}
	})
}

func stopTimer(t *env.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// liveGroup returns the group named id if it is still the same object g:
// a timer armed for a group that was deleted and recreated must not touch
// the new one.
func (c *Coordinator) liveGroup(g *group) bool { return c.groups[g.id] == g }

func (c *Coordinator) wallMs() int64 { return c.clock.WallMs() }

// sortedKeys returns a string-keyed map's keys in byte order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m { // order-independent: sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
