package auth

import (
	"errors"
	"net"
	"time"
)

// Mechanism is the server side of a SASL mechanism. A new mechanism (SCRAM,
// which will look its users' credentials up in the metadata log) plugs in
// by implementing it: the connection layer only feeds an Exchange the
// client's tokens and reads its Result.
type Mechanism interface {
	// Name is the mechanism's SASL name (PLAIN, GSSAPI).
	Name() string
	// Start begins one authentication exchange for a connection from
	// remote.
	Start(remote net.Addr) Exchange
}

// Exchange is one authentication exchange on one connection. It is used
// by one goroutine.
type Exchange interface {
	// Next takes the client's next token and returns the server's answer
	// and whether the exchange is complete. A nil answer sends nothing
	// to a client of SaslHandshake v0 (raw tokens); an empty one sends an
	// empty token. A failure is a *Failure.
	Next(token []byte) (answer []byte, done bool, err error)
	// Result is the authenticated identity, once Next reported done.
	Result() Result
}

// Result is what a completed exchange established.
type Result struct {
	// Principal is the connection's principal, "User:<name>".
	Principal string
	// ExpiresAt is when the credential ends (a Kerberos ticket's end
	// time); zero when it does not. The session does not outlive it.
	ExpiresAt time.Time
}

// Failure is a failed authentication. Message is what the client is told
// (SASL_AUTHENTICATION_FAILED's ErrorMessage): it never says whether the
// user exists. Cause is the reason, for the broker's log only.
type Failure struct {
	Message string
	Cause   error
}

func (f *Failure) Error() string {
	if f.Cause == nil {
		return f.Message
	}
	return f.Message + ": " + f.Cause.Error()
}

func (f *Failure) Unwrap() error { return f.Cause }

// invalidCredentials is the failure Kafka reports for a mechanism's own
// error (a SaslException): the cause stays in the broker's log.
func invalidCredentials(mechanism string, cause error) *Failure {
	return &Failure{
		Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism,
		Cause:   cause,
	}
}

// errExchangeOver is a token after the exchange completed.
var errExchangeOver = errors.New("token after the exchange completed")
