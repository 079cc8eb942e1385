package broker

// AlterConfigs (key 33), versions 0..2.
//
// Served by core/controller (configs.go): each TOPIC resource's overrides
// are replaced by the request's, validated by core/config, and answered
// once the ConfigRecords commit. Any broker accepts it and forwards it to
// the active controller (controller_role.go), as CreateTopics. Brokers act
// on the new values as they apply the metadata log (topic_config.go).
//
// Skipped: dynamic broker configs (a BROKER resource is INVALID_REQUEST;
// Strand's broker keys are read-only).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleAlterConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.AlterConfigsRequest) {
	cr.forwardAlterConfigs(conn, hdr, req)
}
