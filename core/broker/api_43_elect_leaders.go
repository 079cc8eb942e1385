package broker

// ElectLeaders (key 43), versions 0..2 (v2 is flexible; v1 adds the
// election type and the top-level error code). kafka-leader-election.sh,
// kadm's ElectLeaders, sarama and admin UIs send it.
//
// Served by core/controller (elect_leaders.go: PREFERRED and UNCLEAN
// elections, answered once the leader changes commit). Any broker accepts
// it: on a node without the controller role it is forwarded to the active
// controller and the answer relayed (controller_role.go). The new leaders
// reach the brokers through the metadata log.
//
// TimeoutMillis is the controller's deadline to start on the request, as
// in Kafka (elect_leaders.go); the forwarding itself is bounded by
// controllerRequestTimeoutMs, as Kafka's by its forwarding timeout.
// Skipped: authorization (Strand has no authorizer).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleElectLeaders(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ElectLeadersRequest) {
	cr.handleControllerRequest(conn, hdr, req)
}
