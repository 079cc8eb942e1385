package group

// ListGroups (key 16), versions 0..5.
//
// Lists this coordinator's groups in id order, filtered by state (v4+,
// any case) and type (v5+: all of Strand's groups are "classic"). A broker
// hosting several coordinators concatenates their lists; an unloaded
// coordinator answers NOT_COORDINATOR and a loading one
// COORDINATOR_LOAD_IN_PROGRESS, for the broker to pass on or skip.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicGroupType is the group type KIP-848's ListGroups v5 reports.
const classicGroupType = "classic"

func (c *Coordinator) handleListGroups(r *kmsg.ListGroupsRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	switch c.phase {
	case phaseUnloaded:
		resp.ErrorCode = kerr.NotCoordinator.Code
		reply(resp)
		return
	case phaseLoading:
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		reply(resp)
		return
	}
	if !typeFilterAdmits(r.TypesFilter) {
		reply(resp)
		return
	}
	for _, id := range sortedGroupIDs(c.groups) {
		g := c.groups[id]
		if g.state == Dead || !stateFilterAdmits(r.StatesFilter, g.state) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType, g.state.String(), classicGroupType
		resp.Groups = append(resp.Groups, lg)
	}
	reply(resp)
}

func stateFilterAdmits(filter []string, s State) bool {
	if len(filter) == 0 {
		return true
	}
	for _, name := range filter {
		if parsed, ok := parseState(trimSpaceASCII(name)); ok && parsed == s {
			return true
		}
	}
	return false
}

func typeFilterAdmits(filter []string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, name := range filter {
		if equalFoldASCII(trimSpaceASCII(name), classicGroupType) {
			return true
		}
	}
	return false
}

func trimSpaceASCII(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
