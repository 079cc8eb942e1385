package broker

// OffsetCommit (key 8): served by the group coordinator of the group's
// __consumer_offsets partition (core/group, which lists the versions and
// what they skip); NOT_COORDINATOR when this broker does not lead it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (gc *groupCoordinators) handleOffsetCommit(conn env.ConnID, hdr env.RequestHeader, req *kmsg.OffsetCommitRequest) {
	req, complete := gc.acls.current.authorizedOffsetCommit(req)
	gc.handleGroupRequestThen(conn, hdr, req, req.Group, complete)
}
