package controller

import (
	"log/slog"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
	"strand/core/replica"
)

// Topic config keys the controller interprets.
const (
	configMinInsyncReplicas = "min.insync.replicas"
	configUncleanElection   = "unclean.leader.election.enable"
)

// policy is the election policy of a topic: its configs over the cluster
// defaults.
func (c *Controller) policy(topic string) replica.ELRPolicy {
	pol := replica.ELRPolicy{
		MinInsyncReplicas: c.cfg.MinInsyncReplicas,
		ELREnabled:        !c.cfg.ELRDisabled,
		UncleanEnabled:    c.cfg.UncleanLeaderElectionEnable,
	}
	res := metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}
	if v, ok := c.latest.Config(res, configMinInsyncReplicas); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			pol.MinInsyncReplicas = n
		}
	}
	if v, ok := c.latest.Config(res, configUncleanElection); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			pol.UncleanEnabled = b
		}
	}
	return pol
}

// acceptable reports whether broker id may lead or join an ISR: registered,
// unfenced and not shutting down (KIP-841).
func (c *Controller) acceptable(id int32) bool {
	b, ok := c.latest.Broker(id)
	return ok && !b.Fenced && !b.InControlledShutdown
}

// partitionChange returns the record that takes partition tp from cur to
// the ISR targetISR, with the ELR maintained (KIP-966) and a leader elected
// if the current one can no longer lead; nil if nothing changes. Replicas in
// uncleanShutdown leave the ELR. The epochs of the result come from
// applying the record (metadata.PartitionState.WithChange).
func (c *Controller) partitionChange(tp metadata.TopicPartition, cur metadata.PartitionState, targetISR, uncleanShutdown []int32) *metadata.PartitionChangeRecord {
	pol := c.policy(tp.Topic)
	if len(targetISR) == 0 && !pol.ELREnabled {
		// Without ELR the last ISR member stays in the ISR, leaderless
		// if it cannot lead, as Kafka keeps it.
		targetISR = cur.ISR
	}
	now := toReplicaState(cur)
	next := now
	if !sameIDs(targetISR, cur.ISR) || len(uncleanShutdown) > 0 {
		next = replica.ChangeISR(now, targetISR, uncleanShutdown, pol)
	}
	for _, id := range uncleanShutdown {
		next, _ = replica.RecordUncleanShutdown(next, id)
	}
	next, kind := replica.Elect(next, pol, c.acceptable)
	return c.changeRecord(tp, cur, next, kind)
}

// changeRecord returns the record that takes partition tp from cur to next,
// chosen by an election of the given kind (logged if the leader changes);
// nil if nothing changes.
func (c *Controller) changeRecord(tp metadata.TopicPartition, cur metadata.PartitionState, next replica.PartitionState, kind replica.ElectionKind) *metadata.PartitionChangeRecord {
	change := &metadata.PartitionChangeRecord{TopicID: tp.TopicID, PartitionID: tp.Partition, Leader: metadata.NoLeaderChange}
	changed := false
	if next.LeaderID != cur.Leader {
		change.Leader, changed = next.LeaderID, true
	}
	for _, f := range []struct {
		field     *metadata.IDsChange
		cur, next []int32
	}{{&change.ISR, cur.ISR, next.ISR}, {&change.ELR, cur.ELR, next.ELR}, {&change.LastKnownELR, cur.LastKnownELR, next.LastKnownELR}} {
		if !sameIDs(f.cur, f.next) {
			*f.field, changed = metadata.Change(sortedIDs(f.next)), true
		}
	}
	if !changed {
		return nil
	}
	if next.LeaderID != cur.Leader {
		c.logElection(tp, cur, next, kind)
	}
	return change
}

// logElection logs a leader change the controller decided: INFO, or WARN
// when no replica may lead or the leader may lack acknowledged records
// (Kafka logs unclean elections so an operator can look for lost data).
func (c *Controller) logElection(tp metadata.TopicPartition, cur metadata.PartitionState, next replica.PartitionState, kind replica.ElectionKind) {
	level := slog.LevelInfo
	if kind == replica.ElectionNoLeader || kind == replica.ElectionUnclean || kind == replica.ElectionLastKnownELR {
		level = slog.LevelWarn
	}
	if !c.cfg.Log.Enabled(level) {
		return
	}
	attrs := []slog.Attr{slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition)),
		slog.Int("previous_leader", int(cur.Leader)), slog.Int("leader", int(next.LeaderID)),
		slog.Int("previous_leader_epoch", int(cur.LeaderEpoch)), slog.String("election", electionName(kind)),
		env.IDs("isr", next.ISR)}
	if level == slog.LevelWarn {
		c.cfg.Log.Warn("partition leader changed", attrs...)
		return
	}
	c.cfg.Log.Info("partition leader changed", attrs...)
}

// electionName names how a leader was chosen, for the log.
func electionName(kind replica.ElectionKind) string {
	switch kind {
	case replica.ElectionNoLeader:
		return "none: no replica may lead, the partition is offline"
	case replica.ElectionKept:
		return "kept"
	case replica.ElectionClean:
		return "clean (from the ISR)"
	case replica.ElectionFromELR:
		return "from the ELR (KIP-966)"
	case replica.ElectionLastKnownELR:
		return "from the last known ELR: records may be lost"
	case replica.ElectionUnclean:
		return "unclean: records may be lost"
	}
	return "unknown"
}

func toReplicaState(s metadata.PartitionState) replica.PartitionState {
	return replica.PartitionState{
		LeaderID: s.Leader, LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch,
		Replicas: s.Replicas, ISR: s.ISR, ELR: s.ELR, LastKnownELR: s.LastKnownELR,
	}
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []int32) bool { return slices.Equal(sortedIDs(a), sortedIDs(b)) }

// sortedIDs returns a sorted copy, nil when empty.
func sortedIDs(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// without returns a copy of ids without id.
func without(ids []int32, id int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// handleAlterPartition applies ISR changes from partition leaders, with
// Kafka's checks (ReplicationControlManager.validateAlterPartitionData):
// the sender must be the leader in the current leader epoch and partition
// epoch, the new ISR must hold the leader and only replicas, and every
// member must be registered with the given epoch, unfenced and not shutting
// down (KIP-841, KIP-903). Answers carry the committed state.
func (c *Controller) handleAlterPartition(req *kmsg.AlterPartitionRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if code := c.brokerRequestError(req.BrokerID, req.BrokerEpoch); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	t := c.begin()
	for _, rt := range req.Topics {
		out := kmsg.NewAlterPartitionResponseTopic()
		out.Topic, out.TopidID = rt.Topic, rt.TopicID
		topic, found := c.alterPartitionTopic(req.Version, rt)
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !found && req.Version > 1:
				p.ErrorCode = kerr.UnknownTopicID.Code
			case !found:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				p = c.alterOnePartition(t, req, topic, rp)
			}
			out.Partitions = append(out.Partitions, p)
		}
		resp.Topics = append(resp.Topics, out)
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

func (c *Controller) alterPartitionTopic(version int16, rt kmsg.AlterPartitionRequestTopic) (metadata.Topic, bool) {
	if version > 1 {
		return c.latest.TopicByID(rt.TopicID)
	}
	return c.latest.TopicByName(rt.Topic)
}

func (c *Controller) alterOnePartition(t *txn, req *kmsg.AlterPartitionRequest, topic metadata.Topic, rp kmsg.AlterPartitionRequestTopicPartition) kmsg.AlterPartitionResponseTopicPartition {
	p := kmsg.NewAlterPartitionResponseTopicPartition()
	p.Partition = rp.Partition
	cur, ok := c.latest.Partition(topic.ID, rp.Partition)
	if !ok {
		p.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return p
	}
	newISR, epochs := alterPartitionISR(req.Version, rp)
	if p.ErrorCode = c.validateAlterPartition(req, cur, rp, newISR, epochs); p.ErrorCode != 0 {
		return p
	}
	tp := metadata.TopicPartition{Topic: topic.Name, TopicID: topic.ID, Partition: rp.Partition}
	if change := c.partitionChange(tp, cur, newISR, nil); change != nil {
		t.add(change)
	}
	after, _ := c.latest.Partition(topic.ID, rp.Partition)
	p.LeaderID, p.LeaderEpoch, p.PartitionEpoch = after.Leader, after.LeaderEpoch, after.PartitionEpoch
	p.ISR = slices.Clone(after.ISR)
	p.LeaderRecoveryState = rp.LeaderRecoveryState
	return p
}

// alterPartitionISR returns the requested ISR and, from v3, the broker
// epoch of each member (-1 where unchecked).
func alterPartitionISR(version int16, rp kmsg.AlterPartitionRequestTopicPartition) ([]int32, []int64) {
	if version < 3 {
		epochs := make([]int64, len(rp.NewISR))
		for i := range epochs {
			epochs[i] = -1
		}
		return rp.NewISR, epochs
	}
	ids := make([]int32, len(rp.NewEpochISR))
	epochs := make([]int64, len(rp.NewEpochISR))
	for i, m := range rp.NewEpochISR {
		ids[i], epochs[i] = m.BrokerID, m.BrokerEpoch
	}
	return ids, epochs
}

func (c *Controller) validateAlterPartition(req *kmsg.AlterPartitionRequest, cur metadata.PartitionState, rp kmsg.AlterPartitionRequestTopicPartition, newISR []int32, epochs []int64) int16 {
	switch {
	case rp.LeaderEpoch > cur.LeaderEpoch || rp.PartitionEpoch > cur.PartitionEpoch:
		// The sender knows a newer state: this controller is stale.
		return codeNotController
	case rp.LeaderEpoch < cur.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case req.BrokerID != cur.Leader:
		return kerr.InvalidRequest.Code
	case rp.PartitionEpoch < cur.PartitionEpoch:
		return kerr.InvalidUpdateVersion.Code
	case !validISR(cur.Replicas, newISR) || !slices.Contains(newISR, cur.Leader):
		return kerr.InvalidRequest.Code
	case rp.LeaderRecoveryState != 0:
		// Strand never elects uncleanly into a RECOVERING state.
		return kerr.InvalidRequest.Code
	}
	for i, id := range newISR {
		b, ok := c.latest.Broker(id)
		if !ok || b.Fenced || b.InControlledShutdown || (epochs[i] != -1 && epochs[i] != b.Epoch) {
			if req.Version > 1 {
				return kerr.IneligibleReplica.Code
			}
			return kerr.OperationNotAttempted.Code
		}
	}
	return 0
}

// validISR: non-empty, distinct, and every member a replica.
func validISR(replicas, isr []int32) bool {
	if len(isr) == 0 {
		return false
	}
	s := sortedIDs(isr)
	for i, id := range s {
		if (i > 0 && s[i-1] == id) || !slices.Contains(replicas, id) {
			return false
		}
	}
	return true
}

// armRebalanceTimer schedules the next preferred-leader election round.
func (c *Controller) armRebalanceTimer() {
	if c.cfg.LeaderImbalanceCheckIntervalMs == 0 {
		return
	}
	c.rebalanceTimer = c.clock.SetTimer(c.cfg.LeaderImbalanceCheckIntervalMs*1e6, func() {
		if !c.Active() {
			return
		}
		c.electPreferredLeaders()
		c.armRebalanceTimer()
	})
}

// electPreferredLeaders moves leadership back to the preferred replica (the
// first of the assignment) of every partition where it is in the ISR and may
// lead, as Kafka's auto leader rebalance does (without its per-broker
// imbalance threshold: every such partition moves). The preferred replica is
// in the ISR, so it holds every committed record; the leader epoch grows.
func (c *Controller) electPreferredLeaders() {
	t := c.begin()
	for _, p := range c.partitionsWhere(func(s metadata.PartitionState) bool {
		preferred := s.Replicas[0]
		return s.Leader != preferred && slices.Contains(s.ISR, preferred) && c.acceptable(preferred)
	}) {
		t.add(&metadata.PartitionChangeRecord{TopicID: p.tp.TopicID, PartitionID: p.tp.Partition, Leader: p.state.Replicas[0]})
	}
	t.commit(func() {}, nil)
}
