package broker

// DescribeGroups (key 15): each named group is described by its own
// coordinator (core/group, which lists the versions and what they skip);
// NOT_COORDINATOR for groups whose partition this broker does not lead.
// The answers are merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleDescribeGroups(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeGroupsRequest) {
	gc.fanOutGroups(req, group.Client{ClientID: hdr.ClientID}, req.Groups, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, answers[i].(*kmsg.DescribeGroupsResponse).Groups[i])
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	})
}
