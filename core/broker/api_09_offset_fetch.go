package broker

// OffsetFetch (key 9): served by the group coordinators (core/group, which
// lists the versions and what they skip). Before v8 the request names one
// group and its coordinator answers; from v8 it may name many, each
// answered by its own group's coordinator (NOT_COORDINATOR for groups whose
// partition this broker does not lead), merged in request order.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/group"
)

// batchedOffsetFetchVersion is the first version naming several groups.
const batchedOffsetFetchVersion = 8

func (gc *groupCoordinators) handleOffsetFetch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.OffsetFetchRequest) {
	g := gc.acls.current
	if req.Version < batchedOffsetFetchVersion {
		req, complete := g.authorizedOffsetFetch(req)
		gc.handleGroupRequestThen(conn, hdr, req, req.Group, complete)
		return
	}
	// Each group needs DESCRIBE; the others are answered
	// GROUP_AUTHORIZATION_FAILED without reaching a coordinator.
	names := make([]string, len(req.Groups))
	for i, rg := range req.Groups {
		names[i] = rg.Group
	}
	allowed, any := g.groupsAllowed(acl.Describe, names)
	reduced := *req
	reduced.Groups = nil
	var completes []func(kmsg.OffsetFetchResponseGroup) kmsg.OffsetFetchResponseGroup
	for i, rg := range req.Groups {
		if allowed[i] {
			kept, complete := g.authorizedOffsetFetchGroup(rg)
			reduced.Groups = append(reduced.Groups, kept)
			completes = append(completes, complete)
		}
	}
	answer := func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		j := 0
		for i := range req.Groups {
			if !allowed[i] {
				resp.Groups = append(resp.Groups, offsetFetchGroupDenied(names[i]))
				continue
			}
			resp.Groups = append(resp.Groups, completes[j](answers[j].(*kmsg.OffsetFetchResponse).Groups[j]))
			j++
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	}
	if !any {
		answer(nil)
		return
	}
	gc.fanOutGroups(&reduced, group.Client{ClientID: hdr.ClientID}, kept(names, allowed), answer)
}
