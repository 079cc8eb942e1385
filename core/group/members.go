package group

import (
	"encoding/hex"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// The member life cycle shared by the group APIs: parking and answering
// requests, heartbeat deadlines, the join phase and its completion, and the
// invariants every change must keep.

// memberIDTriesMax bounds how often newMemberID draws again when an id is
// taken: an id source that repeats that often is broken.
const memberIDTriesMax = 16

// newMemberID is Kafka's member id: the client id (or, for a static member,
// its group.instance.id), a dash, and a UUID. An id already in use in g
// (an id source restarted with the same seed after a crash would repeat
// ids the log still holds) is drawn again.
func (c *Coordinator) newMemberID(g *group, prefix string) string {
	for try := 0; try < memberIDTriesMax; try++ {
		id := c.newID()
		h := hex.EncodeToString(id[:])
		memberID := fmt.Sprintf("%s-%s-%s-%s-%s-%s", prefix, h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
		_, member := g.members[memberID]
		_, pending := g.pending[memberID]
		if !member && !pending {
			return memberID
		}
	}
	panic(fmt.Sprintf("group %q: the id source repeated %d times", g.id, memberIDTriesMax))
}

// answerJoin answers m's parked JoinGroup, if any.
func (g *group) answerJoin(m *member, fill func(*kmsg.JoinGroupResponse)) bool {
	p := m.awaitingJoin
	if p == nil {
		return false
	}
	m.awaitingJoin = nil
	if _, ok := g.members[m.id]; ok && g.members[m.id] == m {
		g.awaitingJoinCount--
	}
	resp := &kmsg.JoinGroupResponse{Version: p.version}
	resp.Default()
	fill(resp)
	p.send(resp)
	return true
}

// answerSync answers m's parked SyncGroup, if any.
func answerSync(m *member, code int16, fill func(*kmsg.SyncGroupResponse)) bool {
	p := m.awaitingSync
	if p == nil {
		return false
	}
	m.awaitingSync = nil
	resp := &kmsg.SyncGroupResponse{Version: p.version}
	resp.Default()
	resp.ErrorCode = code
	if fill != nil {
		fill(resp)
	}
	p.send(resp)
	return true
}

// joinError fills a failed JoinGroup answer.
func joinError(code int16, memberID string) func(*kmsg.JoinGroupResponse) {
	return func(r *kmsg.JoinGroupResponse) {
		r.ErrorCode = code
		r.MemberID = memberID
	}
}

// joinSuccess fills the answer that tells m the current generation; the
// leader also gets every member's metadata for the selected protocol.
func (g *group) joinSuccess(m *member, leader string, withMembers bool) func(*kmsg.JoinGroupResponse) {
	return func(r *kmsg.JoinGroupResponse) {
		r.Generation = g.generation
		protocolType, protocol := g.protocolType, g.protocol
		r.ProtocolType, r.Protocol = &protocolType, &protocol
		r.LeaderID = leader
		r.MemberID = m.id
		if withMembers {
			r.Members = g.joinMembers()
		}
	}
}

// joinMembers lists the members with their metadata for the selected
// protocol, in join order.
func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	if g.state != CompletingRebalance && g.state != Stable {
		panic(fmt.Sprintf("group %q: member metadata asked for in state %v", g.id, g.state))
	}
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
	for _, m := range g.membersInOrder() {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		if m.isStatic() {
			inst := m.instanceID
			jm.InstanceID = &inst
		}
		jm.ProtocolMetadata, _ = m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

// validateMember is Kafka's check of a (member id, instance id) pair: an
// instance id held by another member id is fenced.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		holder, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if holder != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// scheduleHeartbeat (re)arms m's session deadline.
func (c *Coordinator) scheduleHeartbeat(g *group, m *member, timeoutMs int32) {
	if m.heartbeatTimer != nil {
		m.heartbeatTimer.Stop()
	}
	m.heartbeatTimer = c.after(timeoutMs, func() { c.expireHeartbeat(g, m) })
}

// expireHeartbeat removes m if its session ended without a heartbeat.
func (c *Coordinator) expireHeartbeat(g *group, m *member) {
	m.heartbeatTimer = nil
	if !c.liveGroup(g) || g.members[m.id] != m || g.state == Dead || m.hasSatisfiedHeartbeat() {
		return
	}
	c.cfg.Log.Info("removing member from group: its session timed out without a heartbeat",
		slog.String("group", g.id), slog.String("member", m.id), slog.Int("generation", int(g.generation)),
		slog.Int("session_timeout_ms", int(m.sessionTimeoutMs)))
	c.removeMemberAndRebalance(g, m)
	c.assertInvariants(g)
}

// removeMemberAndRebalance removes m (its parked requests get
// UNKNOWN_MEMBER_ID, so a live client rejoins) and moves the group on.
func (c *Coordinator) removeMemberAndRebalance(g *group, m *member) {
	c.dropMember(g, m)
	switch {
	case g.state == Stable || g.state == CompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g, "removing member on session timeout", m.id)
	case g.state == PreparingRebalance && g.hasAllMembersJoined():
		c.completeJoin(g)
	}
}

// dropMember answers m's parked requests with UNKNOWN_MEMBER_ID and removes it.
func (c *Coordinator) dropMember(g *group, m *member) {
	g.answerJoin(m, joinError(kerr.UnknownMemberID.Code, ""))
	answerSync(m, kerr.UnknownMemberID.Code, nil)
	g.remove(m.id)
}

// updateMember records a rejoin's protocols and timeouts and parks join
// (nil only when reverting). An earlier parked JoinGroup of the same member
// is answered REBALANCE_IN_PROGRESS: the client has moved on to the new one.
func (g *group) updateMember(m *member, ps []protocol, rebalanceTimeoutMs, sessionTimeoutMs int32, join *parkedReply) {
	m.protocols = ps
	m.rebalanceTimeoutMs = rebalanceTimeoutMs
	m.sessionTimeoutMs = sessionTimeoutMs
	if join == nil {
		if m.awaitingJoin != nil {
			m.awaitingJoin = nil
			g.awaitingJoinCount--
		}
		return
	}
	g.answerJoin(m, joinError(kerr.RebalanceInProgress.Code, m.id))
	m.awaitingJoin = join
	g.awaitingJoinCount++
}

// maybePrepareRebalanceOrCompleteJoin starts a rebalance if the group may
// enter PreparingRebalance, or ends the join phase in progress. reason and
// memberID (or "") say why, in the log line.
func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *group, reason, memberID string) {
	if g.canRebalance() {
		c.prepareRebalance(g, reason, memberID)
		return
	}
	c.maybeCompleteJoinPhase(g)
}

// prepareRebalance starts a join phase. Members waiting for an assignment
// are told to rejoin. An empty group's first rebalance waits
// group.initial.rebalance.delay.ms for more members. reason and memberID
// (or "") say why, in the log line.
func (c *Coordinator) prepareRebalance(g *group, reason, memberID string) {
	c.cfg.Log.Info("preparing to rebalance group", slog.String("group", g.id), slog.String("state", g.state.String()),
		slog.Int("old_generation", int(g.generation)), slog.String("reason", reason), slog.String("member", memberID))
	if g.state == CompletingRebalance {
		c.resetAndPropagateAssignment(g, kerr.RebalanceInProgress.Code)
	}
	clear(g.pendingSync)
	stopTimer(&g.syncTimer)
	initial := g.state == Empty
	g.transition(PreparingRebalance, c.wallMs())
	if initial {
		delayMs := c.cfg.GroupInitialRebalanceDelayMs
		remainingMs := max(g.rebalanceTimeoutMs()-delayMs, 0)
		c.armJoinTimer(g, delayMs, func() { c.tryCompleteInitialRebalance(g, delayMs, remainingMs) })
		return
	}
	if g.hasAllMembersJoined() {
		c.completeJoin(g)
		return
	}
	c.armJoinTimer(g, g.rebalanceTimeoutMs(), func() { c.completeJoin(g) })
}

func (c *Coordinator) armJoinTimer(g *group, delayMs int32, fire func()) {
	stopTimer(&g.joinTimer)
	g.joinTimer = c.after(delayMs, func() {
		g.joinTimer = nil
		if c.liveGroup(g) && g.state == PreparingRebalance {
			fire()
			c.assertInvariants(g)
		}
	})
}

// tryCompleteInitialRebalance extends the initial delay while newcomers
// keep arriving, up to the rebalance timeout.
func (c *Coordinator) tryCompleteInitialRebalance(g *group, delayMs, remainingMs int32) {
	if g.newMemberAdded && remainingMs != 0 {
		g.newMemberAdded = false
		nextDelayMs := min(c.cfg.GroupInitialRebalanceDelayMs, remainingMs)
		nextRemainingMs := max(remainingMs-delayMs, 0)
		c.armJoinTimer(g, nextDelayMs, func() { c.tryCompleteInitialRebalance(g, nextDelayMs, nextRemainingMs) })
		return
	}
	c.completeJoin(g)
}

// maybeCompleteJoinPhase ends the join phase once every member rejoined,
// except during an initial rebalance, which its timer ends.
func (c *Coordinator) maybeCompleteJoinPhase(g *group) {
	if g.state == PreparingRebalance && g.prevState != Empty && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed, the next generation is formed, and every parked JoinGroup
// is answered (the leader with all members' metadata).
func (c *Coordinator) completeJoin(g *group) {
	if g.state != PreparingRebalance {
		panic(fmt.Sprintf("group %q: completing a join phase in state %v", g.id, g.state))
	}
	stopTimer(&g.joinTimer)
	for _, m := range g.notYetRejoined() {
		if !m.isStatic() {
			c.dropMember(g, m)
		}
	}
	if !g.maybeElectJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined remain: wait for them
		// (or for their sessions to end).
		c.armJoinTimer(g, g.rebalanceTimeoutMs(), func() { c.completeJoin(g) })
		return
	}
	c.initNextGeneration(g)
	if g.state == Empty {
		c.append([]batch.Record{c.groupRecord(g, nil)}, func(error) {
			// An empty generation has no members to tell; if the record is
			// lost the previous generation reloads, with members that time
			// out.
		}, nil)
		return
	}
	for _, m := range g.membersInOrder() {
		g.answerJoin(m, g.joinSuccess(m, g.leader, g.isLeader(m.id)))
		c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	generation := g.generation
	g.syncTimer = c.after(g.rebalanceTimeoutMs(), func() { c.expirePendingSync(g, generation) })
}

// initNextGeneration forms the next generation and asserts that
// generations strictly increase.
func (c *Coordinator) initNextGeneration(g *group) {
	previous := g.generation
	g.generation++
	if g.generation <= previous {
		panic(fmt.Sprintf("group %q: generation %d does not follow %d", g.id, g.generation, previous))
	}
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.transition(CompletingRebalance, c.wallMs())
		c.cfg.Log.Info("stabilized group", slog.String("group", g.id), slog.Int("generation", int(g.generation)),
			slog.Int("members", len(g.members)), slog.String("protocol", g.protocol), slog.String("leader", g.leader))
	} else {
		g.protocol = ""
		g.transition(Empty, c.wallMs())
	}
	clear(g.pendingSync)
}

// expirePendingSync removes the members of generation that never sent
// SyncGroup within the rebalance timeout, and rebalances without them.
func (c *Coordinator) expirePendingSync(g *group, generation int32) {
	g.syncTimer = nil
	if !c.liveGroup(g) || generation != g.generation || len(g.pendingSync) == 0 {
		return
	}
	if g.state != CompletingRebalance && g.state != Stable {
		return
	}
	for _, id := range sortedKeys(g.pendingSync) {
		if m, ok := g.members[id]; ok {
			c.dropMember(g, m)
		}
	}
	c.prepareRebalance(g, "members did not send SyncGroup within the rebalance timeout", "")
	c.assertInvariants(g)
}

// resetAndPropagateAssignment answers every parked SyncGroup with code and
// an empty assignment.
func (c *Coordinator) resetAndPropagateAssignment(g *group, code int16) {
	if g.state != CompletingRebalance {
		panic(fmt.Sprintf("group %q: resetting assignments in state %v", g.id, g.state))
	}
	for _, m := range g.membersInOrder() {
		m.assignment = nil
	}
	c.propagateAssignment(g, code)
}

// setAndPropagateAssignment stores the leader's assignment (members it left
// out get an empty one) and answers every parked SyncGroup.
func (c *Coordinator) setAndPropagateAssignment(g *group, assignment map[string][]byte) {
	if g.state != CompletingRebalance {
		panic(fmt.Sprintf("group %q: setting assignments in state %v", g.id, g.state))
	}
	for _, m := range g.membersInOrder() {
		m.assignment = assignment[m.id]
	}
	c.propagateAssignment(g, 0)
}

func (c *Coordinator) propagateAssignment(g *group, code int16) {
	for _, m := range g.membersInOrder() {
		var fill func(*kmsg.SyncGroupResponse)
		if code == 0 {
			fill = g.syncSuccess(m)
		}
		if answerSync(m, code, fill) {
			c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		}
	}
}

// syncSuccess fills a SyncGroup answer with m's assignment.
func (g *group) syncSuccess(m *member) func(*kmsg.SyncGroupResponse) {
	return func(r *kmsg.SyncGroupResponse) {
		protocolType, protocol := g.protocolType, g.protocol
		r.ProtocolType, r.Protocol = &protocolType, &protocol
		r.MemberAssignment = append([]byte{}, m.assignment...)
	}
}

// assertInvariants panics if g's bookkeeping is inconsistent: member ids
// unique within the generation, every instance id held by exactly the
// member that names it, the parked-join count exact, and the state agreeing
// with the membership.
func (c *Coordinator) assertInvariants(g *group) {
	if !c.liveGroup(g) {
		return
	}
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("group %q (%v, generation %d): ", g.id, g.state, g.generation) + fmt.Sprintf(format, args...))
	}
	if len(g.order) != len(g.members) {
		fail("%d ids in join order, %d members", len(g.order), len(g.members))
	}
	seen := map[string]bool{}
	awaiting, static := 0, 0
	for _, id := range g.order {
		m, ok := g.members[id]
		switch {
		case seen[id]:
			fail("member id %s twice in the generation", id)
		case !ok || m.id != id:
			fail("member id %s listed but not a member", id)
		}
		seen[id] = true
		if m.awaitingJoin != nil {
			awaiting++
		}
		if m.isStatic() {
			static++
			if g.static[m.instanceID] != id {
				fail("instance id %s held by %s, not by its member %s", m.instanceID, g.static[m.instanceID], id)
			}
		}
		if _, pending := g.pending[id]; pending {
			fail("member id %s is both a member and pending", id)
		}
	}
	if awaiting != g.awaitingJoinCount {
		fail("%d members parked in JoinGroup, count says %d", awaiting, g.awaitingJoinCount)
	}
	if static != len(g.static) {
		fail("%d static members, %d instance ids", static, len(g.static))
	}
	if len(g.members) > 0 && g.members[g.leader] == nil {
		fail("leader %q is not a member", g.leader)
	}
	switch g.state {
	case Empty, Dead:
		if len(g.members) > 0 {
			fail("%d members", len(g.members))
		}
	case CompletingRebalance, Stable:
		if len(g.members) == 0 || g.protocol == "" {
			fail("%d members, protocol %q", len(g.members), g.protocol)
		}
	}
}
