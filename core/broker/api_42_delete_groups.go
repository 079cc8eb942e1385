package broker

// DeleteGroups (key 42): each named group is deleted by its own
// coordinator (core/group, which lists the versions and what they skip);
// NOT_COORDINATOR for groups whose partition this broker does not lead.
// The answers are merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleDeleteGroups(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteGroupsRequest) {
	gc.fanOutGroups(req, group.Client{ClientID: hdr.ClientID}, req.Groups, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, answers[i].(*kmsg.DeleteGroupsResponse).Groups[i])
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	})
}
