package broker

// CreateTopics (key 19), versions 2..7.
//
// Served: any broker accepts it; the active controller handles it
// (controller_topics.go) and a broker that is not the controller forwards
// the same request to it and relays the answer (Kafka wraps it in Envelope;
// Strand forwards it plainly). NumPartitions and ReplicationFactor -1 take
// num.partitions and default.replication.factor; ValidateOnly; topic ids
// (v7); errors TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
// INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REQUEST (a name
// given twice).
//
// Skipped: manual ReplicaAssignment (INVALID_REPLICA_ASSIGNMENT), topic
// configs (accepted, not stored yet: the response lists none), waiting for
// TimeoutMillis (the answer comes when the records commit).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (n *Node) handleCreateTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreateTopicsRequest) {
	n.toController(req, func(r kmsg.Response, err error) {
		if err != nil {
			resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
			for _, t := range req.Topics {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, kerr.RequestTimedOut.Code
				resp.Topics = append(resp.Topics, rt)
			}
			r = resp
		}
		n.net.Reply(conn, hdr.CorrelationID, r)
	})
}

// toController hands a controller RPC to the local controller role, or
// sends it to the active controller.
func (n *Node) toController(req kmsg.Request, done func(kmsg.Response, error)) {
	if n.ctrl == nil {
		n.net.Send(env.NodeID(n.controllerID), req, done)
		return
	}
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		n.ctrl.createTopics(r, func(resp *kmsg.CreateTopicsResponse) { done(resp, nil) })
	case *kmsg.AlterPartitionRequest:
		n.ctrl.alterPartition(r, func(resp *kmsg.AlterPartitionResponse) { done(resp, nil) })
	default:
		panic("broker: toController with an unroutable request")
	}
}
