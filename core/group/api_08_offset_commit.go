package group

// OffsetCommit (key 8), versions 0..9.
//
// A member commits with its generation: in Stable and PreparingRebalance
// (commits of the previous generation's work), and it keeps the member's
// session alive. Generation -1 with no member id commits for a group with
// no members (simple consumers, admin tools), creating the group if need
// be. The reply waits until the records are committed in
// __consumer_offsets, and only then do OffsetFetch answers show them, so
// OffsetFetch is linearizable per partition.
//
// v1's per-partition commit timestamp, when given, is the offset's commit
// time; v2-4's retention time, when given, gives the offset its own expire
// timestamp (now + retention), as Kafka's KafkaApis sets them; expiry.go
// honours both. Skipped: v10 names topics by id.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// groupIDNotFoundCommitVersion: from v9 a commit with a generation for a
// group that does not exist gets GROUP_ID_NOT_FOUND, before that
// ILLEGAL_GENERATION.
const groupIDNotFoundCommitVersion = 9

// The old versions' own timing fields: v1's per-partition commit timestamp
// and v2-4's retention time, each -1 when not given.
const (
	commitTimestampVersion  = 1
	retentionTimeVersionMin = 2
	retentionTimeVersionMax = 4
	defaultCommitTimestamp  = -1
	defaultRetentionTimeMs  = -1
)

// expireTimestamp is nowMs + retentionMs, saturated: Kafka's sum wraps on
// overflow (a huge retention would expire at once); Strand keeps it at the
// end of time. It is never negative, so it never reads back as Kafka's -1,
// "no expire timestamp"; a negative retention expires at the next check.
func expireTimestamp(nowMs, retentionMs int64) int64 {
	switch {
	case retentionMs > 0 && nowMs > math.MaxInt64-retentionMs:
		return math.MaxInt64
	case retentionMs < 0 && nowMs < math.MinInt64-retentionMs:
		return 0
	}
	return max(nowMs+retentionMs, 0)
}

func (c *Coordinator) handleOffsetCommit(r *kmsg.OffsetCommitRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	setAll := func(code int16) {
		resp.Topics = resp.Topics[:0]
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	g, code := c.validateOffsetCommit(r)
	if code != 0 {
		setAll(code)
		reply(resp)
		return
	}
	defer c.forgetIfUnused(g)
	if m := g.members[r.MemberID]; m != nil && (g.state == Stable || g.state == PreparingRebalance) {
		c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
	}
	setAll(0)
	w := c.offsetWrites(g, r, resp)
	records, keys, values, okSlots := w.records, w.keys, w.values, w.okSlots
	if len(records) == 0 {
		reply(resp)
		return
	}
	for _, k := range keys {
		g.offsetsInFlight[k]++
	}
	seq := c.appendSeq + 1 // the number append gives this write
	c.append(records, func(err error) {
		if err == nil && c.liveGroup(g) {
			g.inLog = true
		}
		c.finishOffsetWrite(g, keys, seq, err, func(tp topicPartition, i int) {
			g.offsets[tp] = values[i]
		})
		if err != nil {
			for _, s := range okSlots {
				*s = appendErrorCode(err, true)
			}
		}
		reply(resp)
	}, func() {
		for _, s := range okSlots {
			*s = kerr.NotCoordinator.Code
		}
		reply(resp)
	})
}

// offsetWrite is what one OffsetCommit writes: a record per accepted
// partition, its key and value, and where its answer goes.
type offsetWrite struct {
	records []batch.Record
	keys    []topicPartition
	values  []offsetValue
	okSlots []*int16
}

// offsetWrites checks each partition of r (metadata size, existence),
// setting refused ones' codes in resp, and builds the records for the rest.
func (c *Coordinator) offsetWrites(g *group, r *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) offsetWrite {
	var w offsetWrite
	now := c.wallMs()
	for ti, t := range r.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi].ErrorCode
			metadata := ""
			if p.Metadata != nil {
				metadata = *p.Metadata
			}
			switch {
			case len(metadata) > int(c.cfg.OffsetMetadataMaxBytes):
				*slot = kerr.OffsetMetadataTooLarge.Code
				continue
			case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition):
				*slot = kerr.UnknownTopicOrPartition.Code
				continue
			}
			tp := topicPartition{topic: t.Topic, partition: p.Partition}
			v := offsetValue{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: metadata, commitTimestampMs: now}
			if r.Version < 6 {
				v.leaderEpoch = -1
			}
			if r.Version == commitTimestampVersion && p.Timestamp != defaultCommitTimestamp {
				v.commitTimestampMs = p.Timestamp
			}
			if r.Version >= retentionTimeVersionMin && r.Version <= retentionTimeVersionMax && r.RetentionTimeMillis != defaultRetentionTimeMs {
				v.hasExpireTimestamp, v.expireTimestampMs = true, expireTimestamp(now, r.RetentionTimeMillis)
			}
			w.records = append(w.records, batch.Record{Key: offsetKeyBytes(g.id, tp), Value: offsetValueBytes(v)})
			w.keys, w.values, w.okSlots = append(w.keys, tp), append(w.values, v), append(w.okSlots, slot)
		}
	}
	return w
}

// finishOffsetWrite ends an append of keys numbered seq that failed with
// err or succeeded: on success apply runs for each key unless a later
// append of the same key already succeeded, and the group is forgotten if
// nothing is left of it, in memory or in the log (forgetIfUnused). A
// failed append claims nothing, so an earlier append of the key that
// succeeds later still applies, as the log has it.
func (c *Coordinator) finishOffsetWrite(g *group, keys []topicPartition, seq uint64, err error, apply func(tp topicPartition, i int)) {
	for i, k := range keys {
		g.offsetsInFlight[k]--
		if g.offsetsInFlight[k] == 0 {
			delete(g.offsetsInFlight, k)
		}
		if err != nil || !c.liveGroup(g) || g.offsetWriteSeq[k] > seq {
			continue
		}
		g.offsetWriteSeq[k] = seq
		apply(k, i)
	}
	c.forgetIfUnused(g)
}

// validateOffsetCommit is Kafka's check of who may commit, returning the
// group (created for a simple commit) or an error for every partition.
func (c *Coordinator) validateOffsetCommit(r *kmsg.OffsetCommitRequest) (*group, int16) {
	if code := c.availability(r.Group); code != 0 {
		return nil, code
	}
	g := c.groups[r.Group]
	if g == nil {
		switch {
		case r.Generation < 0:
			g = newGroup(r.Group)
			c.groups[r.Group] = g
			return g, 0
		case r.Version >= groupIDNotFoundCommitVersion:
			return nil, kerr.GroupIDNotFound.Code
		default:
			return nil, kerr.IllegalGeneration.Code
		}
	}
	if g.state == Dead {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	if r.Generation < 0 && g.state == Empty {
		return g, 0
	}
	if r.Generation >= 0 || r.MemberID != "" || r.InstanceID != nil {
		if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
			return nil, code
		}
		if r.Generation != g.generation {
			return nil, kerr.IllegalGeneration.Code
		}
	} else if g.state != Empty {
		return nil, kerr.UnknownMemberID.Code
	}
	if g.state == CompletingRebalance {
		return nil, kerr.RebalanceInProgress.Code
	}
	return g, 0
}
