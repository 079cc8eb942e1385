package broker

// DescribeQuorum (key 55), versions 0..2 on both kinds of listener
// (kafka-metadata-quorum.sh describe --status / --replication). The
// quorum's leader answers it (core/controller/describe_quorum.go): on a
// controller listener this node's controller answers, NOT_LEADER_OR_FOLLOWER
// unless its voter leads; on a broker listener the request is forwarded
// to the active controller, as a Kafka broker forwards it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// forwardDescribeQuorum relays a client's DescribeQuorum from a broker
// listener to the active controller; the answer comes back as the
// controller gave it, or REQUEST_TIMED_OUT when it could not be reached.
func (cr *controllerRole) forwardDescribeQuorum(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeQuorumRequest) {
	cr.toController(req, func(resp kmsg.Response, err error) {
		if err != nil {
			resp = timedOut(req)
		}
		cr.net.Reply(conn, hdr.CorrelationID, resp)
	})
}
