package broker

// DescribeGroups (key 15): each named group is described by its own
// coordinator (core/group, which lists the versions and what they skip);
// NOT_COORDINATOR for groups whose partition this broker does not lead.
// The answers are merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleDescribeGroups(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeGroupsRequest) {
	g := gc.acls.current
	allowed, any := g.groupsAllowed(acl.Describe, req.Groups)
	reduced := *req
	reduced.Groups = kept(req.Groups, allowed)
	answer := func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		j := 0
		for i, name := range req.Groups {
			if !allowed[i] {
				resp.Groups = append(resp.Groups, describeGroupDenied(name))
				continue
			}
			rg := answers[j].(*kmsg.DescribeGroupsResponse).Groups[j]
			if req.IncludeAuthorizedOperations {
				rg.AuthorizedOperations = g.authorizedOperations(acl.Group, name)
			}
			resp.Groups = append(resp.Groups, rg)
			j++
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	}
	if !any {
		answer(nil)
		return
	}
	gc.fanOutGroups(&reduced, group.Client{ClientID: hdr.ClientID}, reduced.Groups, answer)
}
