package group

// JoinGroup (key 11), versions 0..9.
//
// The classic protocol's join phase, as Kafka's GroupMetadataManager runs
// it: a member without an id gets one (v4+: first MEMBER_ID_REQUIRED with
// the id, KIP-394; older versions join at once); joins park until every
// member has rejoined or the rebalance timeout ends; the next generation
// selects the protocol every member supports with the most first-choice
// votes; the leader's answer lists every member's metadata. A static member
// (group.instance.id, KIP-345) that comes back with a new member id
// replaces its old id, which is fenced; in a Stable group it rejoins without
// a rebalance when neither the selected protocol nor its subscription
// changed (Kafka checks only the protocol; Strand also compares the
// subscription, so a changed one always rebalances). For the "consumer"
// protocol type the subscription is the topics and rack of the
// ConsumerProtocol metadata: the rest (owned partitions, generation, an
// assignor's user data) is what a restarted process never has, so
// comparing it would make every static restart rebalance, defeating
// KIP-345. Other protocol types compare the metadata's bytes.
//
// Skipped: KIP-814's SkipAssignment is set only for a static leader's
// rejoin in v9+; KIP-848 groups (ConsumerGroupHeartbeat) do not exist here,
// so a classic JoinGroup never meets one. v0's missing rebalance timeout
// (and a non-positive one) is the session timeout.

import (
	"bytes"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// joinRequiresKnownMemberID: from v4 a new dynamic member must come back
// with the id it was given (KIP-394).
const joinRequiresKnownMemberIDVersion = 4

// joinSkipAssignmentVersion: from v9 a static leader that rejoins without a
// rebalance is told to skip the assignment (KIP-814).
const joinSkipAssignmentVersion = 9

// joinRequest is a JoinGroup with its defaults resolved.
type joinRequest struct {
	version            int16
	groupID            string
	memberID           string
	instanceID         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocolType       string
	protocols          []protocol
	client             Client
	park               *parkedReply
}

func (c *Coordinator) handleJoinGroup(r *kmsg.JoinGroupRequest, client Client, reply func(kmsg.Response)) {
	fail := func(code int16, memberID string) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		joinError(code, memberID)(resp)
		reply(resp)
	}
	if code := c.availability(r.Group); code != 0 {
		fail(code, r.MemberID)
		return
	}
	if r.SessionTimeoutMillis < c.cfg.GroupMinSessionTimeoutMs || r.SessionTimeoutMillis > c.cfg.GroupMaxSessionTimeoutMs {
		fail(kerr.InvalidSessionTimeout.Code, r.MemberID)
		return
	}
	if r.InstanceID != nil && *r.InstanceID == "" {
		fail(kerr.InvalidRequest.Code, r.MemberID)
		return
	}
	j := joinRequest{
		version:            r.Version,
		groupID:            r.Group,
		memberID:           r.MemberID,
		sessionTimeoutMs:   r.SessionTimeoutMillis,
		rebalanceTimeoutMs: r.RebalanceTimeoutMillis,
		protocolType:       r.ProtocolType,
		protocols:          uniqueProtocols(r.Protocols),
		client:             client,
		park:               &parkedReply{version: r.Version, send: reply},
	}
	if r.Version == 0 || j.rebalanceTimeoutMs <= 0 {
		j.rebalanceTimeoutMs = j.sessionTimeoutMs
	}
	if r.InstanceID != nil {
		j.instanceID = *r.InstanceID
	}
	g := c.groups[r.Group]
	if g == nil {
		if j.memberID != "" {
			fail(kerr.UnknownMemberID.Code, j.memberID)
			return
		}
		g = newGroup(r.Group)
		c.groups[r.Group] = g
	}
	defer c.assertInvariants(g)
	if !c.acceptJoiningMember(g, j.memberID) {
		if m, ok := g.members[j.memberID]; ok {
			c.dropMember(g, m)
		}
		g.stopPending(j.memberID)
		fail(kerr.GroupMaxSizeReached.Code, "")
		c.forgetIfUnused(g)
		return
	}
	if j.memberID == "" {
		c.joinNewMember(g, j)
	} else {
		c.joinExistingMember(g, j)
	}
	c.forgetIfUnused(g)
}

// uniqueProtocols keeps each protocol name's first offer, in order.
func uniqueProtocols(in []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, 0, len(in))
	seen := map[string]bool{}
	for _, p := range in {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		out = append(out, protocol{name: p.Name, metadata: append([]byte{}, p.Metadata...)})
	}
	return out
}

// acceptJoiningMember bounds the group at GroupMaxSize: existing members
// may always rejoin (in PreparingRebalance only those already parked count
// against the bound, so the last to rejoin of an oversized group is turned
// away), and KIP-394 pending ids count too.
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	limit := int(c.cfg.GroupMaxSize)
	m, known := g.members[memberID]
	_, pending := g.pending[memberID]
	switch g.state {
	case Empty, Dead:
		return pending || len(g.pending) < limit
	case PreparingRebalance:
		return (known && m.awaitingJoin != nil) || pending || g.awaitingJoinCount+len(g.pending) < limit
	}
	return known || pending || len(g.members)+len(g.pending) < limit
}

func (c *Coordinator) joinNewMember(g *group, j joinRequest) {
	switch {
	case g.state == Dead:
		g.answerNow(j.park, joinError(kerr.CoordinatorNotAvailable.Code, ""))
		return
	case !g.supportsProtocols(j.protocolType, j.protocols):
		g.answerNow(j.park, joinError(kerr.InconsistentGroupProtocol.Code, ""))
		return
	}
	if j.instanceID != "" {
		id := c.newMemberID(g, j.instanceID)
		if old, ok := g.static[j.instanceID]; ok {
			c.replaceStaticMemberAndRejoin(g, j, old, id)
			return
		}
		c.addMemberAndRebalance(g, j, id)
		return
	}
	id := c.newMemberID(g, j.client.ClientID)
	if j.version < joinRequiresKnownMemberIDVersion {
		c.addMemberAndRebalance(g, j, id)
		return
	}
	g.pending[id] = c.after(j.sessionTimeoutMs, func() { c.expirePendingMember(g, id) })
	g.answerNow(j.park, joinError(kerr.MemberIDRequired.Code, id))
}

// answerNow answers a JoinGroup that was never parked in a member.
func (g *group) answerNow(p *parkedReply, fill func(*kmsg.JoinGroupResponse)) {
	resp := &kmsg.JoinGroupResponse{Version: p.version}
	resp.Default()
	fill(resp)
	p.send(resp)
}

// expirePendingMember forgets a KIP-394 id that did not come back within
// its session timeout.
func (c *Coordinator) expirePendingMember(g *group, id string) {
	if !c.liveGroup(g) {
		return
	}
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	if g.state == PreparingRebalance && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
	c.assertInvariants(g)
	c.forgetIfUnused(g)
}

func (c *Coordinator) joinExistingMember(g *group, j joinRequest) {
	switch {
	case g.state == Dead:
		g.answerNow(j.park, joinError(kerr.CoordinatorNotAvailable.Code, j.memberID))
		return
	case !g.supportsProtocols(j.protocolType, j.protocols):
		g.answerNow(j.park, joinError(kerr.InconsistentGroupProtocol.Code, j.memberID))
		return
	}
	if _, pending := g.pending[j.memberID]; pending {
		if j.instanceID != "" {
			// Pending ids are dynamic; a static member never gets one.
			g.answerNow(j.park, joinError(kerr.InvalidRequest.Code, j.memberID))
			return
		}
		c.addMemberAndRebalance(g, j, j.memberID)
		return
	}
	var instanceID *string
	if j.instanceID != "" {
		instanceID = &j.instanceID
	}
	if code := g.validateMember(j.memberID, instanceID); code != 0 {
		g.answerNow(j.park, joinError(code, j.memberID))
		return
	}
	m := g.members[j.memberID]
	switch g.state {
	case PreparingRebalance:
		c.updateMemberAndRebalance(g, m, j)
	case CompletingRebalance:
		if m.sameProtocols(j.protocols) {
			// A lost JoinGroup answer: tell it again.
			g.answerNow(j.park, g.joinSuccess(m, g.leader, g.isLeader(m.id)))
			return
		}
		c.updateMemberAndRebalance(g, m, j)
	case Stable:
		if g.isLeader(m.id) || !m.sameProtocols(j.protocols) {
			// The leader rejoins to make the group reassign (topic
			// metadata changed); a follower with new metadata needs one.
			c.updateMemberAndRebalance(g, m, j)
			return
		}
		g.answerNow(j.park, g.joinSuccess(m, g.leader, false))
	default:
		g.answerNow(j.park, joinError(kerr.UnknownMemberID.Code, j.memberID))
	}
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, j joinRequest) {
	g.updateMember(m, j.protocols, j.rebalanceTimeoutMs, j.sessionTimeoutMs, j.park)
	c.maybePrepareRebalanceOrCompleteJoin(g, "updating metadata for member", m.id)
}

// addMemberAndRebalance adds a new member with its JoinGroup parked. Until
// the join phase ends its deadline is the new-member join timeout: it has
// no id to heartbeat with yet.
func (c *Coordinator) addMemberAndRebalance(g *group, j joinRequest, id string) {
	m := &member{
		id:                 id,
		instanceID:         j.instanceID,
		clientID:           j.client.ClientID,
		clientHost:         j.client.ClientHost,
		rebalanceTimeoutMs: j.rebalanceTimeoutMs,
		sessionTimeoutMs:   j.sessionTimeoutMs,
		protocolType:       j.protocolType,
		protocols:          j.protocols,
		isNew:              true,
	}
	if g.state == PreparingRebalance && g.prevState == Empty {
		g.newMemberAdded = true
	}
	g.add(m, j.park)
	c.scheduleHeartbeat(g, m, c.cfg.NewMemberJoinTimeoutMs)
	c.maybePrepareRebalanceOrCompleteJoin(g, "adding new member", m.id)
}

// replaceStaticMemberAndRejoin hands a static member's instance id to its
// new member id. The old id is fenced: its parked requests get
// FENCED_INSTANCE_ID.
func (c *Coordinator) replaceStaticMemberAndRejoin(g *group, j joinRequest, oldID, newID string) {
	leaderBefore := g.leader
	old := g.members[oldID]
	m := c.replaceStaticMember(g, old, newID)
	c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
	oldProtocols, oldRebalanceMs, oldSessionMs := m.protocols, m.rebalanceTimeoutMs, m.sessionTimeoutMs
	oldMetadata, _ := m.metadataFor(g.protocol)
	g.updateMember(m, j.protocols, j.rebalanceTimeoutMs, j.sessionTimeoutMs, j.park)
	switch g.state {
	case Stable:
		newMetadata, _ := m.metadataFor(g.protocol)
		if g.selectProtocol() != g.protocol || !sameSubscription(g.protocolType, oldMetadata, newMetadata) {
			c.maybePrepareRebalanceOrCompleteJoin(g, "static member rejoined with changed protocols or subscription", m.id)
			return
		}
		c.persistStaticRejoin(g, j, m, old, leaderBefore, oldProtocols, oldRebalanceMs, oldSessionMs)
	case CompletingRebalance:
		// The leader may already be assigning to the old id.
		c.prepareRebalance(g, "static member replaced while the leader assigns", m.id)
	case PreparingRebalance:
		c.maybeCompleteJoinPhase(g)
	default:
		panic("group: static member replaced in a group with no members")
	}
}

// sameSubscription reports whether two members' metadata for the group's
// protocol subscribe to the same thing: for protocol type "consumer" the
// same topics (in any order) and rack, when both parse as ConsumerProtocol
// subscriptions; otherwise the same bytes.
func sameSubscription(protocolType string, a, b []byte) bool {
	if protocolType == "consumer" { // Kafka's consumer groups: ConsumerProtocol metadata
		var sa, sb kmsg.ConsumerMemberMetadata
		if sa.ReadFrom(a) == nil && sb.ReadFrom(b) == nil {
			ta, tb := slices.Clone(sa.Topics), slices.Clone(sb.Topics)
			slices.Sort(ta)
			slices.Sort(tb)
			return slices.Equal(ta, tb) && equalStringPtr(sa.Rack, sb.Rack)
		}
	}
	return bytes.Equal(a, b)
}

// equalStringPtr: both nil, or both set and equal.
func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// persistStaticRejoin writes the group with the new member id, then
// answers the rejoin with the current generation; if the write fails, the
// old member id is restored.
func (c *Coordinator) persistStaticRejoin(g *group, j joinRequest, m, old *member, leaderBefore string,
	oldProtocols []protocol, oldRebalanceMs, oldSessionMs int32) {
	generation := g.generation
	rec := c.groupRecord(g, currentAssignment(g))
	c.append([]batch.Record{rec}, func(err error) {
		if !c.liveGroup(g) || g.members[m.id] != m {
			return
		}
		if err != nil {
			code := appendErrorCode(err, false)
			if g.state == Stable && g.generation == generation {
				g.updateMember(m, oldProtocols, oldRebalanceMs, oldSessionMs, nil)
				restored := c.replaceStaticMember(g, m, old.id)
				c.scheduleHeartbeat(g, restored, restored.sessionTimeoutMs)
				g.answerNow(j.park, joinError(code, ""))
			} else {
				g.answerJoin(m, joinError(code, ""))
			}
			c.assertInvariants(g)
			return
		}
		if j.version >= joinSkipAssignmentVersion && g.isLeader(m.id) {
			g.answerJoin(m, func(r *kmsg.JoinGroupResponse) {
				g.joinSuccess(m, g.leader, true)(r)
				r.SkipAssignment = true
			})
		} else {
			// Older clients are told the leader is the old id, so a
			// restarted leader does not reassign as a follower would not.
			g.answerJoin(m, g.joinSuccess(m, leaderBefore, false))
		}
		c.assertInvariants(g)
	}, nil)
}

// replaceStaticMember moves old's instance id, place, leadership and
// assignment to a new member with newID; old's parked requests are fenced.
func (c *Coordinator) replaceStaticMember(g *group, old *member, newID string) *member {
	g.answerJoin(old, joinError(kerr.FencedInstanceID.Code, old.id))
	answerSync(old, kerr.FencedInstanceID.Code, nil)
	if old.heartbeatTimer != nil {
		old.heartbeatTimer.Stop()
		old.heartbeatTimer = nil
	}
	m := &member{
		id:                 newID,
		instanceID:         old.instanceID,
		clientID:           old.clientID,
		clientHost:         old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs,
		sessionTimeoutMs:   old.sessionTimeoutMs,
		protocolType:       old.protocolType,
		protocols:          old.protocols,
		assignment:         old.assignment,
	}
	delete(g.members, old.id)
	g.members[newID] = m
	for i, id := range g.order {
		if id == old.id {
			g.order[i] = newID
		}
	}
	if g.leader == old.id {
		g.leader = newID
	}
	g.static[m.instanceID] = newID
	if g.pendingSync[old.id] {
		delete(g.pendingSync, old.id)
		g.pendingSync[newID] = true
	}
	return m
}

// currentAssignment is every member's stored assignment.
func currentAssignment(g *group) map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for _, m := range g.membersInOrder() {
		out[m.id] = m.assignment
	}
	return out
}

// groupRecord is g's GroupMetadata record with the given assignment (nil
// for an empty group).
func (c *Coordinator) groupRecord(g *group, assignment map[string][]byte) batch.Record {
	v := groupValue{
		protocolType:     g.protocolType,
		generation:       g.generation,
		stateTimestampMs: g.stateTimestampMs,
	}
	if g.protocol != "" {
		protocol := g.protocol
		v.protocol = &protocol
	}
	if g.leader != "" {
		leader := g.leader
		v.leader = &leader
	}
	for _, m := range g.membersInOrder() {
		mv := memberValue{
			memberID:           m.id,
			clientID:           m.clientID,
			clientHost:         m.clientHost,
			rebalanceTimeoutMs: m.rebalanceTimeoutMs,
			sessionTimeoutMs:   m.sessionTimeoutMs,
			assignment:         assignment[m.id],
		}
		mv.subscription, _ = m.metadataFor(g.protocol)
		if m.isStatic() {
			inst := m.instanceID
			mv.instanceID = &inst
		}
		v.members = append(v.members, mv)
	}
	return batch.Record{Key: groupKeyBytes(g.id), Value: groupValueBytes(&v)}
}
