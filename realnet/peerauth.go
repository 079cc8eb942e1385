package realnet

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/core/wire"
	"strand/realnet/auth"
)

// peerAuthenticationTimeout bounds a peer connection's TLS handshake and
// SASL exchange, after which the attempt fails and is retried with the
// connection's backoff.
const peerAuthenticationTimeout = 10 * time.Second

// peerAuthResponseBytesMax bounds a response frame during the exchange:
// the server's sasl.server.max.receive.size default, a generous bound on
// a SASL token.
const peerAuthResponseBytesMax = 512 << 10

// peerSecurity is how a node authenticates to other nodes: the listener
// it dials for each plane and the SASL mechanism it uses there
// (sasl.mechanism.controller.protocol, sasl.mechanism.inter.broker.protocol),
// with the same settings a client of that listener would use.
type peerSecurity struct {
	security             *auth.Security
	controllerListener   string
	interBrokerListener  string
	controllerMechanism  string
	interBrokerMechanism string
}

func newPeerSecurity(cfg config.Broker, security *auth.Security) *peerSecurity {
	ps := &peerSecurity{
		security:             security,
		interBrokerListener:  cfg.InterBrokerListenerName,
		controllerMechanism:  cfg.Security.ControllerMechanism,
		interBrokerMechanism: cfg.Security.InterBrokerMechanism,
	}
	if len(cfg.ControllerListenerNames) > 0 {
		ps.controllerListener = cfg.ControllerListenerNames[0]
	}
	return ps
}

// peerSession is what a peer connection's authentication established.
type peerSession struct {
	// lifetime is the server's SessionLifetimeMillis (KIP-368): the
	// connection must be replaced before it ends; 0 for no bound.
	lifetime time.Duration
}

// handshake secures and authenticates a freshly dialled connection to
// key's peer: TLS if its listener has it, then SASL if it has that. It
// returns the connection to use (TLS-wrapped or c).
func (ps *peerSecurity) handshake(key peerKey, c net.Conn) (net.Conn, peerSession, error) {
	if ps == nil || ps.security == nil {
		return c, peerSession{}, nil
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	listener, mechanism := ps.interBrokerListener, ps.interBrokerMechanism
	if key.plane != planeBroker {
		listener, mechanism = ps.controllerListener, ps.controllerMechanism
	}
	l := ps.security.Listener(listener)
	if l == nil {
		return c, peerSession{}, nil
	}
	host, _, err := net.SplitHostPort(key.address)
	if err != nil {
		return nil, peerSession{}, err
	}
	_ = c.SetDeadline(time.Now().Add(peerAuthenticationTimeout))
	if cfg := l.ClientTLS(host); cfg != nil {
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, peerSession{}, fmt.Errorf("TLS handshake with listener %s: %w", listener, err)
		}
		c = tc
	}
	var session peerSession
	if l.UsesSASL() {
		mech, err := l.ClientMechanism(mechanism)
		if err != nil {
			return nil, peerSession{}, err
		}
		if session, err = saslClientExchange(c, mech, host); err != nil {
			return nil, peerSession{}, fmt.Errorf("SASL %s on listener %s: %w", mechanism, listener, err)
		}
	}
	_ = c.SetDeadline(time.Time{})
	ok = true
	return c, session, nil
}

// saslClientExchange authenticates on c as a Kafka client does:
// SaslHandshake v1, then SaslAuthenticate v2 requests carrying the
// mechanism's tokens, each answered before the next is sent.
func saslClientExchange(c net.Conn, mech auth.ClientMechanism, host string) (peerSession, error) {
	r := bufio.NewReader(c)
	var correlationID int32
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		correlationID++
		hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: correlationID, ClientID: peerClientID}
		if _, err := c.Write(wire.AppendRequest(nil, hdr, req)); err != nil {
			return nil, err
		}
		var prefix [4]byte
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return nil, err
		}
		length, err := wire.FrameLength(prefix, peerAuthResponseBytesMax)
		if err != nil {
			return nil, err
		}
		frame := make([]byte, length)
		if _, err := io.ReadFull(r, frame); err != nil {
			return nil, err
		}
		id, resp, err := wire.ParseResponse(frame, req)
		if err == nil && id != correlationID {
			err = fmt.Errorf("answer to correlation id %d, want %d", id, correlationID)
		}
		return resp, err
	}

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := roundTrip(hs)
	if err != nil {
		return peerSession{}, fmt.Errorf("SaslHandshake: %w", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return peerSession{}, fmt.Errorf("SaslHandshake: %w (server enables %v)", kerr.ErrorForCode(code), resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
	}
	exchange, token, err := mech.Start(host)
	if err != nil {
		return peerSession{}, err
	}
	last := false
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(2)
		req.SASLAuthBytes = token
		raw, err := roundTrip(req)
		if err != nil {
			return peerSession{}, fmt.Errorf("SaslAuthenticate: %w", err)
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return peerSession{}, fmt.Errorf("SaslAuthenticate: %w%s", kerr.ErrorForCode(resp.ErrorCode), msg)
		}
		session := peerSession{lifetime: time.Duration(resp.SessionLifetimeMillis) * time.Millisecond}
		if last {
			return session, nil
		}
		var done bool
		token, done, err = exchange.Next(resp.SASLAuthBytes)
		if err != nil {
			return peerSession{}, err
		}
		if done && token == nil {
			return session, nil
		}
		last = done
	}
}

// errSessionRenewal ends a peer connection drained before its SASL
// session's end; run dials a fresh one at once.
var errSessionRenewal = errors.New("SASL session renewal: connection replaced")

// drainBefore makes c drain (peerConn.draining) at a random 85 to 95% of
// the session's lifetime, as Kafka's clients re-authenticate then: a
// node's connections to other nodes never outlive their sessions, which
// the server would end at the next request. It returns a function that
// cancels the timer. A lifetime of 0 means no bound.
func (pc *peerConn) drainBefore(c net.Conn, lifetime time.Duration) (stop func()) {
	if lifetime <= 0 {
		return func() {}
	}
	at := time.Duration(float64(lifetime) * (0.85 + 0.1*rand.Float64()))
	timer := time.AfterFunc(at, func() {
		pc.mu.Lock()
		if pc.conn == c {
			pc.draining = true
		}
		pc.mu.Unlock()
		pc.cond.Broadcast()
	})
	return func() { timer.Stop() }
}

// drainedLocked reports whether a draining connection has nothing in
// flight and nothing half written: the writer may end it. With pc.mu
// held.
func (pc *peerConn) drainedLocked() bool {
	return pc.draining && !pc.writing && len(pc.unwritten) == 0 && len(pc.inFlight) == 0
}
