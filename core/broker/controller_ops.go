package broker

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/core/replica"
)

// registerBroker registers (or re-registers) a broker, fenced until it has
// caught up with the metadata log. A re-registration fences the old
// incarnation at once: its partitions get new leaders.
func (c *controller) registerBroker(reg brokerRegistration, done func(epoch int64, code int16)) {
	epoch := c.log.LogEndOffset()
	endpoints := slices.Clone(reg.endpoints)
	sort.Slice(endpoints, func(i, j int) bool { return endpoints[i].Listener < endpoints[j].Listener })
	records := []metadata.Record{&metadata.RegisterBrokerRecord{
		BrokerID: reg.id, IncarnationID: reg.incarnation, BrokerEpoch: epoch, Endpoints: endpoints, Fenced: true,
	}}
	records = append(records, c.fenceChanges(reg.id)...)
	err := c.propose(records, func() {
		c.sessions[reg.id] = &brokerSession{lastHeartbeatMs: c.n.nowMs()}
		done(epoch, 0)
	})
	if err != nil {
		done(-1, kerr.UnknownServerError.Code)
	}
}

// heartbeat records a broker's liveness and unfences it once it has caught
// up with its own registration. A broker that wants to be fenced (its log
// directory failed: CLARIFICATIONS.md, "Disk faults in the broker") is
// fenced, so its leaderships move to other replicas. It returns the error
// code to answer with and whether the broker is fenced.
func (c *controller) heartbeat(id int32, epoch, metadataOffset int64, wantFence bool) (int16, bool) {
	reg, ok := c.image.Broker(id)
	session := c.sessions[id]
	if !ok || reg.Epoch != epoch || session == nil {
		return kerr.StaleBrokerEpoch.Code, true
	}
	session.lastHeartbeatMs = c.n.nowMs()
	if wantFence {
		if !reg.Fenced {
			records := []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: epoch, Fenced: metadata.FenceFence}}
			if err := c.propose(append(records, c.fenceChanges(id)...), nil); err != nil {
				return kerr.UnknownServerError.Code, true
			}
		}
		return 0, true
	}
	if !reg.Fenced || metadataOffset < reg.Epoch {
		return 0, reg.Fenced
	}
	records := []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: epoch, Fenced: metadata.FenceUnfence}}
	records = append(records, c.electLeaderless(id)...)
	if err := c.propose(records, nil); err != nil {
		return kerr.UnknownServerError.Code, true
	}
	return 0, false
}

// scheduleSessionCheck fences, every heartbeat interval, the unfenced
// brokers whose last heartbeat is older than broker.session.timeout.ms.
func (c *controller) scheduleSessionCheck() {
	b := c.n.cfg.Broker
	c.n.after(int64(b.BrokerHeartbeatIntervalMs), func() {
		now := c.n.nowMs()
		for _, id := range c.image.BrokerIDs() {
			reg, _ := c.image.Broker(id)
			s := c.sessions[id]
			if reg.Fenced || (s != nil && now-s.lastHeartbeatMs <= int64(b.BrokerSessionTimeoutMs)) {
				continue
			}
			records := []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: reg.Epoch, Fenced: metadata.FenceFence}}
			_ = c.propose(append(records, c.fenceChanges(id)...), nil) // a failed log stops the controller
		}
		c.scheduleSessionCheck()
	})
}

// fenceChanges takes broker id out of every ISR and moves the leadership of
// every partition it leads (ISR minus it, else ELR per KIP-966, else
// unclean if enabled, else no leader).
func (c *controller) fenceChanges(id int32) []metadata.Record {
	acceptable := func(r int32) bool { return r != id && c.usable(r) }
	var records []metadata.Record
	c.image.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		if !slices.Contains(s.ISR, id) && s.Leader != id {
			return
		}
		cur := replicaStateOf(s)
		next := cur
		if slices.Contains(s.ISR, id) {
			next = replica.ChangeISR(cur, without(s.ISR, id), nil, c.policy())
		}
		if next.LeaderID == id {
			next, _ = replica.Elect(next, c.policy(), acceptable)
		}
		records = append(records, changeRecord(tp, cur, next))
	})
	return records
}

// electLeaderless elects leaders for the leaderless partitions that broker
// id, about to be unfenced, can now lead.
func (c *controller) electLeaderless(id int32) []metadata.Record {
	acceptable := func(r int32) bool { return r == id || c.usable(r) }
	var records []metadata.Record
	c.image.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		if s.Leader != metadata.NoLeader || !slices.Contains(s.Replicas, id) {
			return
		}
		cur := replicaStateOf(s)
		next, kind := replica.Elect(cur, c.policy(), acceptable)
		if kind != replica.ElectionNoLeader && next.LeaderID != replica.NoLeader {
			records = append(records, changeRecord(tp, cur, next))
		}
	})
	return records
}

// changeRecord is the PartitionChangeRecord taking cur to next.
func changeRecord(tp metadata.TopicPartition, cur, next replica.PartitionState) *metadata.PartitionChangeRecord {
	rec := &metadata.PartitionChangeRecord{TopicID: tp.TopicID, PartitionID: tp.Partition, Leader: metadata.NoLeaderChange}
	if next.LeaderID != cur.LeaderID {
		rec.Leader = next.LeaderID
	}
	if !slices.Equal(next.ISR, cur.ISR) {
		rec.ISR = metadata.Change(next.ISR)
	}
	if !slices.Equal(next.ELR, cur.ELR) {
		rec.ELR = metadata.Change(next.ELR)
	}
	if !slices.Equal(next.LastKnownELR, cur.LastKnownELR) {
		rec.LastKnownELR = metadata.Change(next.LastKnownELR)
	}
	return rec
}

func without(ids []int32, id int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// alterPartition applies a leader's ISR change (Kafka's AlterPartition,
// KIP-497) and answers once it is committed.
func (c *controller) alterPartition(req *kmsg.AlterPartitionRequest, done func(*kmsg.AlterPartitionResponse)) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	var records []metadata.Record
	type answer struct {
		t, p int
		tp   metadata.TopicPartition
	}
	var answers []answer
	reg, ok := c.image.Broker(req.BrokerID)
	stale := !ok || reg.Epoch != req.BrokerEpoch
	for i, t := range req.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = t.TopicID
		for j, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			tp := metadata.TopicPartition{TopicID: t.TopicID, Partition: p.Partition}
			if stale {
				rp.ErrorCode = kerr.StaleBrokerEpoch.Code
			} else if rec, code := c.checkAlterPartition(req.BrokerID, t.TopicID, p); code != 0 {
				rp.ErrorCode = code
			} else if rec != nil {
				records = append(records, rec)
			}
			rt.Partitions = append(rt.Partitions, rp)
			answers = append(answers, answer{i, j, tp})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	fill := func() {
		for _, a := range answers {
			rp := &resp.Topics[a.t].Partitions[a.p]
			if rp.ErrorCode != 0 {
				continue
			}
			s, _ := c.image.Partition(a.tp.TopicID, a.tp.Partition)
			rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch, rp.ISR = s.Leader, s.LeaderEpoch, s.PartitionEpoch, s.ISR
		}
		done(resp)
	}
	if len(records) == 0 {
		fill()
		return
	}
	if err := c.propose(records, fill); err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		done(resp)
	}
}

// checkAlterPartition validates one partition of an AlterPartition as
// Kafka's controller does and returns the change to make (nil when the ISR
// already is the proposed one).
func (c *controller) checkAlterPartition(brokerID int32, topicID metadata.TopicID, p kmsg.AlterPartitionRequestTopicPartition) (metadata.Record, int16) {
	s, ok := c.image.Partition(topicID, p.Partition)
	if !ok {
		return nil, kerr.UnknownTopicID.Code
	}
	switch {
	case s.Leader != brokerID:
		return nil, kerr.NotLeaderForPartition.Code
	case p.LeaderEpoch < s.LeaderEpoch:
		return nil, kerr.FencedLeaderEpoch.Code
	case p.LeaderEpoch > s.LeaderEpoch || p.PartitionEpoch != s.PartitionEpoch:
		return nil, kerr.InvalidUpdateVersion.Code
	}
	newISR := p.NewISR
	if len(p.NewEpochISR) > 0 {
		newISR = nil
		for _, e := range p.NewEpochISR {
			newISR = append(newISR, e.BrokerID)
		}
	}
	newISR = slices.Clone(newISR)
	slices.Sort(newISR)
	if !slices.Contains(newISR, brokerID) || len(slices.Compact(slices.Clone(newISR))) != len(newISR) {
		return nil, kerr.InvalidRequest.Code
	}
	for _, r := range newISR {
		if !slices.Contains(s.Replicas, r) {
			return nil, kerr.InvalidRequest.Code
		}
		if !slices.Contains(s.ISR, r) && !c.usable(r) {
			return nil, kerr.IneligibleReplica.Code
		}
	}
	if slices.Equal(newISR, s.ISR) {
		return nil, 0
	}
	cur := replicaStateOf(s)
	next := replica.ChangeISR(cur, newISR, nil, c.policy())
	return changeRecord(metadata.TopicPartition{TopicID: topicID, Partition: p.Partition}, cur, next), 0
}
