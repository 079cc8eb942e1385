package group

// SyncGroup (key 14), versions 0..5.
//
// Followers park until the leader's SyncGroup arrives with the assignment;
// the group's metadata record (generation, members, assignment) is then
// appended, and only once the Store reports it committed does every parked
// member get its assignment and the group become Stable. A failed append
// answers every parked member with the mapped error and rebalances. In
// Stable a SyncGroup is answered with the member's stored assignment.
// v5's ProtocolType and Protocol, when given, must match the group's.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

func (c *Coordinator) handleSyncGroup(r *kmsg.SyncGroupRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if code := c.availability(r.Group); code != 0 {
		fail(code)
		return
	}
	g := c.groups[r.Group]
	switch {
	case g == nil || g.state == Empty:
		fail(kerr.UnknownMemberID.Code)
		return
	case g.state == Dead:
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	defer c.assertInvariants(g)
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		fail(code)
		return
	}
	switch {
	case r.Generation != g.generation:
		fail(kerr.IllegalGeneration.Code)
		return
	case r.ProtocolType != nil && *r.ProtocolType != g.protocolType,
		r.Protocol != nil && g.protocol != "" && *r.Protocol != g.protocol:
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m := g.members[r.MemberID]
	switch g.state {
	case PreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case Stable:
		delete(g.pendingSync, m.id)
		g.syncSuccess(m)(resp)
		reply(resp)
	case CompletingRebalance:
		// A repeated SyncGroup replaces the earlier one, which the client
		// has given up on.
		answerSync(m, kerr.RebalanceInProgress.Code, nil)
		m.awaitingSync = &parkedReply{version: r.Version, send: reply}
		delete(g.pendingSync, m.id)
		if g.isLeader(m.id) {
			c.storeAssignment(g, r)
		}
	}
}

// storeAssignment persists the leader's assignment, then hands it out.
func (c *Coordinator) storeAssignment(g *group, r *kmsg.SyncGroupRequest) {
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range r.GroupAssignment {
		if _, ok := g.members[a.MemberID]; ok {
			assignment[a.MemberID] = append([]byte{}, a.MemberAssignment...)
		}
	}
	for _, m := range g.membersInOrder() {
		if _, ok := assignment[m.id]; !ok {
			assignment[m.id] = []byte{}
		}
	}
	rec := c.groupRecord(g, assignment)
	generation := g.generation
	if c.cfg.Bugs.GroupDoubleAssign {
		// Planted bug group-double-assign: answered before the record is
		// committed, and a failed append is ignored.
		c.setAndPropagateAssignment(g, assignment)
		g.transition(Stable, c.wallMs())
		c.append([]batch.Record{rec}, func(error) {}, nil)
		return
	}
	c.append([]batch.Record{rec}, func(err error) {
		// The group may have moved on while the record was replicating.
		if !c.liveGroup(g) || g.state != CompletingRebalance || g.generation != generation {
			return
		}
		if err != nil {
			c.resetAndPropagateAssignment(g, appendErrorCode(err, false))
			c.maybePrepareRebalanceOrCompleteJoin(g, "storing the group's assignment failed", "")
		} else {
			c.setAndPropagateAssignment(g, assignment)
			g.transition(Stable, c.wallMs())
		}
		c.assertInvariants(g)
	}, nil)
}
