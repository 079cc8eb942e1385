package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"unicode/utf8"
)

// PasswordLookup returns a PLAIN user's password, and whether the user
// exists.
type PasswordLookup func(user string) (password string, ok bool)

// plainMechanism is SASL/PLAIN (RFC 4616) against a password lookup, as
// Kafka's PlainSaslServer with the JAAS user_<name> options.
type plainMechanism struct {
	lookup PasswordLookup
}

// NewPlain returns the PLAIN mechanism checking passwords with lookup.
func NewPlain(lookup PasswordLookup) Mechanism { return plainMechanism{lookup: lookup} }

// StaticUsers is a PasswordLookup over a fixed map (the JAAS user_ options).
func StaticUsers(users map[string]string) PasswordLookup {
	return func(user string) (string, bool) {
		p, ok := users[user]
		return p, ok
	}
}

func (plainMechanism) Name() string { return "PLAIN" }

func (m plainMechanism) Start(net.Addr) Exchange { return &plainExchange{lookup: m.lookup} }

type plainExchange struct {
	lookup    PasswordLookup
	principal string
}

// The messages Kafka's PlainSaslServer gives; none says whether the user
// exists.
const (
	plainBadCredentials  = "Authentication failed: Invalid username or password"
	plainNoUsername      = "Authentication failed: username not specified"
	plainNoPassword      = "Authentication failed: password not specified"
	plainOtherAuthzID    = "Authentication failed: Client requested an authorization id that is different from username"
	plainTokensMalformed = "Invalid SASL/PLAIN response"
)

// PlainMessage is a parsed SASL/PLAIN client message: authzid NUL authcid
// NUL passwd.
type PlainMessage struct {
	AuthzID, User, Password string
}

// ParsePlainMessage splits a PLAIN message into its three fields, as
// Kafka's PlainSaslServer does: exactly three NUL-separated UTF-8 fields.
func ParsePlainMessage(msg []byte) (PlainMessage, error) {
	if !utf8.Valid(msg) {
		return PlainMessage{}, fmt.Errorf("%s: not UTF-8", plainTokensMalformed)
	}
	fields := bytes.Split(msg, []byte{0})
	if len(fields) != 3 {
		return PlainMessage{}, fmt.Errorf("%s: expected 3 tokens, got %d", plainTokensMalformed, len(fields))
	}
	return PlainMessage{AuthzID: string(fields[0]), User: string(fields[1]), Password: string(fields[2])}, nil
}

// AppendPlainMessage is the client's message for user and password.
func AppendPlainMessage(dst []byte, user, password string) []byte {
	dst = append(dst, 0)
	dst = append(dst, user...)
	dst = append(dst, 0)
	return append(dst, password...)
}

func (e *plainExchange) Next(token []byte) ([]byte, bool, error) {
	if e.principal != "" {
		return nil, false, invalidCredentials("PLAIN", errExchangeOver)
	}
	msg, err := ParsePlainMessage(token)
	if err != nil {
		return nil, false, invalidCredentials("PLAIN", err)
	}
	switch {
	case msg.User == "":
		return nil, false, &Failure{Message: plainNoUsername}
	case msg.Password == "":
		return nil, false, &Failure{Message: plainNoPassword}
	}
	want, exists := e.lookup(msg.User)
	// Compare digests in constant time, an unknown user included, so that
	// the time taken says nothing about which part was wrong.
	got, expected := sha256.Sum256([]byte(msg.Password)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], expected[:]) != 1 || !exists {
		cause := errors.New("wrong password")
		if !exists {
			cause = errors.New("unknown user")
		}
		return nil, false, &Failure{Message: plainBadCredentials, Cause: fmt.Errorf("user %q: %w", msg.User, cause)}
	}
	if msg.AuthzID != "" && msg.AuthzID != msg.User {
		return nil, false, &Failure{Message: plainOtherAuthzID}
	}
	e.principal = "User:" + msg.User
	return []byte{}, true, nil
}

func (e *plainExchange) Result() Result { return Result{Principal: e.principal} }
