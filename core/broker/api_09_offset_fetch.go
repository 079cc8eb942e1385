package broker

// OffsetFetch (key 9): served by the group coordinators (core/group, which
// lists the versions and what they skip). Before v8 the request names one
// group and its coordinator answers; from v8 it may name many, each
// answered by its own group's coordinator (NOT_COORDINATOR for groups whose
// partition this broker does not lead), merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/group"
)

// batchedOffsetFetchVersion is the first version naming several groups.
const batchedOffsetFetchVersion = 8

func (gc *groupCoordinators) handleOffsetFetch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.OffsetFetchRequest) {
	if req.Version < batchedOffsetFetchVersion {
		gc.handleGroupRequest(conn, hdr, req, req.Group)
		return
	}
	groups := make([]string, len(req.Groups))
	for i, g := range req.Groups {
		groups[i] = g.Group
	}
	gc.fanOutGroups(req, group.Client{ClientID: hdr.ClientID}, groups, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		for i := range groups {
			resp.Groups = append(resp.Groups, answers[i].(*kmsg.OffsetFetchResponse).Groups[i])
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	})
}
