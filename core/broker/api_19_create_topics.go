package broker

// CreateTopics (key 19), versions 2..7.
//
// Served by core/controller (placement, validation, topic ids, answered once
// the records commit). Any broker accepts it: on a node without the
// controller role it is forwarded to the active controller and the answer
// relayed (controller_role.go). The new partitions reach the brokers through
// the metadata log.
//
// Skipped here: nothing beyond what core/controller skips (see its doc).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleCreateTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreateTopicsRequest) {
	cr.forwardCreateTopics(conn, hdr, req)
}
