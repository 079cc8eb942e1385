package broker

// ListGroups (key 16): the groups of every coordinator this broker hosts
// (core/group, which lists the versions and the state and type filters),
// in partition order. As in Kafka, a coordinator still loading makes the
// answer COORDINATOR_LOAD_IN_PROGRESS, with the groups of the others.
// A broker hosting no coordinator answers an empty list.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleListGroups(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ListGroupsRequest) {
	indexes := make([]int32, 0, len(gc.coordinators))
	for index := range gc.coordinators { // order-independent: sorted below
		indexes = append(indexes, index)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	g := gc.acls.current
	answers := make([]*kmsg.ListGroupsResponse, len(indexes))
	remaining := len(indexes) + 1 // held while the requests go out
	release := func() {
		remaining--
		if remaining > 0 {
			return
		}
		for _, a := range answers {
			if a.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
				resp.ErrorCode = a.ErrorCode
			}
			if a.ErrorCode == 0 {
				resp.Groups = append(resp.Groups, g.listableGroups(a.Groups)...)
			}
		}
		gc.net.Reply(conn, hdr.CorrelationID, resp)
	}
	for i, index := range indexes {
		gc.coordinators[index].c.Handle(req, group.Client{ClientID: hdr.ClientID}, func(r kmsg.Response) {
			answers[i] = r.(*kmsg.ListGroupsResponse)
			release()
		})
	}
	release()
}
