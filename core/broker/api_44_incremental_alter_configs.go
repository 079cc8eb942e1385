package broker

// IncrementalAlterConfigs (key 44), versions 0..1.
//
// Served by core/controller (configs.go): SET, DELETE, and APPEND and
// SUBTRACT on LIST keys (cleanup.policy and the throttled-replica lists),
// applied to each TOPIC resource's overrides, validated whole by
// core/config, and answered once the ConfigRecords commit. Any broker
// accepts it and forwards it to the active controller
// (controller_role.go). Brokers act on the new values as they apply the
// metadata log (topic_config.go).
//
// Skipped: dynamic broker configs (a BROKER resource is INVALID_REQUEST).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleIncrementalAlterConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.IncrementalAlterConfigsRequest) {
	cr.forwardIncrementalAlterConfigs(conn, hdr, req)
}
