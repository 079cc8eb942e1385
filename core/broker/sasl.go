package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// handleSASLHandshake answers a SaslHandshake that reached the core: the
// connection has no SASL (PLAINTEXT, SSL) or has authenticated already and
// is not re-authenticating, so there is nothing to negotiate; the
// environment's authentication layer answers those of a connection that is
// authenticating. ILLEGAL_SASL_STATE with no mechanisms, as Kafka's
// KafkaApis answers.
func (n *Node) handleSASLHandshake(conn env.ConnID, hdr env.RequestHeader, req *kmsg.SASLHandshakeRequest) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

// handleSASLAuthenticate answers a SaslAuthenticate that reached the core,
// which only one outside an authentication exchange does:
// ILLEGAL_SASL_STATE, with Kafka's message.
func (n *Node) handleSASLAuthenticate(conn env.ConnID, hdr env.RequestHeader, req *kmsg.SASLAuthenticateRequest) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	n.net.Reply(conn, hdr.CorrelationID, resp)
}
