package metadata

// SCRAM credentials in the metadata log (Kafka's KIP-554 and KIP-900):
// UserScramCredentialRecord sets one user's credential for one mechanism,
// RemoveUserScramCredentialRecord removes it. A credential is what RFC 5802
// lets a server keep instead of the password: the salt, the iteration
// count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"). Every node applies the records into
// its image like any other, and its SASL layer authenticates against the
// credentials of the image it has applied (SPEC.md §10.6).

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"strand/core/env"
)

// Record types of the SCRAM records, Kafka's apiKeys.
const (
	TypeUserScramCredential       RecordType = 11
	TypeRemoveUserScramCredential RecordType = 22
)

// ScramMechanism is Kafka's ScramMechanism type id.
type ScramMechanism int8

// The SCRAM mechanisms, with Kafka's ids (0 is Kafka's UNKNOWN).
const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// ScramMechanisms are the mechanisms Strand implements, by id.
var ScramMechanisms = []ScramMechanism{ScramSHA256, ScramSHA512}

// Limits on a credential's iteration count.
const (
	// ScramIterationsMin is Kafka's ScramMechanism.minIterations, the same
	// 4096 for both mechanisms: fewer is UNACCEPTABLE_CREDENTIAL when
	// altered, and a credential below it cannot authenticate.
	ScramIterationsMin = 4096
	// ScramIterationsMax is Kafka's ScramControlManager.MAX_ITERATIONS:
	// more is UNACCEPTABLE_CREDENTIAL (each authentication costs the
	// client that many HMACs).
	ScramIterationsMax = 16384
)

// String is the mechanism's SASL name.
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("ScramMechanism(%d)", int8(m))
}

// ScramMechanismNamed returns the mechanism with SASL name name.
func ScramMechanismNamed(name string) (ScramMechanism, bool) {
	for _, m := range ScramMechanisms {
		if m.String() == name {
			return m, true
		}
	}
	return 0, false
}

// Known reports whether m is a mechanism Strand implements.
func (m ScramMechanism) Known() bool { return m == ScramSHA256 || m == ScramSHA512 }

// Hash is the mechanism's hash function.
func (m ScramMechanism) Hash() func() hash.Hash {
	switch m {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	panic(fmt.Sprintf("metadata: %v has no hash", m))
}

// KeyBytes is the length of the mechanism's keys and proofs: its hash's
// output.
func (m ScramMechanism) KeyBytes() int {
	switch m {
	case ScramSHA256:
		return sha256.Size
	case ScramSHA512:
		return sha512.Size
	}
	return 0
}

// ScramCredential is one user's credential for one mechanism. Its slices
// are never modified once in an image.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewScramCredential derives the credential a server keeps from a salted
// password (RFC 5802: Hi(password, salt, iterations), which the client
// computes), as Kafka's controller does with what
// AlterUserScramCredentials carries.
func NewScramCredential(m ScramMechanism, salt, saltedPassword []byte, iterations int32) ScramCredential {
	mac := func(key []byte, text string) []byte {
		h := hmac.New(m.Hash(), key)
		h.Write([]byte(text))
		return h.Sum(nil)
	}
	clientKey := mac(saltedPassword, "Client Key")
	stored := m.Hash()()
	stored.Write(clientKey)
	return ScramCredential{
		Salt: bytes.Clone(salt), StoredKey: stored.Sum(nil), ServerKey: mac(saltedPassword, "Server Key"), Iterations: iterations,
	}
}

// ScramUser names one credential: a user and a mechanism.
type ScramUser struct {
	Name      string
	Mechanism ScramMechanism
}

// ScramCredentials is every SCRAM credential of an image. It is immutable:
// a SCRAM record gives the image a new one, so a value handed out (to the
// environment's connection goroutines, env.Network.SetScramCredentials) is
// never changed. The zero value is empty.
type ScramCredentials struct {
	byUser map[ScramUser]ScramCredential
}

// LookupScram returns user's credential for the mechanism named
// mechanism (SCRAM-SHA-256 or SCRAM-SHA-512); it implements
// env.ScramCredentials.
func (s *ScramCredentials) LookupScram(mechanism, user string) (env.ScramCredential, bool) {
	m, known := ScramMechanismNamed(mechanism)
	if !known {
		return env.ScramCredential{}, false
	}
	c, ok := s.Credential(ScramUser{Name: user, Mechanism: m})
	return env.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
}

// Credential returns one credential.
func (s *ScramCredentials) Credential(u ScramUser) (ScramCredential, bool) {
	if s == nil {
		return ScramCredential{}, false
	}
	c, ok := s.byUser[u]
	return c, ok
}

// Users lists every credential's user and mechanism, sorted by name, then
// mechanism.
func (s *ScramCredentials) Users() []ScramUser {
	if s == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(s.byUser), func(a, b ScramUser) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Mechanism, b.Mechanism))
	})
}

// Len is the number of credentials.
func (s *ScramCredentials) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byUser)
}

// Equal reports whether s and o hold the same credentials.
func (s *ScramCredentials) Equal(o *ScramCredentials) bool {
	if s.Len() != o.Len() {
		return false
	}
	for _, u := range s.Users() {
		a, _ := s.Credential(u)
		b, ok := o.Credential(u)
		if !ok || a.Iterations != b.Iterations || !bytes.Equal(a.Salt, b.Salt) ||
			!bytes.Equal(a.StoredKey, b.StoredKey) || !bytes.Equal(a.ServerKey, b.ServerKey) {
			return false
		}
	}
	return true
}

// with returns a copy of s with u's credential set (c non-nil) or removed.
func (s *ScramCredentials) with(u ScramUser, c *ScramCredential) *ScramCredentials {
	out := &ScramCredentials{byUser: map[ScramUser]ScramCredential{}}
	if s != nil {
		maps.Copy(out.byUser, s.byUser) // order-independent: copying a map
	}
	if c == nil {
		delete(out.byUser, u)
	} else {
		out.byUser[u] = *c
	}
	return out
}

// UserScramCredentialRecord sets Name's credential for Mechanism, Kafka's
// record of the same name (version 0).
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  ScramMechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord removes Name's credential for Mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism ScramMechanism
}

// NewUserScramCredentialRecord is the record that sets u's credential c.
func NewUserScramCredentialRecord(u ScramUser, c ScramCredential) *UserScramCredentialRecord {
	return &UserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism, Salt: c.Salt,
		StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
}

// Type is TypeUserScramCredential.
func (*UserScramCredentialRecord) Type() RecordType { return TypeUserScramCredential }

// Type is TypeRemoveUserScramCredential.
func (*RemoveUserScramCredentialRecord) Type() RecordType { return TypeRemoveUserScramCredential }

// Limits on a credential record's fields.
const (
	// ScramSaltBytesMax bounds a salt: Kafka's clients draw 32 bytes or
	// fewer, and a corrupt record cannot make the decoder allocate more.
	ScramSaltBytesMax = 1024
	// ScramUserNameBytesMax bounds a user name: the longest string a
	// record's int16 length encodes.
	ScramUserNameBytesMax = 32767
)

func (rec *UserScramCredentialRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendString(dst, rec.Name)
	dst = kbin.AppendInt8(dst, int8(rec.Mechanism))
	dst = kbin.AppendBytes(dst, rec.Salt)
	dst = kbin.AppendBytes(dst, rec.StoredKey)
	dst = kbin.AppendBytes(dst, rec.ServerKey)
	return kbin.AppendInt32(dst, rec.Iterations)
}

func (rec *UserScramCredentialRecord) readFields(r *fieldReader) {
	rec.Name = r.String()
	rec.Mechanism = ScramMechanism(r.Int8())
	rec.Salt = r.boundedBytes("Salt", ScramSaltBytesMax)
	rec.StoredKey = r.boundedBytes("StoredKey", ScramSaltBytesMax)
	rec.ServerKey = r.boundedBytes("ServerKey", ScramSaltBytesMax)
	rec.Iterations = r.Int32()
}

func (rec *RemoveUserScramCredentialRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendString(dst, rec.Name)
	return kbin.AppendInt8(dst, int8(rec.Mechanism))
}

func (rec *RemoveUserScramCredentialRecord) readFields(r *fieldReader) {
	rec.Name = r.String()
	rec.Mechanism = ScramMechanism(r.Int8())
}

// boundedBytes reads non-null bytes of at most limit, copied (a record
// never aliases the buffer it was decoded from).
func (r *fieldReader) boundedBytes(field string, limit int) []byte {
	n := r.Int32()
	switch {
	case !r.Ok():
		return nil
	case n < 0 || int(n) > limit || int(n) > len(r.Src):
		r.fail("%s: bad length %d", field, n)
		return nil
	}
	out := bytes.Clone(r.Src[:n])
	r.Src = r.Src[n:]
	if out == nil {
		out = []byte{}
	}
	return out
}

// ValidateScramUser checks a credential's user and mechanism.
func ValidateScramUser(u ScramUser) error {
	switch {
	case u.Name == "":
		return fmt.Errorf("field Name: empty user name")
	case len(u.Name) > ScramUserNameBytesMax:
		return fmt.Errorf("field Name: %d bytes, at most %d", len(u.Name), ScramUserNameBytesMax)
	case !u.Mechanism.Known():
		return fmt.Errorf("field Mechanism %d: not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)", int8(u.Mechanism))
	}
	return nil
}

func (im *Image) applyUserScramCredential(r *UserScramCredentialRecord) error {
	u := ScramUser{Name: r.Name, Mechanism: r.Mechanism}
	if err := ValidateScramUser(u); err != nil {
		return err
	}
	keyBytes := r.Mechanism.KeyBytes()
	switch {
	case len(r.Salt) == 0 || len(r.Salt) > ScramSaltBytesMax:
		return fmt.Errorf("field Salt of %v for user %q: %d bytes, want 1 to %d", r.Mechanism, r.Name, len(r.Salt), ScramSaltBytesMax)
	case len(r.StoredKey) != keyBytes || len(r.ServerKey) != keyBytes:
		return fmt.Errorf("fields StoredKey and ServerKey of %v for user %q: %d and %d bytes, want %d", r.Mechanism, r.Name,
			len(r.StoredKey), len(r.ServerKey), keyBytes)
	case r.Iterations < ScramIterationsMin || r.Iterations > ScramIterationsMax:
		return fmt.Errorf("field Iterations %d of %v for user %q: outside [%d, %d]", r.Iterations, r.Mechanism, r.Name,
			ScramIterationsMin, ScramIterationsMax)
	}
	c := ScramCredential{Salt: bytes.Clone(r.Salt), StoredKey: bytes.Clone(r.StoredKey), ServerKey: bytes.Clone(r.ServerKey),
		Iterations: r.Iterations}
	im.scram = im.scram.with(u, &c)
	return nil
}

func (im *Image) applyRemoveUserScramCredential(r *RemoveUserScramCredentialRecord) error {
	u := ScramUser{Name: r.Name, Mechanism: r.Mechanism}
	if err := ValidateScramUser(u); err != nil {
		return err
	}
	if _, ok := im.scram.Credential(u); !ok {
		return fmt.Errorf("user %q has no %v credential", r.Name, r.Mechanism)
	}
	im.scram = im.scram.with(u, nil)
	return nil
}

// ScramCredentials returns the image's SCRAM credentials, an immutable
// value that later records never change.
func (im *Image) ScramCredentials() *ScramCredentials {
	if im.scram == nil {
		return noScramCredentials
	}
	return im.scram
}

// noScramCredentials is every credential-less image's, so that two of them
// compare equal as pointers.
var noScramCredentials = &ScramCredentials{}

// scramSnapshotRecords are the records that rebuild the image's
// credentials, by user then mechanism.
func (im *Image) scramSnapshotRecords() []Record {
	var out []Record
	for _, u := range im.scram.Users() {
		c, _ := im.scram.Credential(u)
		out = append(out, NewUserScramCredentialRecord(u, c))
	}
	return out
}
