package broker

// DeleteGroups (key 42): each named group is deleted by its own
// coordinator (core/group, which lists the versions and what they skip);
// NOT_COORDINATOR for groups whose partition this broker does not lead.
// The answers are merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleDeleteGroups(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteGroupsRequest) {
	allowed, any := gc.acls.current.groupsAllowed(acl.Delete, req.Groups)
	reduced := *req
	reduced.Groups = kept(req.Groups, allowed)
	answer := func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		j := 0
		for i, name := range req.Groups {
			if !allowed[i] {
				resp.Groups = append(resp.Groups, deleteGroupDenied(name))
				continue
			}
			resp.Groups = append(resp.Groups, answers[j].(*kmsg.DeleteGroupsResponse).Groups[j])
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
