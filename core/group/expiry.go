package group

// Committed-offset expiry (KIP-211), Kafka's periodic cleanupGroupMetadata.
//
// The broker calls ExpireOffsets every offsets.retention.check.interval.ms.
// An offset expires once offsets.retention.minutes have passed since:
//   - its group became Empty, for a group with a protocol type (the state
//     timestamp of its GroupMetadataValue; a value written without one, v0
//     or v1, counts from the commit instead);
//   - its commit, for a simple group (commits only, no protocol type), and
//     for the topics a Stable "consumer" group no longer subscribes to;
//   - never, while a group is rebalancing, or for a Stable group's
//     subscribed topics, or when a Stable group's subscriptions cannot be
//     read (then the coordinator does not know what it subscribes to).
//
// An offset committed with its own retention (OffsetCommit v2-4) expires
// at its expire timestamp instead, whenever the rules above let its group's
// offsets expire at all, as Kafka honours it. An offset with a commit of
// its key in flight does not expire.
//
// Expired offsets get tombstones in __consumer_offsets, so the expiry
// survives failover and compaction removes the keys. Like every other
// write, they take effect when committed: OffsetFetch shows an offset
// until its tombstone is replicated (a failed append changes nothing, and
// the next check tries again), and a commit that lands in between wins
// (finishOffsetWrite). An Empty group left with no offsets also gets its
// GroupMetadata tombstone and is forgotten once that commits, as Kafka
// deletes it, unless it was used meanwhile; so is one that never had
// offsets, at the next check. An Empty group holding a KIP-394 member id
// not yet used to join is kept until then (Kafka would delete it and the
// member would start over with UNKNOWN_MEMBER_ID). Kafka marks the group Dead
// while it does this; Strand keeps serving it, so a commit or join racing
// the expiry succeeds rather than being refused.

import "strand/core/batch"

// consumerProtocolType is the classic protocol type of Kafka's consumers,
// the only one whose subscriptions the coordinator reads.
const consumerProtocolType = "consumer"

// expiryBatchRecordsMax bounds one group's tombstones per append, so the
// batch stays far below message.max.bytes. A group with more expired
// offsets loses the rest, and is deleted, at later checks.
const expiryBatchRecordsMax = 1000

// ExpireOffsets runs one expiry pass over the coordinator's groups at the
// clock's wall time: it appends the tombstones of every expired offset,
// and of every Empty group left without offsets, one batch per group. It
// does nothing unless the coordinator is loaded.
func (c *Coordinator) ExpireOffsets() {
	if c.phase != phaseActive {
		return
	}
	nowMs := c.wallMs()
	for _, id := range sortedGroupIDs(c.groups) {
		c.expireGroup(c.groups[id], nowMs)
	}
}

// expireGroup appends g's expired offsets' tombstones, and the group's own
// when it is Empty and nothing else is left of it.
func (c *Coordinator) expireGroup(g *group, nowMs int64) {
	if g.state == Dead {
		return
	}
	base, subscribed, ok := g.expiryBase()
	var expired []topicPartition
	keepsSome := len(g.offsetsInFlight) > 0
	for _, tp := range sortedOffsetKeys(g.offsets) {
		v := g.offsets[tp]
		var due bool
		switch {
		case !ok || subscribed[tp.topic] || g.offsetsInFlight[tp] > 0:
		case v.hasExpireTimestamp:
			due = nowMs >= v.expireTimestampMs
		default:
			due = base(v) <= nowMs-c.cfg.OffsetsRetentionMs // no overflow for any client's timestamp
		}
		if !due || len(expired) == expiryBatchRecordsMax {
			keepsSome = true
			continue
		}
		expired = append(expired, tp)
	}
	// An Empty group left with nothing gets a GroupMetadata tombstone, a
	// simple group too (it never had a metadata record, but its offsets'
	// records would rebuild it on a reload), as Kafka's maybeDeleteGroup
	// writes one for every Empty classic group.
	deleteGroup := !keepsSome && g.state == Empty && len(g.pending) == 0 && !g.tombstoneInFlight
	if len(expired) == 0 && !deleteGroup {
		return
	}
	records := make([]batch.Record, 0, len(expired)+1)
	for _, tp := range expired {
		records = append(records, batch.Record{Key: offsetKeyBytes(g.id, tp)})
		g.offsetsInFlight[tp]++
	}
	generation := g.generation
	if deleteGroup {
		records = append(records, batch.Record{Key: groupKeyBytes(g.id)})
		g.tombstoneInFlight = true
	}
	seq := c.appendSeq + 1 // the number append gives this write
	c.append(records, func(err error) {
		if deleteGroup {
			g.tombstoneInFlight = false
		}
		if deleteGroup && err == nil && c.liveGroup(g) && g.state == Empty && g.generation == generation {
			// No group record followed the tombstone (every later one
			// comes with a new generation): forget the metadata, as
			// loading the tombstone does. A commit made meanwhile keeps
			// the group alive as a simple group, as it loads.
			g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
			g.inLog = false
		}
		c.finishOffsetWrite(g, expired, seq, err, func(tp topicPartition, _ int) {
			delete(g.offsets, tp)
		})
	}, nil)
}

// expiryBase says from when g's offsets without their own expire timestamp
// age (Kafka's offsetExpirationCondition), and which topics are exempt;
// ok is false when none of them may expire now.
func (g *group) expiryBase() (base func(offsetValue) int64, subscribed map[string]bool, ok bool) {
	fromCommit := func(v offsetValue) int64 { return v.commitTimestampMs }
	switch {
	case g.protocolType == "":
		return fromCommit, nil, true
	case g.state == Empty:
		if g.stateTimestampMs < 0 {
			return fromCommit, nil, true
		}
		emptySince := g.stateTimestampMs
		return func(offsetValue) int64 { return emptySince }, nil, true
	case g.state == Stable && g.protocolType == consumerProtocolType:
		topics, readable := g.subscribedTopics()
		return fromCommit, topics, readable
	}
	return nil, nil, false
}

// subscribedTopics is the union of the members' subscribed topics, read
// from their metadata for the selected protocol with the consumer
// protocol's version-0 layout (every later version extends it): version
// int16, topics [string], user data nullable bytes. ok is false if any
// member's metadata does not parse, as Kafka then does not know the
// subscriptions.
func (g *group) subscribedTopics() (map[string]bool, bool) {
	topics := map[string]bool{}
	for _, m := range g.membersInOrder() {
		metadata, _ := m.metadataFor(g.protocol)
		r := reader{buf: metadata}
		if version := r.int16("version"); version < 0 {
			return nil, false
		}
		count := r.length("topics", true)
		if count < 0 {
			return nil, false
		}
		for i := 0; i < count && r.err == nil; i++ {
			topics[r.string("topic")] = true
		}
		if n := r.length("userData", true); n >= 0 {
			r.take("userData", n)
		} else if n < -1 {
			r.fail("userData", "negative length")
		}
		if r.err != nil {
			return nil, false
		}
	}
	return topics, true
}
