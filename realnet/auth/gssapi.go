package auth

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"

	"strand/core/config"
)

// gssapiMechanism is SASL/GSSAPI with Kerberos V5 (RFC 4752), the
// design's strong mode: a client presents a service ticket for the node's
// principal, which the node's keytab decrypts (no KDC round trip), and
// the security-layer negotiation is carried out as Java's GssKrb5Server
// does, offering no security layer.
type gssapiMechanism struct {
	login *kerberosLogin
	rules config.KerberosRules
}

func newGSSAPI(login *kerberosLogin, rules config.KerberosRules) Mechanism {
	return gssapiMechanism{login: login, rules: rules}
}

func (gssapiMechanism) Name() string { return config.MechanismGSSAPI }

func (m gssapiMechanism) Start(remote net.Addr) Exchange {
	return &gssapiExchange{m: m, remote: remote}
}

// The RFC 4752 security layers; Strand offers and accepts "none".
const (
	securityLayerNone = 0x01
	// securityLayerMaxBytes is the largest wrapped message the server
	// says it takes (Java's default receive buffer); with no security
	// layer nothing is ever wrapped again.
	securityLayerMaxBytes = 65536
)

// The GSS checksum (RFC 4121 §4.1.1) in an authenticator: type 0x8003,
// 16-byte channel bindings after their length, then the context flags.
const (
	gssChecksumType = 0x8003
	gssFlagMutual   = 2
	gssFlagSequence = 8
	gssFlagConf     = 16
	gssFlagInteg    = 32
)

// gssapiStep is where an exchange is.
type gssapiStep uint8

const (
	stepAPReq gssapiStep = iota // the client's AP-REQ
	stepEmpty                   // after our AP-REP: the client's empty token
	stepLayer                   // after our offer: the client's wrapped choice
	stepDone
)

type gssapiExchange struct {
	m      gssapiMechanism
	remote net.Addr
	step   gssapiStep

	// key protects the Wrap tokens: the initiator's subkey, else the
	// ticket's session key.
	key          types.EncryptionKey
	acceptorSeq  uint64
	initiatorSeq uint64
	principal    string
	expires      time.Time
}

func (e *gssapiExchange) Result() Result { return Result{Principal: e.principal, ExpiresAt: e.expires} }

func (e *gssapiExchange) Next(token []byte) ([]byte, bool, error) {
	fail := func(err error) ([]byte, bool, error) {
		return nil, false, invalidCredentials(config.MechanismGSSAPI, err)
	}
	switch e.step {
	case stepAPReq:
		answer, err := e.acceptAPReq(token)
		if err != nil {
			return fail(err)
		}
		return answer, false, nil
	case stepEmpty:
		if len(token) != 0 {
			return fail(errors.New("expected an empty token after the AP-REP"))
		}
		offer, err := e.offer()
		if err != nil {
			return fail(err)
		}
		return offer, false, nil
	case stepLayer:
		if err := e.acceptLayer(token); err != nil {
			return fail(err)
		}
		e.step = stepDone
		return nil, true, nil
	}
	return fail(errExchangeOver)
}

// acceptAPReq verifies the client's AP-REQ: a ticket for this node's
// principal that its keytab decrypts, valid now (within the clock skew),
// an authenticator within the skew and never seen before. It answers an
// AP-REP when the client asks for mutual authentication, else the
// security-layer offer at once.
func (e *gssapiExchange) acceptAPReq(token []byte) ([]byte, error) {
	id, msg, err := ParseContextToken(token)
	if err != nil {
		return nil, err
	}
	if id != tokenAPReq {
		return nil, fmt.Errorf("GSS-API token id %04x, want an AP-REQ", id)
	}
	var req messages.APReq
	if err := req.Unmarshal(msg); err != nil {
		return nil, fmt.Errorf("AP-REQ: %w", err)
	}
	login := e.m.login
	service := req.Ticket.SName.PrincipalNameString() + "@" + req.Ticket.Realm
	if service != login.principal {
		return nil, fmt.Errorf("a ticket for %s, not for this node's principal %s", service, login.principal)
	}
	var clientAddr types.HostAddress
	if tcp, ok := e.remote.(*net.TCPAddr); ok {
		clientAddr = types.HostAddressFromNetIP(tcp.IP)
	}
	skew := login.clockSkew()
	if ok, err := req.Verify(login.keytab, skew, clientAddr, &login.name); !ok || err != nil {
		if err == nil {
			err = errors.New("the AP-REQ does not verify")
		}
		return nil, err
	}
	a := req.Authenticator
	client := a.CName.PrincipalNameString() + "@" + a.CRealm
	now := time.Now()
	replayKey := strings.Join([]string{client, service, strconv.FormatInt(a.CTime.Unix(), 10), strconv.Itoa(a.Cusec)}, "|")
	if login.replays.seen(replayKey, now, now.Add(2*skew)) {
		return nil, fmt.Errorf("replayed authenticator from %s (KRB_AP_ERR_REPEAT)", client)
	}
	short, err := e.m.rules.ShortName(client, login.defaultRealm())
	if err != nil {
		return nil, err
	}
	e.principal = "User:" + short
	e.expires = req.Ticket.DecryptedEncPart.EndTime
	e.key = req.Ticket.DecryptedEncPart.Key
	if a.SubKey.KeyType != 0 {
		e.key = a.SubKey
	}
	e.initiatorSeq = uint64(uint32(a.SeqNumber))
	mutual := types.IsFlagSet(&req.APOptions, flags.APOptionMutualRequired)
	if a.Cksum.CksumType == gssChecksumType && len(a.Cksum.Checksum) >= 24 {
		mutual = mutual || binary.LittleEndian.Uint32(a.Cksum.Checksum[20:24])&gssFlagMutual != 0
	}
	if !mutual {
		// RFC 4121: without mutual authentication the acceptor's sequence
		// numbers start at the initiator's.
		e.acceptorSeq = e.initiatorSeq
		return e.offer()
	}
	seq, err := rand.Int(rand.Reader, big.NewInt(1<<31-1))
	if err != nil {
		return nil, err
	}
	e.acceptorSeq = seq.Uint64() + 1
	rep, err := MarshalAPRep(req.Ticket.DecryptedEncPart.Key, a.CTime, a.Cusec, int64(e.acceptorSeq))
	if err != nil {
		return nil, fmt.Errorf("AP-REP: %w", err)
	}
	e.step = stepEmpty
	return AppendContextToken(nil, tokenAPRep, rep), nil
}

// offer is the server's RFC 4752 challenge: the security layers it
// supports (none) and its largest message, wrapped.
func (e *gssapiExchange) offer() ([]byte, error) {
	maxBytes := uint32(securityLayerMaxBytes)
	payload := []byte{securityLayerNone, byte(maxBytes >> 16), byte(maxBytes >> 8), byte(maxBytes)}
	t := WrapToken{Flags: wrapSentByAcceptor, SeqNum: e.acceptorSeq, Payload: payload}
	e.acceptorSeq++
	e.step = stepLayer
	return t.Marshal(e.key, keyusage.GSSAPI_ACCEPTOR_SEAL)
}

// acceptLayer checks the client's wrapped answer to the offer: signed by
// the initiator, choosing no security layer. An authorization id after
// the four bytes is ignored, as Kafka's callback handler authorizes the
// authenticated name.
func (e *gssapiExchange) acceptLayer(token []byte) error {
	t, err := ParseWrapToken(token)
	if err != nil {
		return err
	}
	if t.Flags&wrapSentByAcceptor != 0 {
		return errors.New("the client's Wrap token claims to come from the acceptor")
	}
	if err := t.Verify(e.key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		return err
	}
	if len(t.Payload) < 4 {
		return fmt.Errorf("security-layer answer of %d bytes, want at least 4", len(t.Payload))
	}
	if t.Payload[0]&securityLayerNone == 0 {
		return fmt.Errorf("the client chose security layer %#x; only none (1) is offered", t.Payload[0])
	}
	return nil
}

// gssapiClient is the initiator a node authenticates to other nodes with:
// a service ticket for <service>/<host> from its login, mutual
// authentication (the peer proves it holds the service key with its
// AP-REP), and the RFC 4752 negotiation choosing no security layer.
type gssapiClient struct {
	login   *kerberosLogin
	service string
}

func (gssapiClient) Name() string { return config.MechanismGSSAPI }

func (c gssapiClient) Start(host string) (ClientExchange, []byte, error) {
	cl := c.login.client
	spn := c.service + "/" + host
	ticket, sessionKey, err := cl.GetServiceTicket(spn)
	if err != nil {
		return nil, nil, fmt.Errorf("service ticket for %s: %w", spn, err)
	}
	a, err := types.NewAuthenticator(cl.Credentials.Domain(), cl.Credentials.CName())
	if err != nil {
		return nil, nil, err
	}
	sum := make([]byte, 24)
	binary.LittleEndian.PutUint32(sum[0:4], 16)
	binary.LittleEndian.PutUint32(sum[20:24], gssFlagMutual|gssFlagSequence|gssFlagInteg|gssFlagConf)
	a.Cksum = types.Checksum{CksumType: gssChecksumType, Checksum: sum}
	req, err := messages.NewAPReq(ticket, sessionKey, a)
	if err != nil {
		return nil, nil, err
	}
	types.SetFlag(&req.APOptions, flags.APOptionMutualRequired)
	msg, err := req.Marshal()
	if err != nil {
		return nil, nil, err
	}
	ex := &gssapiClientExchange{sessionKey: sessionKey, key: sessionKey, ctime: a.CTime.Truncate(time.Second), cusec: a.Cusec, seq: uint64(uint32(a.SeqNumber))}
	return ex, AppendContextToken(nil, tokenAPReq, msg), nil
}

type gssapiClientExchange struct {
	sessionKey, key types.EncryptionKey
	// acceptorSubkey: the AP-REP gave a subkey, which the Wrap tokens use.
	acceptorSubkey bool
	ctime          time.Time
	cusec          int
	seq            uint64
	step           int
}

func (e *gssapiClientExchange) Next(answer []byte) ([]byte, bool, error) {
	e.step++
	switch e.step {
	case 1: // the AP-REP
		id, msg, err := ParseContextToken(answer)
		if err != nil {
			return nil, false, err
		}
		if id != tokenAPRep {
			return nil, false, fmt.Errorf("GSS-API token id %04x, want an AP-REP (mutual authentication)", id)
		}
		part, err := ParseAPRep(msg, e.sessionKey)
		if err != nil {
			return nil, false, err
		}
		if !part.CTime.Equal(e.ctime) || part.Cusec != e.cusec {
			return nil, false, errors.New("the AP-REP does not answer our authenticator: the peer is not the service")
		}
		if part.Subkey.KeyType != 0 {
			e.key, e.acceptorSubkey = part.Subkey, true
		}
		return []byte{}, false, nil
	case 2: // the server's wrapped offer
		t, err := ParseWrapToken(answer)
		if err != nil {
			return nil, false, err
		}
		if t.Flags&wrapSentByAcceptor == 0 {
			return nil, false, errors.New("the offer is not from the acceptor")
		}
		if err := t.Verify(e.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
			return nil, false, err
		}
		if len(t.Payload) != 4 || t.Payload[0]&securityLayerNone == 0 {
			return nil, false, errors.New("the server offers no \"none\" security layer")
		}
		reply := WrapToken{SeqNum: e.seq, Payload: []byte{securityLayerNone, 0, 0, 0}}
		if e.acceptorSubkey {
			reply.Flags |= wrapAcceptorSubkey
		}
		b, err := reply.Marshal(e.key, keyusage.GSSAPI_INITIATOR_SEAL)
		return b, true, err
	}
	return nil, false, errors.New("GSSAPI: an answer after the exchange")
}
