package auth

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	krbcrypto "github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The Kerberos V5 GSS-API mechanism's token framing (RFC 1964 §1.1, RFC
// 2743 §3.1, RFC 4121): context tokens are an InitialContextToken, 0x60,
// a DER length, the mechanism's OID, a two-byte token id and the Kerberos
// message; per-message tokens after the context is established (Wrap,
// RFC 4121 §4.2.6.2) have a 16-byte header of their own.

// krb5OIDDER is the DER encoding of the Kerberos V5 mechanism's OID,
// 1.2.840.113554.1.2.2.
var krb5OIDDER = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}

// Context token ids.
const (
	tokenAPReq    uint16 = 0x0100
	tokenAPRep    uint16 = 0x0200
	tokenKRBError uint16 = 0x0300
)

// ParseContextToken reads an InitialContextToken for the Kerberos V5
// mechanism: its token id and the Kerberos message after it. The DER
// length must account for exactly the token's bytes.
func ParseContextToken(b []byte) (tokenID uint16, message []byte, err error) {
	if len(b) < 2 || b[0] != 0x60 {
		return 0, nil, errors.New("GSS-API token: not an InitialContextToken (no 0x60 tag)")
	}
	length, n, err := derLength(b[1:])
	if err != nil {
		return 0, nil, fmt.Errorf("GSS-API token: %w", err)
	}
	body := b[1+n:]
	if length != len(body) {
		return 0, nil, fmt.Errorf("GSS-API token: length %d, %d bytes follow", length, len(body))
	}
	if !bytes.HasPrefix(body, krb5OIDDER) {
		return 0, nil, errors.New("GSS-API token: not the Kerberos V5 mechanism (OID 1.2.840.113554.1.2.2)")
	}
	body = body[len(krb5OIDDER):]
	if len(body) < 2 {
		return 0, nil, errors.New("GSS-API token: no token id")
	}
	return binary.BigEndian.Uint16(body), body[2:], nil
}

// AppendContextToken frames a Kerberos message as an InitialContextToken.
func AppendContextToken(dst []byte, tokenID uint16, message []byte) []byte {
	inner := len(krb5OIDDER) + 2 + len(message)
	dst = append(dst, 0x60)
	dst = append(dst, asn1tools.MarshalLengthBytes(inner)...)
	dst = append(dst, krb5OIDDER...)
	dst = binary.BigEndian.AppendUint16(dst, tokenID)
	return append(dst, message...)
}

// derLength reads a DER length (short form, or long form of at most 4
// bytes) and returns it and the bytes it took.
func derLength(b []byte) (int, int, error) {
	if len(b) == 0 {
		return 0, 0, errors.New("no length")
	}
	if b[0] < 0x80 {
		return int(b[0]), 1, nil
	}
	n := int(b[0] & 0x7f)
	if n == 0 || n > 4 || len(b) < 1+n {
		return 0, 0, errors.New("bad length")
	}
	length := 0
	for _, c := range b[1 : 1+n] {
		length = length<<8 | int(c)
	}
	if length < 0x80 || length > 1<<30 {
		return 0, 0, errors.New("length not in DER form")
	}
	return length, 1 + n, nil
}

// Wrap token flags (RFC 4121 §4.2.2).
const (
	wrapSentByAcceptor = 0x01
	wrapSealed         = 0x02
	wrapAcceptorSubkey = 0x04
)

// wrapHeaderBytes is a Wrap token's header.
const wrapHeaderBytes = 16

// WrapToken is an RFC 4121 Wrap token with integrity only (no
// confidentiality): what RFC 4752's security-layer negotiation exchanges.
type WrapToken struct {
	Flags   byte
	SeqNum  uint64
	Payload []byte
	// checksum is the trailing checksum, EC bytes.
	checksum []byte
}

// ParseWrapToken reads a Wrap token, undoing its right rotation (RRC).
// A sealed (encrypted) token is refused: Strand offers no security layer,
// so a client has nothing to encrypt.
func ParseWrapToken(b []byte) (WrapToken, error) {
	if len(b) < wrapHeaderBytes {
		return WrapToken{}, errors.New("wrap token: shorter than its header")
	}
	if b[0] != 0x05 || b[1] != 0x04 {
		return WrapToken{}, fmt.Errorf("wrap token: token id %02x%02x, want 0504", b[0], b[1])
	}
	if b[3] != 0xff {
		return WrapToken{}, errors.New("wrap token: bad filler")
	}
	t := WrapToken{Flags: b[2], SeqNum: binary.BigEndian.Uint64(b[8:16])}
	if t.Flags&wrapSealed != 0 {
		return WrapToken{}, errors.New("wrap token: sealed (confidentiality), which the negotiation never needs")
	}
	ec := int(binary.BigEndian.Uint16(b[4:6]))
	rrc := int(binary.BigEndian.Uint16(b[6:8]))
	data := b[wrapHeaderBytes:]
	if ec > len(data) {
		return WrapToken{}, fmt.Errorf("wrap token: checksum of %d bytes in %d", ec, len(data))
	}
	if len(data) > 0 {
		rrc %= len(data)
		// Rotated right by rrc: the last rrc bytes are at the front.
		data = append(append([]byte{}, data[rrc:]...), data[:rrc]...)
	}
	t.Payload, t.checksum = data[:len(data)-ec], data[len(data)-ec:]
	return t, nil
}

// checksumInput is what a Wrap token's checksum covers: the payload, then
// the header with EC and RRC zero.
func (t WrapToken) checksumInput() []byte {
	out := make([]byte, 0, len(t.Payload)+wrapHeaderBytes)
	out = append(out, t.Payload...)
	out = append(out, 0x05, 0x04, t.Flags, 0xff, 0, 0, 0, 0)
	return binary.BigEndian.AppendUint64(out, t.SeqNum)
}

// Verify checks the token's checksum with key and the sender's key usage
// (KG-USAGE-INITIATOR-SEAL 24 or KG-USAGE-ACCEPTOR-SEAL 22).
func (t WrapToken) Verify(key types.EncryptionKey, usage uint32) error {
	et, err := krbcrypto.GetEtype(key.KeyType)
	if err != nil {
		return err
	}
	want, err := et.GetChecksumHash(key.KeyValue, t.checksumInput(), usage)
	if err != nil {
		return err
	}
	if !hmac.Equal(want, t.checksum) {
		return errors.New("wrap token: bad checksum")
	}
	return nil
}

// Marshal signs the token with key for usage and encodes it (RRC 0).
func (t WrapToken) Marshal(key types.EncryptionKey, usage uint32) ([]byte, error) {
	et, err := krbcrypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, err
	}
	sum, err := et.GetChecksumHash(key.KeyValue, t.checksumInput(), usage)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, wrapHeaderBytes+len(t.Payload)+len(sum))
	out = append(out, 0x05, 0x04, t.Flags, 0xff)
	out = binary.BigEndian.AppendUint16(out, uint16(len(sum)))
	out = binary.BigEndian.AppendUint16(out, 0)
	out = binary.BigEndian.AppendUint64(out, t.SeqNum)
	out = append(out, t.Payload...)
	return append(out, sum...), nil
}

// encAPRepPart is RFC 4120's EncAPRepPart, for marshalling: gokrb5 reads
// AP-REP but cannot write one, and an acceptor asked for mutual
// authentication must (RFC 4121 §4.1; librdkafka's Cyrus SASL asks).
type encAPRepPart struct {
	CTime          time.Time           `asn1:"generalized,explicit,tag:0"`
	Cusec          int                 `asn1:"explicit,tag:1"`
	Subkey         types.EncryptionKey `asn1:"optional,explicit,tag:2"`
	SequenceNumber int64               `asn1:"optional,explicit,tag:3"`
}

// apRep is RFC 4120's KRB_AP_REP, for marshalling.
type apRep struct {
	PVNO    int                 `asn1:"explicit,tag:0"`
	MsgType int                 `asn1:"explicit,tag:1"`
	EncPart types.EncryptedData `asn1:"explicit,tag:2"`
}

// MarshalAPRep builds the KRB_AP_REP answering an authenticator of ctime
// and cusec: EncAPRepPart {ctime, cusec, seq-number} encrypted in the
// ticket's session key with key usage 12 (RFC 4120 §5.5.2). No subkey:
// both sides then protect per-message tokens with the initiator's subkey
// (or the session key).
func MarshalAPRep(sessionKey types.EncryptionKey, ctime time.Time, cusec int, seq int64) ([]byte, error) {
	part, err := asn1.Marshal(encAPRepPart{CTime: ctime.UTC().Truncate(time.Second), Cusec: cusec, SequenceNumber: seq})
	if err != nil {
		return nil, err
	}
	part = asn1tools.AddASNAppTag(part, asnAppTag.EncAPRepPart)
	enc, err := krbcrypto.GetEncryptedData(part, sessionKey, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		return nil, err
	}
	b, err := asn1.Marshal(apRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: enc})
	if err != nil {
		return nil, err
	}
	return asn1tools.AddASNAppTag(b, asnAppTag.APREP), nil
}

// ParseAPRep decrypts a KRB_AP_REP with the session key.
func ParseAPRep(b []byte, sessionKey types.EncryptionKey) (messages.EncAPRepPart, error) {
	var rep messages.APRep
	if err := rep.Unmarshal(b); err != nil {
		return messages.EncAPRepPart{}, err
	}
	plain, err := krbcrypto.DecryptEncPart(rep.EncPart, sessionKey, keyusage.AP_REP_ENCPART)
	if err != nil {
		return messages.EncAPRepPart{}, fmt.Errorf("AP-REP: %w", err)
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(plain); err != nil {
		return messages.EncAPRepPart{}, err
	}
	return part, nil
}
