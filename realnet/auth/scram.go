package auth

// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's
// ScramSaslServer serves them: no channel binding (gs2 flag "n"), Kafka's
// extensions after the client nonce (tokenauth=true asks for delegation
// token authentication, which Strand does not have: refused), the
// credentials looked up in the metadata the node has applied.
//
// The node's own login to other nodes and the credentials `strand format`
// makes are github.com/xdg-go/scram's. The server side is written here:
// xdg-go's server conversation requires the client-final nonce to equal
// the joined one, while librdkafka sends its own nonce again in front of
// it and Kafka accepts any nonce that ends with the joined one; and its
// parsers index messages they have not checked (an empty gs2 flag, a
// proof longer than the hash panic there). Strand parses both client
// messages strictly, decodes RFC 5802 saslnames (=2C and =3D), and does
// the RFC's arithmetic (ClientKey = proof XOR HMAC(StoredKey,
// AuthMessage), H(ClientKey) == StoredKey) itself.
//
// An unknown user is answered as a known one, with a salt derived from
// the name and a key that no proof matches, so that the exchange fails at
// the same step, with the same message, whether the user exists or not
// (RFC 5802 §5.1); Kafka fails an unknown user one step earlier.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/scram"

	"strand/core/env"
	"strand/core/metadata"
)

// ScramLookup returns user's credential for mechanism (SCRAM-SHA-256 or
// SCRAM-SHA-512) as the node's applied metadata holds it; it is called on
// connection goroutines.
type ScramLookup func(mechanism, user string) (env.ScramCredential, bool)

// scramTokenAuthExtension is Kafka's extension asking for delegation
// token authentication (ScramLoginModule's tokenauth option).
const scramTokenAuthExtension = "tokenauth"

// scramMockSaltBytes is the length of the salt an unknown user is given:
// what `strand format --add-scram` and kadm (the strand configs tool)
// draw, so that the salt's length does not tell them apart.
const scramMockSaltBytes = ScramSaltBytes

// scramMechanism is the server side of one SCRAM mechanism.
type scramMechanism struct {
	mechanism metadata.ScramMechanism
	lookup    ScramLookup
	// mockKey derives unknown users' salts and keys: drawn at start, so
	// that a user's mock salt is stable for the node's life and says
	// nothing a prober could compare across users.
	mockKey [32]byte
}

// NewScram returns the SCRAM mechanism named name (SCRAM-SHA-256 or
// SCRAM-SHA-512) checking credentials with lookup.
func NewScram(name string, lookup ScramLookup) (Mechanism, error) {
	m, ok := metadata.ScramMechanismNamed(name)
	if !ok {
		return nil, fmt.Errorf("%q is not a SCRAM mechanism", name)
	}
	s := &scramMechanism{mechanism: m, lookup: lookup}
	if _, err := rand.Read(s.mockKey[:]); err != nil {
		return nil, fmt.Errorf("%s: drawing the unknown-user key: %w", name, err)
	}
	return s, nil
}

func scramHash(m metadata.ScramMechanism) scram.HashGeneratorFcn {
	if m == metadata.ScramSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

func (s *scramMechanism) Name() string { return s.mechanism.String() }

func (s *scramMechanism) Start(net.Addr) Exchange { return &scramExchange{mech: s} }

// mockCredential is what an unknown user is answered with.
func (s *scramMechanism) mockCredential(user string) env.ScramCredential {
	derive := func(purpose string) []byte {
		h := hmac.New(sha256.New, s.mockKey[:])
		h.Write([]byte(purpose))
		h.Write([]byte{0})
		h.Write([]byte(user))
		return h.Sum(nil)
	}
	stored := derive("stored key")
	stored = append(stored, derive("stored key 2")...)[:s.mechanism.KeyBytes()]
	return env.ScramCredential{Salt: derive("salt")[:scramMockSaltBytes], StoredKey: stored, ServerKey: stored,
		Iterations: metadata.ScramIterationsMin}
}

type scramStep uint8

const (
	scramAwaitFirst scramStep = iota
	scramAwaitFinal
	scramDone
)

// scramServerNonceBytes is the randomness of the server's part of the
// nonce.
const scramServerNonceBytes = 24

// scramExchange is one authentication.
type scramExchange struct {
	mech       *scramMechanism
	step       scramStep
	first      ScramClientFirst
	credential env.ScramCredential
	// known: the user has a credential (else the exchange runs on a mock
	// one and fails at the proof).
	known bool
	// nonce is the client's and the server's nonce joined; authPrefix is
	// the AuthMessage up to the client-final-message-without-proof.
	nonce, authPrefix string
	principal         string
}

func (e *scramExchange) Next(token []byte) ([]byte, bool, error) {
	switch e.step {
	case scramAwaitFirst:
		e.step = scramDone // until it succeeds
		answer, err := e.serverFirst(token)
		if err != nil {
			return nil, false, err
		}
		e.step = scramAwaitFinal
		return answer, false, nil
	case scramAwaitFinal:
		e.step = scramDone
		answer, err := e.serverFinal(token)
		if err != nil {
			return nil, false, err
		}
		e.principal = "User:" + e.first.User
		return answer, true, nil
	}
	return nil, false, invalidCredentials(e.mech.Name(), errExchangeOver)
}

// serverFirst answers the client-first-message with the salt and
// iterations of the user's credential (a mock one for an unknown user)
// and the joined nonce.
func (e *scramExchange) serverFirst(token []byte) ([]byte, error) {
	name := e.mech.Name()
	first, err := ParseScramClientFirst(token)
	if err != nil {
		return nil, invalidCredentials(name, err)
	}
	if first.Extensions[scramTokenAuthExtension] == "true" {
		return nil, invalidCredentials(name, fmt.Errorf("user %q asked for delegation token authentication (tokenauth=true), which Strand does not have", first.User))
	}
	if first.AuthzID != "" && first.AuthzID != first.User {
		return nil, &Failure{Message: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	credential, known := e.mech.lookup(name, first.User)
	if !known {
		credential = e.mech.mockCredential(first.User)
	} else if credential.Iterations < metadata.ScramIterationsMin {
		return nil, invalidCredentials(name, fmt.Errorf("user %q: iterations %d is less than the minimum %d for %s",
			first.User, credential.Iterations, metadata.ScramIterationsMin, name))
	}
	var random [scramServerNonceBytes]byte
	if _, err := rand.Read(random[:]); err != nil {
		return nil, invalidCredentials(name, fmt.Errorf("drawing a nonce: %w", err))
	}
	e.first, e.credential, e.known = first, credential, known
	e.nonce = first.Nonce + base64.RawStdEncoding.EncodeToString(random[:])
	serverFirst := fmt.Sprintf("r=%s,s=%s,i=%d", e.nonce, base64.StdEncoding.EncodeToString(credential.Salt), credential.Iterations)
	e.authPrefix = first.Bare + "," + serverFirst + ","
	return []byte(serverFirst), nil
}

// serverFinal checks the client's proof and answers with the server's
// signature (RFC 5802 §3).
func (e *scramExchange) serverFinal(token []byte) ([]byte, error) {
	name, m := e.mech.Name(), e.mech.mechanism
	final, err := ParseScramClientFinal(token)
	if err != nil {
		return nil, invalidCredentials(name, err)
	}
	if string(final.ChannelBinding) != e.first.GS2Header {
		return nil, invalidCredentials(name, fmt.Errorf("user %q: channel binding %q is not the gs2 header %q", e.first.User, final.ChannelBinding, e.first.GS2Header))
	}
	// Kafka's ScramSaslServer accepts a nonce that ends with the joined
	// one: librdkafka sends its own nonce again in front of it.
	if !strings.HasSuffix(final.Nonce, e.nonce) {
		return nil, invalidCredentials(name, fmt.Errorf("user %q: the client-final nonce is not the one sent", e.first.User))
	}
	if len(final.Proof) != m.KeyBytes() {
		return nil, invalidCredentials(name, fmt.Errorf("user %q: client proof of %d bytes, want %d", e.first.User, len(final.Proof), m.KeyBytes()))
	}
	authMessage := []byte(e.authPrefix + final.WithoutProof)
	clientKey := scramHMAC(m, e.credential.StoredKey, authMessage)
	for i := range clientKey {
		clientKey[i] ^= final.Proof[i]
	}
	h := m.Hash()()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), e.credential.StoredKey) || !e.known {
		cause := "wrong password"
		if !e.known {
			cause = "unknown user"
		}
		return nil, invalidCredentials(name, fmt.Errorf("user %q: %s", e.first.User, cause))
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(scramHMAC(m, e.credential.ServerKey, authMessage))), nil
}

func scramHMAC(m metadata.ScramMechanism, key, text []byte) []byte {
	h := hmac.New(m.Hash(), key)
	h.Write(text)
	return h.Sum(nil)
}

func (e *scramExchange) Result() Result { return Result{Principal: e.principal} }

// ScramClientFirst is a parsed client-first-message (RFC 5802 §7) as
// Kafka's ClientFirstMessage reads it.
type ScramClientFirst struct {
	// AuthzID and User are the decoded saslnames (=2C is ',', =3D '=');
	// AuthzID is empty when the client names none.
	AuthzID, User string
	Nonce         string
	// Extensions are Kafka's key=value pairs after the nonce.
	Extensions map[string]string
	// GS2Header is the message's first two fields and their commas ("n,,"
	// or "n,a=<authzid>,"): what the client-final's c= must carry.
	GS2Header string
	// Bare is the rest, client-first-message-bare, which starts the
	// AuthMessage.
	Bare string
}

// ParseScramClientFirst parses a client-first-message: gs2 flag "n" (no
// channel binding, which Kafka does not offer), an optional authzid, no
// reserved m= attribute, the user, the nonce, then Kafka's extensions.
func ParseScramClientFirst(msg []byte) (ScramClientFirst, error) {
	if !utf8.Valid(msg) {
		return ScramClientFirst{}, errors.New("client-first-message: not UTF-8")
	}
	fields := strings.Split(string(msg), ",")
	if len(fields) < 4 {
		return ScramClientFirst{}, fmt.Errorf("client-first-message: %d fields, want at least 4", len(fields))
	}
	var out ScramClientFirst
	switch {
	case fields[0] == "y" || strings.HasPrefix(fields[0], "p="):
		return out, fmt.Errorf("client-first-message: gs2 flag %q: channel binding is not supported", fields[0])
	case fields[0] != "n":
		return out, fmt.Errorf("client-first-message: gs2 flag %q, want n", fields[0])
	}
	if fields[1] != "" {
		raw, ok := strings.CutPrefix(fields[1], "a=")
		if !ok {
			return out, fmt.Errorf("client-first-message: %q where the authzid (a=) or nothing goes", fields[1])
		}
		var err error
		if out.AuthzID, err = decodeSaslName(raw); err != nil {
			return out, fmt.Errorf("client-first-message: authzid: %w", err)
		}
	}
	if strings.HasPrefix(fields[2], "m=") {
		return out, errors.New("client-first-message: the reserved m= attribute is not supported")
	}
	raw, ok := strings.CutPrefix(fields[2], "n=")
	if !ok {
		return out, fmt.Errorf("client-first-message: %q where the user name (n=) goes", fields[2])
	}
	var err error
	if out.User, err = decodeSaslName(raw); err != nil {
		return out, fmt.Errorf("client-first-message: user name: %w", err)
	}
	if out.Nonce, err = scramNonce(fields[3]); err != nil {
		return out, fmt.Errorf("client-first-message: %w", err)
	}
	if out.Extensions, err = scramExtensions(fields[4:]); err != nil {
		return out, fmt.Errorf("client-first-message: %w", err)
	}
	out.GS2Header = fields[0] + "," + fields[1] + ","
	out.Bare = string(msg[len(out.GS2Header):])
	return out, nil
}

// ScramClientFinal is a parsed client-final-message.
type ScramClientFinal struct {
	// ChannelBinding is c=, decoded: the gs2 header again, as no channel
	// binding is used.
	ChannelBinding []byte
	Nonce          string
	// Proof is p=, decoded.
	Proof []byte
	// WithoutProof is the message up to the comma before p=, which ends
	// the AuthMessage.
	WithoutProof string
}

// ParseScramClientFinal parses a client-final-message: c=, r=, Kafka's
// extensions, p=.
func ParseScramClientFinal(msg []byte) (ScramClientFinal, error) {
	if !utf8.Valid(msg) {
		return ScramClientFinal{}, errors.New("client-final-message: not UTF-8")
	}
	fields := strings.Split(string(msg), ",")
	if len(fields) < 3 {
		return ScramClientFinal{}, fmt.Errorf("client-final-message: %d fields, want at least 3", len(fields))
	}
	var out ScramClientFinal
	var err error
	if out.ChannelBinding, err = scramBase64(fields[0], "c"); err != nil {
		return out, fmt.Errorf("client-final-message: %w", err)
	}
	if out.Nonce, err = scramNonce(fields[1]); err != nil {
		return out, fmt.Errorf("client-final-message: %w", err)
	}
	if _, err := scramExtensions(fields[2 : len(fields)-1]); err != nil {
		return out, fmt.Errorf("client-final-message: %w", err)
	}
	if out.Proof, err = scramBase64(fields[len(fields)-1], "p"); err != nil {
		return out, fmt.Errorf("client-final-message: %w", err)
	}
	out.WithoutProof = string(msg[:len(msg)-len(fields[len(fields)-1])-1])
	return out, nil
}

// decodeSaslName decodes an RFC 5802 saslname: '=' only as =2C or =3D.
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0:
			return "", errors.New("holds NUL")
		case '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", fmt.Errorf("'=' at byte %d is not =2C or =3D", i)
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// EncodeSaslName escapes a user name as an RFC 5802 saslname.
func EncodeSaslName(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "=", "=3D"), ",", "=2C")
}

// scramNonce reads r=: printable ASCII but ','.
func scramNonce(field string) (string, error) {
	nonce, ok := strings.CutPrefix(field, "r=")
	if !ok || nonce == "" {
		return "", fmt.Errorf("%q where the nonce (r=) goes", field)
	}
	for i := 0; i < len(nonce); i++ {
		if c := nonce[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("nonce byte %d is %#x, not printable ASCII", i, c)
		}
	}
	return nonce, nil
}

// scramBase64 reads key=<base64>.
func scramBase64(field, key string) ([]byte, error) {
	raw, ok := strings.CutPrefix(field, key+"=")
	if !ok {
		return nil, fmt.Errorf("%q where %s= goes", field, key)
	}
	out, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(out) == 0 {
		return nil, fmt.Errorf("%s= is not base64 of at least one byte", key)
	}
	return out, nil
}

// scramExtensionsMax bounds the extensions of one message.
const scramExtensionsMax = 16

// scramExtensions reads Kafka's extensions: key=value, the key ASCII
// letters, the value non-empty.
func scramExtensions(fields []string) (map[string]string, error) {
	if len(fields) > scramExtensionsMax {
		return nil, fmt.Errorf("%d extensions, at most %d", len(fields), scramExtensionsMax)
	}
	out := map[string]string{}
	for _, f := range fields {
		key, value, ok := strings.Cut(f, "=")
		if !ok || key == "" || value == "" || strings.IndexByte(value, 0) >= 0 {
			return nil, fmt.Errorf("extension %q is not key=value", f)
		}
		for _, c := range key {
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
				return nil, fmt.Errorf("extension key %q is not ASCII letters", key)
			}
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("extension %s given twice", key)
		}
		out[key] = value
	}
	return out, nil
}

// scramClient is a node's SCRAM login to another node.
type scramClient struct {
	mechanism metadata.ScramMechanism
	user      string
	password  string
}

func (c scramClient) Name() string { return c.mechanism.String() }

func (c scramClient) Start(string) (ClientExchange, []byte, error) {
	client, err := scramHash(c.mechanism).NewClientUnprepped(c.user, c.password, "")
	if err != nil {
		return nil, nil, err
	}
	conv := client.WithMinIterations(metadata.ScramIterationsMin).NewConversation()
	first, err := conv.Step("")
	if err != nil {
		return nil, nil, err
	}
	return &scramClientExchange{conv: conv, name: c.Name()}, []byte(first), nil
}

// scramClientExchange is the client side of one exchange.
type scramClientExchange struct {
	conv *scram.ClientConversation
	name string
	step int
}

func (e *scramClientExchange) Next(answer []byte) ([]byte, bool, error) {
	e.step++
	switch e.step {
	case 1:
		if err := checkServerIterations(answer); err != nil {
			return nil, false, fmt.Errorf("%s: %w", e.name, err)
		}
		final, err := e.conv.Step(string(answer))
		if err != nil {
			return nil, false, fmt.Errorf("%s: server-first-message: %w", e.name, err)
		}
		return []byte(final), false, nil
	case 2:
		if _, err := e.conv.Step(string(answer)); err != nil || !e.conv.Valid() {
			return nil, false, fmt.Errorf("%s: the server did not prove it holds the credential: %v", e.name, err)
		}
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("%s: an answer after the exchange completed", e.name)
}

// checkServerIterations refuses a server-first-message asking for more
// iterations than any credential may have: each costs this node an HMAC.
func checkServerIterations(msg []byte) error {
	for _, f := range strings.Split(string(msg), ",") {
		if v, ok := strings.CutPrefix(f, "i="); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n > metadata.ScramIterationsMax {
				return fmt.Errorf("server-first-message asks for %q iterations, at most %d", v, metadata.ScramIterationsMax)
			}
			return nil
		}
	}
	return errors.New("server-first-message has no iteration count")
}

// ScramSaltBytes is the length of the salt NewScramCredential draws: what
// kadm draws for AlterUserScramCredentials (Kafka's tools draw 25 or 26).
const ScramSaltBytes = 24

// NewScramCredential makes the credential a server keeps for password,
// with a fresh random salt: what `strand format --add-scram` writes (the
// client tools let kadm make theirs).
func NewScramCredential(m metadata.ScramMechanism, password string, iterations int32) (metadata.ScramCredential, error) {
	if !m.Known() {
		return metadata.ScramCredential{}, fmt.Errorf("%v is not a SCRAM mechanism", m)
	}
	if iterations < metadata.ScramIterationsMin || iterations > metadata.ScramIterationsMax {
		return metadata.ScramCredential{}, fmt.Errorf("%d iterations: want %d to %d", iterations, metadata.ScramIterationsMin, metadata.ScramIterationsMax)
	}
	salt := make([]byte, ScramSaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return metadata.ScramCredential{}, fmt.Errorf("drawing a salt: %w", err)
	}
	client, err := scramHash(m).NewClientUnprepped("", password, "")
	if err != nil {
		return metadata.ScramCredential{}, err
	}
	stored := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: int(iterations)})
	return metadata.ScramCredential{Salt: salt, StoredKey: stored.StoredKey, ServerKey: stored.ServerKey, Iterations: iterations}, nil
}
