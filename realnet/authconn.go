package realnet

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/wire"
	"strand/realnet/auth"
)

// authenticationTimeoutDefault bounds how long a connection may take,
// from its accept, to finish its TLS handshake and its SASL
// authentication (Network.authenticationTimeout): a client that stalls
// there holds a connection slot without being anyone. Kafka has no such
// bound short of connections.max.idle.ms (10 min).
// TestStalledHandshakeIsClosed shows a client that stops mid-handshake
// closed at the bound.
const authenticationTimeoutDefault = 30 * time.Second

// reauthIntervalMin is Kafka's least time between two re-authentications
// of a connection (KafkaChannel's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS): a
// SaslHandshake sooner goes to the core, which answers ILLEGAL_SASL_STATE.
const reauthIntervalMin = time.Second

// saslState is where a connection is in Kafka's SASL server state machine
// (SaslServerAuthenticator's SaslState; SPEC.md §10.6).
type saslState uint8

const (
	// saslOff: the listener has no SASL; nothing is intercepted.
	saslOff saslState = iota
	// saslInitial: the first request must be ApiVersions or SaslHandshake.
	saslInitial
	// saslHandshake: ApiVersions was answered; SaslHandshake must follow.
	saslHandshake
	// saslAuthenticate: the mechanism's tokens, raw after SaslHandshake
	// v0, in SaslAuthenticate requests after v1.
	saslAuthenticate
	// saslComplete: authenticated; requests go to the core, but a
	// SaslHandshake (re-authentication, KIP-368) and any request after
	// the session expired are intercepted.
	saslComplete
)

// connAuth is one connection's authentication state. Only the
// connection's reader goroutine uses it.
type connAuth struct {
	listener *auth.Listener
	// principal is what every request delivered to the core carries.
	principal string
	state     saslState

	mechanism string
	exchange  auth.Exchange
	// rawTokens: the handshake was v0, tokens come without Kafka framing.
	rawTokens bool
	// session is the current session's number when it has an end
	// (KIP-368), 0 when it has none; lastSession the last number given.
	// expiryTimer marks the end by storing its session's number in
	// expiredSession, so that a request need not read the clock, and a
	// late timer of an earlier session never ends a later one.
	session, lastSession uint64
	expiredSession       atomic.Uint64
	expiryTimer          *time.Timer
	// reauthenticating: a re-authentication is under way; the principal
	// must come out unchanged.
	reauthenticating bool
	lastReauthStart  time.Time
}

// newConnAuth is the state of a connection accepted on listener (nil: a
// listener without security, as in tests that build a bare Network).
func newConnAuth(listener *auth.Listener) *connAuth {
	a := &connAuth{listener: listener, principal: env.AnonymousPrincipal}
	if listener != nil && listener.UsesSASL() {
		a.state = saslInitial
	}
	return a
}

// pending reports whether the connection has not authenticated yet.
func (a *connAuth) pending() bool {
	return a.state != saslOff && a.state != saslComplete
}

// authenticateTransport runs before the connection's first request: the
// TLS handshake on a TLS listener, then the principal the transport
// gives (certificate, source address or ANONYMOUS). A connection that must
// authenticate gets authenticationTimeout to do it. False: the connection
// is to be closed (logged here).
func (sc *serverConn) authenticateTransport() bool {
	a := sc.auth
	if a.listener == nil {
		return true
	}
	tc, isTLS := sc.c.(*tls.Conn)
	if isTLS || a.pending() {
		_ = sc.c.SetDeadline(time.Now().Add(sc.net.authenticationTimeout))
	}
	var cs *tls.ConnectionState
	if isTLS {
		if err := tc.Handshake(); err != nil {
			sc.net.logger.Info("TLS handshake failed; closing connection", "listener", sc.listener,
				"remote", sc.c.RemoteAddr().String(), "err", err)
			return false
		}
		state := tc.ConnectionState()
		cs = &state
	}
	principal, err := a.listener.TransportPrincipal(cs, sc.c.RemoteAddr())
	if err != nil {
		sc.net.logger.Info("authentication failed; closing connection", "listener", sc.listener,
			"remote", sc.c.RemoteAddr().String(), "err", err)
		sc.waitAuthDelay(a.listener.FailureDelay())
		return false
	}
	a.principal = principal
	if !a.pending() {
		_ = sc.c.SetDeadline(time.Time{})
	}
	return true
}

// frameBytesMax is the largest frame the reader takes now: Kafka's
// sasl.server.max.receive.size until the connection has authenticated,
// socket.request.max.bytes after.
func (sc *serverConn) frameBytesMax() int32 {
	if sc.auth.pending() {
		return min(sc.auth.listener.ServerMaxReceiveBytes(), sc.net.frameBytesMax)
	}
	return sc.net.frameBytesMax
}

// refuseFrameLength ends the connection over a size prefix it refuses:
// before authentication it is a failed authentication (Kafka's "Failing
// SASL authentication due to invalid receive size"), closed after
// connection.failed.authentication.delay.ms; after, a bad request.
func (sc *serverConn) refuseFrameLength(err error) error {
	if sc.auth.pending() {
		return sc.failAuthentication(fmt.Errorf("failing SASL authentication due to invalid receive size: %w", err))
	}
	return &badRequestError{err}
}

// intercepts reports whether the authentication layer takes frame rather
// than the core: every frame of a SASL connection before it has
// authenticated but the first ApiVersions, which the core answers (with
// ANONYMOUS); after, a SaslHandshake that may start a re-authentication,
// and any request once the session has expired. It costs an
// authenticated connection a comparison or two per request
// (BenchmarkInterceptsAfterAuthentication).
func (sc *serverConn) intercepts(frame []byte) bool {
	a := sc.auth
	switch a.state {
	case saslOff:
		return false
	case saslComplete:
		if len(frame) >= 2 && apiKeyOf(frame) == kmsg.SASLHandshake.Int16() {
			return true
		}
		return a.sessionExpired()
	case saslInitial:
		if len(frame) >= 4 && apiKeyOf(frame) == kmsg.ApiVersions.Int16() {
			if sc.net.supported(kmsg.ApiVersions.Int16(), int16(binary.BigEndian.Uint16(frame[2:4]))) {
				// An unsupported version gets KIP-511's answer and may be
				// retried; a supported one moves on, as in Kafka.
				a.state = saslHandshake
			}
			return false
		}
	}
	return true
}

func apiKeyOf(frame []byte) int16 { return int16(binary.BigEndian.Uint16(frame[:2])) }

// errSessionExpired closes a connection whose session outlived its
// credentials or connections.max.reauth.ms without re-authenticating.
var errSessionExpired = errors.New("the SASL session expired without re-authentication (connections.max.reauth.ms or the credential's end)")

// authenticateFrame handles a frame intercepts took; hold is what its
// reading reserved, which the reader gives back whatever hold still owns
// when this returns (an answer's slot takes the connection's bytes). An
// error ends the connection: a badRequestError closes it after the answers
// already due.
func (sc *serverConn) authenticateFrame(frame []byte, hold *frameHold) error {
	a := sc.auth
	if a.state == saslComplete {
		now := time.Now()
		if len(frame) >= 2 && apiKeyOf(frame) == kmsg.SASLHandshake.Int16() && now.Sub(a.lastReauthStart) >= reauthIntervalMin {
			a.state, a.reauthenticating, a.lastReauthStart = saslHandshake, true, now
		} else if a.sessionExpired() {
			sc.net.expiredSessions.Add(1)
			return &badRequestError{errSessionExpired}
		} else {
			return sc.deliverIntercepted(frame, hold)
		}
	}
	if a.state == saslAuthenticate && a.rawTokens {
		return sc.saslToken(-1, frame, hold, nil)
	}
	hdr, req, err := wire.ParseRequest(frame, sc.net.supported, sc.net.checks.limits)
	if err != nil {
		if a.state == saslAuthenticate {
			return &badRequestError{fmt.Errorf("during SASL authentication: %w", err)}
		}
		return &badRequestError{fmt.Errorf("invalid request, potential reasons: kafka client configured with the wrong security protocol, it does not support KIP-43 or it is not a kafka client: %w", err)}
	}
	switch a.state {
	case saslInitial, saslHandshake:
		r, ok := req.(*kmsg.SASLHandshakeRequest)
		if !ok {
			// Kafka's InvalidRequestException: closed at once, unanswered.
			return &badRequestError{fmt.Errorf("unexpected Kafka request of type %s during SASL handshake", kmsg.NameForKey(hdr.APIKey))}
		}
		return sc.saslHandshake(hdr, r, hold)
	case saslAuthenticate:
		r, ok := req.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			msg := fmt.Sprintf("Unexpected Kafka request of type %s during SASL authentication.", kmsg.NameForKey(hdr.APIKey))
			return sc.failAuthenticationAnswering(hdr.CorrelationID, hold, errorAnswer(req, kerr.IllegalSaslState.Code, msg), errors.New(msg))
		}
		return sc.saslToken(hdr.CorrelationID, r.SASLAuthBytes, hold, r)
	}
	panic(fmt.Sprintf("realnet: authenticateFrame in SASL state %d", a.state))
}

// deliverIntercepted hands a frame intercepts took back to the core: a
// request on an authenticated connection that is not to be authenticated
// (a SaslHandshake too soon after the last, answered ILLEGAL_SASL_STATE by
// the core as by Kafka's KafkaApis).
func (sc *serverConn) deliverIntercepted(frame []byte, hold *frameHold) error {
	hdr, req, err := wire.ParseRequest(frame, sc.net.supported, sc.net.checks.limits)
	if err != nil {
		return &badRequestError{err}
	}
	// A SaslHandshake frame is never a pooled Produce frame: the core may
	// keep it.
	return sc.deliver(hdr, req, hold, &frameBuf{buf: frame})
}

// saslHandshake answers a SaslHandshake: the mechanism if the listener
// enables it (v1: SaslAuthenticate requests follow; v0: raw tokens), else
// UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection
// fails. A re-authentication must keep its mechanism.
func (sc *serverConn) saslHandshake(hdr env.RequestHeader, req *kmsg.SASLHandshakeRequest, hold *frameHold) error {
	a := sc.auth
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = a.listener.Mechanisms()
	mech := a.listener.Mechanism(req.Mechanism)
	if mech == nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return sc.failAuthenticationAnswering(hdr.CorrelationID, hold, resp, fmt.Errorf("unsupported SASL mechanism %q (enabled: %v)", req.Mechanism, resp.SupportedMechanisms))
	}
	if a.reauthenticating && req.Mechanism != a.mechanism {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return sc.failAuthenticationAnswering(hdr.CorrelationID, hold, resp, fmt.Errorf("SASL mechanism %q requested by client is not supported for re-authentication of mechanism %q", req.Mechanism, a.mechanism))
	}
	a.mechanism, a.exchange = req.Mechanism, mech.Start(sc.c.RemoteAddr())
	a.rawTokens = req.Version == 0
	a.state = saslAuthenticate
	return sc.pushAnswer(hdr.CorrelationID, hold, resp)
}

// saslToken feeds the exchange the client's token: from a
// SaslAuthenticate request (req), or raw after a v0 handshake
// (correlationID -1, req nil).
func (sc *serverConn) saslToken(correlationID int32, token []byte, hold *frameHold, req *kmsg.SASLAuthenticateRequest) error {
	a := sc.auth
	answer, done, err := a.exchange.Next(token)
	if err == nil && done && a.reauthenticating && a.exchange.Result().Principal != a.principal {
		err = &auth.Failure{Message: fmt.Sprintf("Cannot change principals during re-authentication from %s: %s", a.principal, a.exchange.Result().Principal)}
	}
	if err != nil {
		var failure *auth.Failure
		if !errors.As(err, &failure) {
			failure = &auth.Failure{Message: "Authentication failed due to invalid credentials with SASL mechanism " + a.mechanism, Cause: err}
		}
		if req == nil {
			return sc.failAuthentication(failure) // raw tokens: no answer, as in Kafka
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &failure.Message
		return sc.failAuthenticationAnswering(correlationID, hold, resp, failure)
	}
	var lifetimeMs int64
	if done {
		lifetimeMs = a.complete(time.Now())
		_ = sc.c.SetDeadline(time.Time{}) // authenticated: authenticationTimeout no longer applies
	}
	if req == nil {
		if answer == nil {
			return nil
		}
		return sc.pushFrame(-1, hold, appendRawToken(answer))
	}
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SASLAuthBytes = answer
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	resp.SessionLifetimeMillis = lifetimeMs
	return sc.pushAnswer(correlationID, hold, resp)
}

// complete ends a successful exchange: the connection takes its principal
// and, when connections.max.reauth.ms or the credential's end bounds it,
// a session expiry, whose lifetime (ms) it returns for
// SessionLifetimeMillis (0: none).
func (a *connAuth) complete(now time.Time) int64 {
	result := a.exchange.Result()
	a.principal, a.state, a.reauthenticating, a.exchange = result.Principal, saslComplete, false, nil
	lifetime := a.listener.ReauthMax(a.mechanism)
	if !result.ExpiresAt.IsZero() {
		untilEnd := max(result.ExpiresAt.Sub(now), 0)
		if lifetime == 0 || untilEnd < lifetime {
			lifetime = untilEnd
		}
	}
	a.stopExpiry()
	if lifetime == 0 && result.ExpiresAt.IsZero() {
		return 0
	}
	a.lastSession++
	session := a.lastSession
	a.session = session
	a.expiryTimer = time.AfterFunc(lifetime, func() { a.markExpired(session) })
	if ms := lifetime.Milliseconds(); ms > 0 {
		return ms
	}
	return 1 // expired already: the client must re-authenticate at once
}

// stopExpiry ends the session's expiry: at a re-authentication, which
// starts another, and when the connection closes.
func (a *connAuth) stopExpiry() {
	if a.expiryTimer != nil {
		a.expiryTimer.Stop()
		a.expiryTimer = nil
	}
	a.session = 0
}

// sessionExpired reports whether the current session has ended.
func (a *connAuth) sessionExpired() bool {
	return a.session != 0 && a.expiredSession.Load() >= a.session
}

// markExpired records that session ended (the timer's goroutine).
func (a *connAuth) markExpired(session uint64) {
	for {
		old := a.expiredSession.Load()
		if old >= session || a.expiredSession.CompareAndSwap(old, session) {
			return
		}
	}
}

// appendRawToken frames a token for a client of SaslHandshake v0: its
// size and its bytes.
func appendRawToken(token []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(token)), uint32(len(token)))
	return append(out, token...)
}

// pushAnswer queues resp as the answer to the intercepted request.
func (sc *serverConn) pushAnswer(correlationID int32, hold *frameHold, resp kmsg.Response) error {
	return sc.pushFrame(correlationID, hold, wire.AppendResponse(nil, correlationID, resp))
}

// pushFrame queues frame, already answered, behind the connection's
// earlier requests; the request's bytes move from hold to its slot.
func (sc *serverConn) pushFrame(correlationID int32, hold *frameHold, frame []byte) error {
	if _, ok := sc.push(slot{correlationID: correlationID, requestBytes: hold.takeConnBytes(), answered: true, frame: frame}, int64(len(frame))); !ok {
		return net.ErrClosed
	}
	return nil
}

// failAuthenticationAnswering fails the connection's authentication with
// resp (nil: no answer) as the failed request's answer: after
// connection.failed.authentication.delay.ms the answer is written, then
// the connection closes, as Kafka delays the close of a failed
// authentication and sends its response then.
func (sc *serverConn) failAuthenticationAnswering(correlationID int32, hold *frameHold, resp kmsg.Response, cause error) error {
	var frame []byte
	if resp != nil {
		frame = wire.AppendResponse(nil, correlationID, resp)
	}
	if !sc.waitAuthDelay(sc.auth.listener.FailureDelay()) {
		return net.ErrClosed
	}
	if frame != nil {
		if err := sc.pushFrame(correlationID, hold, frame); err != nil {
			return err
		}
	}
	return sc.authenticationFailed(cause)
}

// failAuthentication fails the connection's authentication without an
// answer (a raw token, a frame over the size bound): it closes after the
// delay. The reader gives back what the failed frame reserved, if any.
func (sc *serverConn) failAuthentication(cause error) error {
	if !sc.waitAuthDelay(sc.auth.listener.FailureDelay()) {
		return net.ErrClosed
	}
	return sc.authenticationFailed(cause)
}

// authenticationFailed logs the failure, with its cause (which the client
// is never told), and ends the reader: the connection closes once the
// answers before it are written.
func (sc *serverConn) authenticationFailed(cause error) error {
	sc.net.logger.Info("authentication failed", "listener", sc.listener, "remote", sc.c.RemoteAddr().String(),
		"mechanism", sc.auth.mechanism, "err", cause)
	return &badRequestError{fmt.Errorf("authentication failed: %w", cause)}
}

// waitAuthDelay waits d unless the connection closes first (false). The
// reader does not read meanwhile, as Kafka mutes a channel whose
// authentication failed.
func (sc *serverConn) waitAuthDelay(d time.Duration) bool {
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() {
		// Taking the lock orders the broadcast after a waiter's check, so
		// it cannot fall between the check and the Wait.
		sc.mu.Lock()
		//lint:ignore SA2001 the lock is taken for its ordering alone (above)
		sc.mu.Unlock()
		sc.room.Broadcast()
	})
	defer timer.Stop()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for !sc.closed && time.Now().Before(deadline) {
		sc.room.Wait()
	}
	return !sc.closed
}

// errorAnswer is req's response with code (and message, where the
// response has one) in its top-level error code: what Kafka answers a
// request of another API during SASL authentication (ILLEGAL_SASL_STATE).
// nil when the response has no top-level error code (Produce, Metadata):
// the connection then closes unanswered.
func errorAnswer(req kmsg.Request, code int16, message string) kmsg.Response {
	resp := req.ResponseKind()
	v := reflect.ValueOf(resp).Elem()
	f := v.FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return nil
	}
	f.SetInt(int64(code))
	if m := v.FieldByName("ErrorMessage"); m.IsValid() && m.Type() == reflect.TypeOf((*string)(nil)) {
		m.Set(reflect.ValueOf(&message))
	}
	return resp
}
