package workload

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// Group member timings. The session timeout is the coordinator's minimum
// (group.min.session.timeout.ms, 6000); the rebalance timeout is short so
// that a crashed member stalls a rebalance for a few seconds only.
const (
	memberSessionTimeoutMs   = 6000
	memberRebalanceTimeoutMs = 3000
	memberHeartbeatNs        = 500e6
	memberCommitIntervalNs   = 700e6
	// memberRestartNsMax bounds how long a crashed or departed member
	// stays away.
	memberRestartNsMax = 2e9
	// Per heartbeat, the chance in a thousand that the member crashes,
	// and that it leaves the group (and comes back later).
	memberCrashPerMille = 25
	memberLeavePerMille = 25
)

// The assignors members offer; the elected leader runs the one the group
// voted for.
const (
	assignorRange      = "range"
	assignorRoundRobin = "roundrobin"
)

// member is one consumer-group member speaking the classic protocol, as
// kgo's consumer does: FindCoordinator, JoinGroup (with KIP-394's member id
// retry), SyncGroup (the leader assigns), Heartbeat, OffsetFetch of its
// assignment, Fetch from the partition leaders, OffsetCommit with its
// generation, and sometimes LeaveGroup. Some members are static
// (group.instance.id, KIP-345). A member runs on its own client process,
// which crashes and restarts: a crash loses every volatile field below and
// every request in flight.
type member struct {
	w      *Workload
	client *client
	group  string
	// instanceID is the static member's group.instance.id, or nil.
	instanceID *string
	// protocols are the assignors offered, in preference order.
	protocols []string

	// round numbers the member's join rounds; callbacks and loops of an
	// older round stop. A crash, a rejoin and a departure start a new one.
	round       int
	coordinator int32
	memberID    string
	generation  int32
	assigned    []models.TopicPartition
	// positions is the next offset to fetch per assigned partition;
	// committed what was last committed of it.
	positions map[models.TopicPartition]int64
	committed map[models.TopicPartition]int64
	// committing: an OffsetCommit is in flight.
	committing bool
	// fetching holds the partitions with a Fetch in flight, whatever its
	// round or life (only a crash, which drops the answers, clears it): a
	// new round's fetch loop waits for it, so that the member has one fetch
	// per partition at a time, as the high-watermark check expects of a
	// client.
	fetching map[models.TopicPartition]bool
}

func (w *Workload) newMember(group string, static bool) *member {
	m := &member{w: w, client: w.newClient("member"), group: group, coordinator: -1, fetching: map[models.TopicPartition]bool{}}
	if static {
		id := fmt.Sprintf("%s-instance-%d", group, m.client.index)
		m.instanceID = &id
	}
	m.protocols = []string{assignorRange, assignorRoundRobin}
	if w.r.IntN(2) == 0 {
		m.protocols[0], m.protocols[1] = m.protocols[1], m.protocols[0]
	}
	return m
}

// start begins a new life of the member: no member id (a static member
// keeps its instance id), no assignment.
func (m *member) start() {
	m.round++
	m.coordinator, m.memberID, m.generation = -1, "", -1
	m.assigned, m.positions, m.committed, m.committing = nil, map[models.TopicPartition]int64{}, map[models.TopicPartition]int64{}, false
	m.join(m.round)
}

// instance is the static member's instance id, or "".
func (m *member) instance() string {
	if m.instanceID == nil {
		return ""
	}
	return *m.instanceID
}

// live says whether a callback of round is still the member's business.
func (m *member) live(round int) bool {
	return round == m.round && !m.w.stopped && m.client.proc.Up()
}

// record appends a group operation to the history.
func (m *member) record(kind string, callNs int64, code int16, err error) {
	op := models.GroupOp{Client: m.client.index, Group: m.group, Kind: kind, Member: m.memberID, Generation: m.generation,
		CallNs: callNs, ReturnNs: m.w.s.NowNs(), ErrorCode: code}
	if err != nil {
		op.ReturnNs = models.NeverReturnedNs
		if err != errTimedOut {
			op.ReturnNs = m.w.s.NowNs()
			op.Error = err.Error()
		}
	}
	m.w.groupHistory.Ops = append(m.w.groupHistory.Ops, op)
}

// withCoordinator runs fn with the group's coordinator, asking a random
// broker with FindCoordinator first if it is not known.
func (m *member) withCoordinator(round int, fn func(coordinator int32)) {
	if !m.live(round) {
		return
	}
	if m.coordinator >= 0 {
		fn(m.coordinator)
		return
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(3)
	req.CoordinatorKey, req.CoordinatorType = m.group, 0
	callNs := m.w.s.NowNs()
	m.client.send(m.client.randomBroker(), req, m.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if !m.live(round) {
			return
		}
		code := int16(0)
		if err == nil {
			r := resp.(*kmsg.FindCoordinatorResponse)
			code = r.ErrorCode
			if code == 0 {
				m.coordinator = r.NodeID
			}
		}
		m.record("FindCoordinator", callNs, code, err)
		if m.coordinator >= 0 {
			fn(m.coordinator)
			return
		}
		m.client.proc.After(m.w.cfg.BackoffNs, func() { m.withCoordinator(round, fn) })
	})
}

// lostCoordinator handles an error that says the coordinator moved or is
// unreachable: it is looked up again before the next request.
func (m *member) lostCoordinator(code int16, err error) bool {
	if err != nil || code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code {
		m.coordinator = -1
		return true
	}
	return false
}

// rejoin abandons the current assignment and joins again after a backoff.
func (m *member) rejoin() {
	m.round++
	m.assigned = nil
	round := m.round
	m.client.proc.After(m.w.cfg.BackoffNs, func() { m.join(round) })
}

// fenced is FENCED_INSTANCE_ID: another process took this static member's
// instance id. kgo stops the consumer with a fatal error; the simulated
// process restarts instead, as an operator would.
func (m *member) fenced() {
	m.round++
	m.restartAfter(m.w.r.Int64N(memberRestartNsMax) + 1)
}

// restartAfter starts a new life of the member after delayNs.
func (m *member) restartAfter(delayNs int64) {
	round := m.round
	m.client.proc.After(delayNs, func() {
		if m.live(round) {
			m.start()
		}
	})
}

// join sends JoinGroup and follows its answer.
func (m *member) join(round int) {
	m.withCoordinator(round, func(coordinator int32) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(7)
		req.Group, req.MemberID, req.InstanceID = m.group, m.memberID, m.instanceID
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = memberSessionTimeoutMs, memberRebalanceTimeoutMs
		req.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = append([]string(nil), m.w.cfg.Topics...)
		metaBytes := meta.AppendTo(nil)
		for _, name := range m.protocols {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = name, metaBytes
			req.Protocols = append(req.Protocols, p)
		}
		callNs := m.w.s.NowNs()
		// A JoinGroup waits for the rebalance: up to the rebalance timeout.
		timeoutNs := m.w.cfg.RequestTimeoutNs + memberRebalanceTimeoutMs*1e6
		m.client.send(coordinator, req, timeoutNs, func(resp kmsg.Response, err error) {
			if !m.live(round) {
				return
			}
			var r *kmsg.JoinGroupResponse
			code := int16(0)
			if err == nil {
				r = resp.(*kmsg.JoinGroupResponse)
				code = r.ErrorCode
				if code == 0 || code == kerr.MemberIDRequired.Code {
					m.memberID = r.MemberID
				}
				if code == 0 {
					m.generation = r.Generation
				}
			}
			m.record("JoinGroup", callNs, code, err)
			switch {
			case code == 0 && err == nil:
				m.joined(round, r)
			case code == kerr.MemberIDRequired.Code:
				m.join(round) // KIP-394: join again with the id given
			case code == kerr.UnknownMemberID.Code:
				m.memberID = ""
				m.rejoin()
			case code == kerr.FencedInstanceID.Code:
				m.fenced()
			default:
				m.lostCoordinator(code, err)
				m.rejoin()
			}
		})
	})
}

// joined follows a successful JoinGroup: the leader computes the
// assignment, every member sends SyncGroup.
func (m *member) joined(round int, r *kmsg.JoinGroupResponse) {
	var plan []kmsg.SyncGroupRequestGroupAssignment
	if r.LeaderID == r.MemberID {
		protocol := ""
		if r.Protocol != nil {
			protocol = *r.Protocol
		}
		for id, tps := range assignPartitions(protocol, r.Members, m.w.Partitions()) { // order-independent: sorted below
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = id, encodeAssignment(tps)
			plan = append(plan, a)
		}
		sort.Slice(plan, func(i, j int) bool { return plan[i].MemberID < plan[j].MemberID })
	}
	m.sync(round, r.Protocol, plan)
}

// sync sends SyncGroup (the leader with the plan) and takes the
// assignment it answers.
func (m *member) sync(round int, protocol *string, plan []kmsg.SyncGroupRequestGroupAssignment) {
	m.withCoordinator(round, func(coordinator int32) {
		req := kmsg.NewPtrSyncGroupRequest()
		req.SetVersion(5)
		req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.memberID, m.instanceID
		protocolType := "consumer"
		req.ProtocolType, req.Protocol = &protocolType, protocol
		req.GroupAssignment = plan
		callNs := m.w.s.NowNs()
		timeoutNs := m.w.cfg.RequestTimeoutNs + memberRebalanceTimeoutMs*1e6
		m.client.send(coordinator, req, timeoutNs, func(resp kmsg.Response, err error) {
			if !m.live(round) {
				return
			}
			var r *kmsg.SyncGroupResponse
			code := int16(0)
			if err == nil {
				r = resp.(*kmsg.SyncGroupResponse)
				code = r.ErrorCode
			}
			m.record("SyncGroup", callNs, code, err)
			switch {
			case code == 0 && err == nil:
				tps, decodeErr := decodeAssignment(r.MemberAssignment)
				if decodeErr != nil {
					m.w.decodeErrors = append(m.w.decodeErrors, DecodeError{Replica: -1, AtNs: m.w.s.NowNs(),
						Detail: fmt.Sprintf("member %d of %s: SyncGroup assignment: %v", m.client.index, m.group, decodeErr)})
					m.rejoin()
					return
				}
				m.assigned = tps
				m.w.groupHistory.Assignments = append(m.w.groupHistory.Assignments, models.Assignment{Client: m.client.index,
					Group: m.group, Member: m.memberID, Instance: m.instance(), Generation: m.generation, Partitions: tps,
					AtNs: m.w.s.NowNs()})
				m.stable(round)
			case code == kerr.UnknownMemberID.Code:
				m.memberID = ""
				m.rejoin()
			case code == kerr.FencedInstanceID.Code:
				m.fenced()
			default: // REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, coordinator errors
				m.lostCoordinator(code, err)
				m.rejoin()
			}
		})
	})
}

// stable runs the member's generation: heartbeats, the offset fetch of its
// assignment, fetching, and periodic commits.
func (m *member) stable(round int) {
	m.client.proc.After(memberHeartbeatNs, func() { m.heartbeat(round) })
	m.fetchOffsets(round)
}

// heartbeat sends one Heartbeat; a rebalance, a stale generation or a lost
// member id ends the round. Now and then the member crashes or leaves.
func (m *member) heartbeat(round int) {
	if !m.live(round) {
		return
	}
	switch n := m.w.r.IntN(1000); {
	case n < memberCrashPerMille:
		m.crash()
		return
	case n < memberCrashPerMille+memberLeavePerMille:
		m.leave(round)
		return
	}
	m.withCoordinator(round, func(coordinator int32) {
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(4)
		req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.memberID, m.instanceID
		callNs := m.w.s.NowNs()
		m.client.send(coordinator, req, m.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			if !m.live(round) {
				return
			}
			code := int16(0)
			if err == nil {
				code = resp.(*kmsg.HeartbeatResponse).ErrorCode
			}
			m.record("Heartbeat", callNs, code, err)
			switch code {
			case 0, kerr.CoordinatorLoadInProgress.Code:
			case kerr.RebalanceInProgress.Code:
				// The eager protocol: commit what was consumed, then
				// rejoin (kgo's default revoke).
				m.commit(round, m.rejoin)
				return
			case kerr.UnknownMemberID.Code:
				m.memberID = ""
				m.rejoin()
				return
			case kerr.IllegalGeneration.Code:
				m.rejoin()
				return
			case kerr.FencedInstanceID.Code:
				m.fenced()
				return
			default:
				m.lostCoordinator(code, err)
			}
			m.client.proc.After(memberHeartbeatNs, func() { m.heartbeat(round) })
		})
	})
}

// crash kills the member's process; it restarts after a while with
// nothing but its instance id. Requests in flight are lost with it.
func (m *member) crash() {
	m.round++
	m.client.proc.Crash()
	m.client.reset()
	// The crash dropped the answers of the fetches in flight.
	m.fetching = map[models.TopicPartition]bool{}
	m.w.s.After(m.w.r.Int64N(memberRestartNsMax)+1, func() {
		m.client.proc.Restart()
		if !m.w.stopped {
			m.start()
		}
	})
}

// leave departs the group: a dynamic member sends LeaveGroup, a static
// one just goes (kgo leaves a static membership to the session timeout);
// either comes back later as a new member.
func (m *member) leave(round int) {
	m.round++
	next := m.round
	if m.instanceID != nil {
		m.restartAfter(m.w.r.Int64N(memberRestartNsMax) + 1)
		return
	}
	m.withCoordinator(next, func(coordinator int32) {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.SetVersion(4)
		req.Group = m.group
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.memberID
		req.Members = append(req.Members, lm)
		callNs := m.w.s.NowNs()
		m.client.send(coordinator, req, m.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			if !m.live(next) {
				return
			}
			code := int16(0)
			if err == nil {
				code = resp.(*kmsg.LeaveGroupResponse).ErrorCode
			}
			m.record("LeaveGroup", callNs, code, err)
			m.restartAfter(m.w.r.Int64N(memberRestartNsMax) + 1)
		})
	})
}

// fetchOffsets reads the group's committed offsets of the assignment,
// then fetches each partition from there (from 0 where none is
// committed).
func (m *member) fetchOffsets(round int) {
	m.withCoordinator(round, func(coordinator int32) {
		callNs := m.w.s.NowNs()
		m.w.offsetFetch(m.client, coordinator, m.group, m.assigned, func(offsets map[models.TopicPartition]int64, code int16, err error) {
			if !m.live(round) {
				return
			}
			m.record("OffsetFetch", callNs, code, err)
			if code != 0 || err != nil {
				m.lostCoordinator(code, err)
				m.client.proc.After(m.w.cfg.BackoffNs, func() { m.fetchOffsets(round) })
				return
			}
			for _, tp := range m.assigned {
				pos := max(offsets[tp], 0)
				m.positions[tp], m.committed[tp] = pos, offsets[tp]
				m.fetchLoop(round, tp)
			}
			m.client.proc.After(memberCommitIntervalNs, func() { m.commitLoop(round) })
		})
	})
}

// fetchLoop fetches tp from its leader, one fetch at a time, for the
// round.
func (m *member) fetchLoop(round int, tp models.TopicPartition) {
	if !m.live(round) {
		return
	}
	if m.fetching[tp] {
		m.client.proc.After(m.w.cfg.BackoffNs, func() { m.fetchLoop(round, tp) })
		return
	}
	stopped := func() bool { return !m.live(round) }
	m.client.withLeader(tp, stopped, func(li leaderInfo) {
		if m.fetching[tp] {
			m.client.proc.After(m.w.cfg.BackoffNs, func() { m.fetchLoop(round, tp) })
			return
		}
		m.fetching[tp] = true
		m.w.fetchFrom(m.client, tp, li, m.positions[tp], func(next int64, ok bool) {
			m.fetching[tp] = false
			if !m.live(round) {
				return
			}
			if ok {
				m.positions[tp] = next
				m.fetchLoop(round, tp)
				return
			}
			m.client.forgetLeader(tp)
			m.client.proc.After(m.w.cfg.BackoffNs, func() { m.fetchLoop(round, tp) })
		})
	})
}

// commitLoop commits the positions that moved, every
// memberCommitIntervalNs (kgo's autocommit).
func (m *member) commitLoop(round int) {
	if !m.live(round) {
		return
	}
	m.commit(round, func() {
		m.client.proc.After(memberCommitIntervalNs, func() { m.commitLoop(round) })
	})
}

// commit sends one OffsetCommit of the positions that moved, with the
// member's generation, and runs then once it is answered (at once if
// there is nothing to commit or a commit is already in flight). Each
// partition is recorded when sent, its outcome filled in when answered: a
// crash leaves it unknown.
func (m *member) commit(round int, then func()) {
	var tps []models.TopicPartition
	for _, tp := range m.assigned {
		if m.positions[tp] != m.committed[tp] {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 || m.committing {
		then()
		return
	}
	m.withCoordinator(round, func(coordinator int32) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.memberID, m.instanceID
		callNs := m.w.s.NowNs()
		first := len(m.w.groupHistory.Commits)
		offsets := map[models.TopicPartition]int64{}
		for _, tp := range tps {
			offset := m.positions[tp]
			offsets[tp] = offset
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = tp.Topic
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, offset, -1
			t.Partitions = append(t.Partitions, p)
			req.Topics = append(req.Topics, t)
			m.w.groupHistory.Commits = append(m.w.groupHistory.Commits, models.OffsetCommit{Client: m.client.index,
				Group: m.group, Member: m.memberID, Instance: m.instance(), Generation: m.generation, TP: tp, Offset: offset,
				CallNs: callNs, ReturnNs: models.NeverReturnedNs, Outcome: models.CommitUnknown})
		}
		m.committing = true
		m.client.send(coordinator, req, m.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			// A crash drops this callback, leaving the outcomes unknown;
			// otherwise they are recorded even if the round is over.
			m.committing = false
			worst := int16(0)
			if err == nil {
				codes := map[models.TopicPartition]int16{}
				for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
					for _, p := range t.Partitions {
						codes[models.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
					}
				}
				for i := first; i < first+len(tps); i++ {
					c := &m.w.groupHistory.Commits[i]
					code, answered := codes[c.TP]
					if !answered {
						code = kerr.UnknownServerError.Code
					}
					c.ReturnNs, c.ErrorCode, c.Outcome = m.w.s.NowNs(), code, commitOutcome(code)
					if code == 0 {
						m.committed[c.TP] = offsets[c.TP]
					} else if worst == 0 {
						worst = code
					}
				}
			}
			m.record("OffsetCommit", callNs, worst, err)
			if !m.live(round) {
				return
			}
			switch worst {
			case 0, kerr.CoordinatorLoadInProgress.Code:
			case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
				m.rejoin()
				return
			case kerr.UnknownMemberID.Code:
				m.memberID = ""
				m.rejoin()
				return
			case kerr.FencedInstanceID.Code:
				m.fenced()
				return
			default:
				m.lostCoordinator(worst, err)
			}
			then()
		})
	})
}

// commitOutcome classifies a commit's error code: the errors core/group
// (like Kafka) gives before appending anything are rejections; any other
// error may follow an append that still becomes durable.
func commitOutcome(code int16) models.CommitOutcome {
	switch code {
	case 0:
		return models.CommitAccepted
	case kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.RebalanceInProgress.Code,
		kerr.FencedInstanceID.Code, kerr.CoordinatorLoadInProgress.Code, kerr.GroupIDNotFound.Code,
		kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code:
		return models.CommitRejected
	}
	return models.CommitUnknown
}

// offsetFetch sends one OffsetFetch of tps for group to coordinator,
// records each partition's answer when every partition answered, and
// calls done with the offsets and the first error code.
func (w *Workload) offsetFetch(c *client, coordinator int32, group string, tps []models.TopicPartition,
	done func(offsets map[models.TopicPartition]int64, code int16, err error)) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = group
	for _, tp := range tps {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		req.Topics = append(req.Topics, t)
	}
	callNs := w.s.NowNs()
	c.send(coordinator, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err != nil {
			done(nil, 0, err)
			return
		}
		r := resp.(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 {
			done(nil, r.ErrorCode, nil)
			return
		}
		offsets := map[models.TopicPartition]int64{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					done(nil, p.ErrorCode, nil)
					return
				}
				offsets[models.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
		for _, tp := range tps {
			offset, ok := offsets[tp]
			if !ok {
				done(nil, kerr.UnknownServerError.Code, nil)
				return
			}
			w.groupHistory.Fetches = append(w.groupHistory.Fetches, models.OffsetFetch{Client: c.index, Group: group,
				TP: tp, Offset: offset, CallNs: callNs, ReturnNs: w.s.NowNs()})
		}
		done(offsets, 0, nil)
	})
}

// assignPartitions is the group leader's assignment of tps among the
// members that subscribed to their topics, with Kafka's range assignor
// (each topic's partitions split into contiguous runs, members sorted by
// id) or its round-robin one (every partition dealt in turn).
func assignPartitions(protocol string, members []kmsg.JoinGroupResponseMember,
	tps []models.TopicPartition) map[string][]models.TopicPartition {
	subscribed := map[string]map[string]bool{}
	var ids []string
	for _, mb := range members {
		var meta kmsg.ConsumerMemberMetadata
		topics := map[string]bool{}
		if err := meta.ReadFrom(mb.ProtocolMetadata); err == nil {
			for _, t := range meta.Topics {
				topics[t] = true
			}
		}
		subscribed[mb.MemberID] = topics
		ids = append(ids, mb.MemberID)
	}
	sort.Strings(ids)
	out := map[string][]models.TopicPartition{}
	for _, id := range ids {
		out[id] = nil
	}
	sorted := append([]models.TopicPartition(nil), tps...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Topic != sorted[j].Topic {
			return sorted[i].Topic < sorted[j].Topic
		}
		return sorted[i].Partition < sorted[j].Partition
	})
	if protocol == assignorRoundRobin {
		next := 0
		for _, tp := range sorted {
			for tries := 0; tries < len(ids); tries++ {
				id := ids[next%len(ids)]
				next++
				if subscribed[id][tp.Topic] {
					out[id] = append(out[id], tp)
					break
				}
			}
		}
		return out
	}
	byTopic := map[string][]models.TopicPartition{}
	var topics []string
	for _, tp := range sorted {
		if _, seen := byTopic[tp.Topic]; !seen {
			topics = append(topics, tp.Topic)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp)
	}
	for _, topic := range topics {
		var takers []string
		for _, id := range ids {
			if subscribed[id][topic] {
				takers = append(takers, id)
			}
		}
		if len(takers) == 0 {
			continue
		}
		parts := byTopic[topic]
		per, extra := len(parts)/len(takers), len(parts)%len(takers)
		at := 0
		for i, id := range takers {
			n := per
			if i < extra {
				n++
			}
			out[id] = append(out[id], parts[at:at+n]...)
			at += n
		}
	}
	return out
}

// encodeAssignment is a member's assignment as consumers encode it
// (ConsumerMemberAssignment v0).
func encodeAssignment(tps []models.TopicPartition) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, tp := range tps {
		if n := len(a.Topics); n == 0 || a.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = tp.Topic
			a.Topics = append(a.Topics, t)
		}
		last := &a.Topics[len(a.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return a.AppendTo(nil)
}

// decodeAssignment reads a SyncGroup answer's assignment; an empty one is
// no partitions.
func decodeAssignment(b []byte) ([]models.TopicPartition, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	var out []models.TopicPartition
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, models.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return out, nil
}

// ProbeGroupOffsets is the liveness phase's read of every group's
// committed offsets: the admin client finds each group's coordinator and
// sends OffsetFetch for every partition, retrying every error until one
// answers or deadlineNs (virtual time) passes, then calls done with the
// groups that never answered. The answers are recorded as offset fetches,
// so that a commit lost in a coordinator failover shows in CheckOffsets.
func (w *Workload) ProbeGroupOffsets(deadlineNs int64, done func(unanswered []string)) {
	if len(w.groups) == 0 {
		done(nil)
		return
	}
	answered := make([]bool, len(w.groups))
	remaining := len(w.groups)
	finish := func() {
		remaining--
		if remaining > 0 {
			return
		}
		var out []string
		for i, g := range w.groups {
			if !answered[i] {
				out = append(out, g)
			}
		}
		done(out)
	}
	for i, g := range w.groups {
		var try func()
		try = func() {
			if w.s.NowNs() >= deadlineNs {
				finish()
				return
			}
			retry := func() { w.admin.proc.After(w.cfg.BackoffNs, try) }
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(3)
			req.CoordinatorKey = g
			w.admin.send(w.admin.randomBroker(), req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
				if err != nil || resp.(*kmsg.FindCoordinatorResponse).ErrorCode != 0 {
					retry()
					return
				}
				coordinator := resp.(*kmsg.FindCoordinatorResponse).NodeID
				w.offsetFetch(w.admin, coordinator, g, w.tps, func(_ map[models.TopicPartition]int64, code int16, err error) {
					if code != 0 || err != nil {
						retry()
						return
					}
					answered[i] = true
					finish()
				})
			})
		}
		try()
	}
}
