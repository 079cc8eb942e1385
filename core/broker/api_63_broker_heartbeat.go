package broker

// BrokerHeartbeat (key 63), versions 0..1, controller role only.
//
// Served: liveness (a broker silent for broker.session.timeout.ms is
// fenced, controller_ops.go) and unfencing once CurrentMetadataOffset has
// reached the broker's registration. IsCaughtUp mirrors that.
//
// WantFence fences the broker (moving its leaderships away); Strand's
// brokers ask for it when a log directory has failed, in place of Kafka's
// OfflineLogDirs, which would need directory ids.
//
// Skipped: WantShutdown (controlled shutdown) is not acted on yet;
// ShouldShutdown is always false; OfflineLogDirs is not read.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (n *Node) handleBrokerHeartbeat(conn env.ConnID, hdr env.RequestHeader, req *kmsg.BrokerHeartbeatRequest) {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	if n.ctrl == nil {
		resp.ErrorCode, resp.IsFenced = kerr.NotController.Code, true
		n.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	resp.ErrorCode, resp.IsFenced = n.ctrl.heartbeat(req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantFence)
	resp.IsCaughtUp = !resp.IsFenced
	n.net.Reply(conn, hdr.CorrelationID, resp)
}
