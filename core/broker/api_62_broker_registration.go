package broker

// BrokerRegistration (key 62), versions 0..3, controller role only.
//
// Served: a broker registers at start with its incarnation id and
// listeners; the controller writes a RegisterBrokerRecord (fenced until the
// broker catches up, design-broker.md) whose offset is the broker epoch, and
// answers once it is committed. A re-registration fences the old
// incarnation's leaderships at once.
//
// Skipped: cluster id, features and log dirs are not checked;
// DUPLICATE_BROKER_REGISTRATION is never answered (the newest incarnation
// wins); KIP-966's unclean-shutdown bookkeeping on re-registration
// (replica.RecordUncleanShutdown) is not applied yet.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
)

func (n *Node) handleBrokerRegistration(conn env.ConnID, hdr env.RequestHeader, req *kmsg.BrokerRegistrationRequest) {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	if n.ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		n.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	reg := brokerRegistration{id: req.BrokerID, incarnation: req.IncarnationID}
	for _, l := range req.Listeners {
		reg.endpoints = append(reg.endpoints, metadata.Endpoint{Listener: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	sort.Slice(reg.endpoints, func(i, j int) bool { return reg.endpoints[i].Listener < reg.endpoints[j].Listener })
	n.ctrl.registerBroker(reg, func(epoch int64, code int16) {
		resp.ErrorCode, resp.BrokerEpoch = code, epoch
		n.net.Reply(conn, hdr.CorrelationID, resp)
	})
}
