package group

// Heartbeat (key 12), versions 0..4.
//
// Keeps a member's session alive. REBALANCE_IN_PROGRESS tells it to
// rejoin; ILLEGAL_GENERATION that it missed a generation; UNKNOWN_MEMBER_ID
// that it is no longer a member. Kafka answers a heartbeat during loading
// with no error to spare members a rejoin; Strand answers
// COORDINATOR_LOAD_IN_PROGRESS like every other request (clients retry it).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleHeartbeat(r *kmsg.HeartbeatRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(r)
	reply(resp)
}

func (c *Coordinator) heartbeat(r *kmsg.HeartbeatRequest) int16 {
	if code := c.availability(r.Group); code != 0 {
		return code
	}
	g := c.groups[r.Group]
	switch {
	case g == nil:
		return kerr.UnknownMemberID.Code
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	}
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		return code
	}
	if r.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[r.MemberID]
	switch g.state {
	case PreparingRebalance:
		c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		return kerr.RebalanceInProgress.Code
	case CompletingRebalance, Stable:
		c.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		return 0
	}
	return kerr.UnknownMemberID.Code
}
