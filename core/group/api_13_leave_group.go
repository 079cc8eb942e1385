package group

// LeaveGroup (key 13), versions 0..5.
//
// v0-2 name one member; v3+ a batch, each by member id or, for
// administrative removal, by group.instance.id alone (KIP-345). A leaving
// member's parked JoinGroup gets UNKNOWN_MEMBER_ID, and the group
// rebalances without it. In v0-2 the member's error is the response's.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaveBatchVersion is the first version with a member list.
const leaveBatchVersion = 3

func (c *Coordinator) handleLeaveGroup(r *kmsg.LeaveGroupRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := r.Members
	if r.Version < leaveBatchVersion {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	}
	if code := c.availability(r.Group); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	g := c.groups[r.Group]
	switch {
	case g == nil:
		for _, l := range leaving {
			resp.Members = append(resp.Members, leaveResult(l, kerr.UnknownMemberID.Code))
		}
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		resp.Members = c.leave(g, leaving)
		c.assertInvariants(g)
		c.forgetIfUnused(g)
	}
	if r.Version < leaveBatchVersion {
		if len(resp.Members) == 1 && resp.ErrorCode == 0 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		resp.Members = nil
	}
	reply(resp)
}

// leave removes the members that may leave and rebalances once for all.
func (c *Coordinator) leave(g *group, leaving []kmsg.LeaveGroupRequestMember) []kmsg.LeaveGroupResponseMember {
	out := make([]kmsg.LeaveGroupResponseMember, 0, len(leaving))
	left := 0
	for _, l := range leaving {
		code := int16(0)
		_, pending := g.pending[l.MemberID]
		switch {
		case l.MemberID == "":
			if l.InstanceID == nil || g.static[*l.InstanceID] == "" {
				code = kerr.UnknownMemberID.Code
				break
			}
			c.dropMember(g, g.members[g.static[*l.InstanceID]])
		case pending:
			g.stopPending(l.MemberID)
		default:
			if code = g.validateMember(l.MemberID, l.InstanceID); code == 0 {
				c.dropMember(g, g.members[l.MemberID])
			}
		}
		if code == 0 {
			left++
		}
		out = append(out, leaveResult(l, code))
	}
	if left > 0 {
		switch g.state {
		case Stable, CompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoin(g, "members left the group (LeaveGroup)", "")
		case PreparingRebalance:
			c.maybeCompleteJoinPhase(g)
		}
	}
	return out
}

func leaveResult(l kmsg.LeaveGroupRequestMember, code int16) kmsg.LeaveGroupResponseMember {
	rm := kmsg.NewLeaveGroupResponseMember()
	rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
	return rm
}
