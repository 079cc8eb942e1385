package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
)

// metadataLogDir is where the metadata log lives in the first log
// directory: metadata/__cluster_metadata-0, as if Kafka's metadata.log.dir
// were set to <first log dir>/metadata. Not at the root, because
// log.Manager opens every <topic>-<partition> directory there, and the log
// must have one owner.
const metadataLogDir = "metadata"

// startController hosts core/controller when process.roles includes
// controller. Only the active controller (the lowest voter until Raft)
// opens the metadata log; the other voters answer NOT_CONTROLLER.
func (n *Node) startController(disk env.Disk) error {
	b := n.cfg.Broker
	var ml *controller.MetadataLog
	if n.controllerID == n.id {
		var err error
		if ml, err = controller.OpenMetadataLog(disk, metadataLogDir, n.wallMs()); err != nil {
			return fmt.Errorf("broker: open metadata log: %w", err)
		}
	}
	ctrl, err := controller.New(controllerConfigOf(b), n.clock, ml, n.newID)
	if err != nil {
		return fmt.Errorf("broker: start controller: %w", err)
	}
	n.ctrl, n.metadataLog = ctrl, ml
	return nil
}

// controllerConfigOf maps server.properties onto the controller's settings.
func controllerConfigOf(b config.Broker) controller.Config {
	c := controller.DefaultConfig(int32(b.NodeID))
	c.Voters = nil
	for _, v := range b.QuorumVoters {
		c.Voters = append(c.Voters, int32(v.ID))
	}
	c.BrokerSessionTimeoutMs = int64(b.BrokerSessionTimeoutMs)
	c.DefaultPartitions = b.NumPartitions
	c.DefaultReplicationFactor = b.DefaultReplicationFactor
	c.MinInsyncReplicas = int(b.MinInsyncReplicas)
	c.UncleanLeaderElectionEnable = b.UncleanLeaderElectionEnable
	return c
}

// handleControllerRequest routes a controller request (controller.Handles)
// arriving from a connection: to the local controller role if there is
// one; admin requests a client sent to a broker-only node are forwarded to
// the active controller and the answer relayed (Kafka wraps them in
// Envelope; Strand forwards them plainly).
func (n *Node) handleControllerRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	reply := func(resp kmsg.Response) { n.net.Reply(conn, hdr.CorrelationID, resp) }
	if n.ctrl != nil {
		n.ctrl.HandleRequest(req, reply)
		return
	}
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest, *kmsg.CreatePartitionsRequest:
		n.toController(req, func(resp kmsg.Response, err error) {
			if err != nil {
				resp = timedOut(r)
			}
			reply(resp)
		})
	case *kmsg.FetchRequest:
		reply(fetchError(r, kerr.NotLeaderForPartition.Code))
	default:
		// Controller RPCs are advertised only by controllers: a broker
		// that gets one was sent it against the table.
		n.net.Close(conn)
	}
}

// toController hands a request to the local active controller, or sends it
// to the active controller over the network. done runs at most once.
func (n *Node) toController(req kmsg.Request, done func(kmsg.Response, error)) {
	if n.ctrl != nil && n.ctrl.Active() {
		n.ctrl.HandleRequest(req, func(resp kmsg.Response) { done(resp, nil) })
		return
	}
	n.send(n.controllerID, req, done)
}

// timedOut answers a forwarded admin request whose forwarding failed.
func timedOut(req kmsg.Request) kmsg.Response {
	code := kerr.RequestTimedOut.Code
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = &name, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	panic(fmt.Sprintf("broker: timedOut for %T", req))
}
