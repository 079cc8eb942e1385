package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
	"strand/core/quorum"
)

// PeerListener names the listener of a peer that a node configured as b
// sends req to (SPEC.md §10): its controller listener for the controller
// RPCs and the metadata quorum's traffic, which only a controller listener
// serves, and the inter-broker listener for everything else (replica
// fetches). Environments route a node's own requests by it.
func PeerListener(b config.Broker, req kmsg.Request) string {
	if controller.Handles(req) || quorum.IsQuorumRequest(req) {
		return b.ControllerListenerNames[0]
	}
	return b.InterBrokerListenerName
}

// requestTimeoutMs bounds every request this node sends to a peer
// (Kafka's request.timeout.ms / replica.socket.timeout.ms defaults).
// env.Network may never call back on a black-holed connection; the
// sender's own timeout decides then.
const requestTimeoutMs = 30000

// errRequestTimedOut is what send reports when the peer did not answer in
// time.
var errRequestTimedOut = errors.New("broker: request to peer timed out")

// send sends req to peer; done runs exactly once, with the answer, the
// network's error, or errRequestTimedOut after requestTimeoutMs.
func (e *nodeEnv) send(peer int32, req kmsg.Request, done func(kmsg.Response, error)) {
	e.sendWithin(peer, req, requestTimeoutMs, done)
}

// sendWithin is send with its own timeout.
func (e *nodeEnv) sendWithin(peer int32, req kmsg.Request, timeoutMs int64, done func(kmsg.Response, error)) {
	finished := false
	timer := e.after(timeoutMs, func() {
		if !finished {
			finished = true
			done(nil, errRequestTimedOut)
		}
	})
	e.net.Send(env.NodeID(peer), req, func(resp kmsg.Response, err error) {
		if finished {
			return
		}
		finished = true
		timer.Stop()
		done(resp, err)
	})
}
