package metadata

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"strand/core/acl"
)

// genScramRecord draws any UserScramCredentialRecord, valid or not, for
// the codec's round trip.
func genScramRecord(t *rapid.T) Record {
	return &UserScramCredentialRecord{
		Name: genString(t, "name"), Mechanism: ScramMechanism(rapid.Int8().Draw(t, "mech")),
		Salt:       rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "salt"),
		StoredKey:  rapid.SliceOfN(rapid.Byte(), 0, 70).Draw(t, "stored"),
		ServerKey:  rapid.SliceOfN(rapid.Byte(), 0, 70).Draw(t, "server"),
		Iterations: rapid.Int32().Draw(t, "iterations"),
	}
}

// genSmallScramRecord draws SCRAM records over two users and both
// mechanisms, mostly valid, so that images reach many credential sets.
func genSmallScramRecord(t *rapid.T) Record {
	u := ScramUser{Name: rapid.SampledFrom([]string{"alice", "bob"}).Draw(t, "user"),
		Mechanism: rapid.SampledFrom(ScramMechanisms).Draw(t, "mech")}
	if rapid.Bool().Draw(t, "remove") {
		return &RemoveUserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism}
	}
	salt := rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "salt")
	c := NewScramCredential(u.Mechanism, salt, salt, rapid.Int32Range(ScramIterationsMin, ScramIterationsMax).Draw(t, "iterations"))
	return NewUserScramCredentialRecord(u, c)
}

func validScramRecord(name string, m ScramMechanism, password string) *UserScramCredentialRecord {
	return NewUserScramCredentialRecord(ScramUser{Name: name, Mechanism: m},
		NewScramCredential(m, []byte("salt"), []byte(password), ScramIterationsMin))
}

// TestNewScramCredentialIsRFC7677s: the credential derived from RFC 7677's
// example (user "user", password "pencil") verifies the example's client
// proof and yields its server signature.
func TestNewScramCredentialIsRFC7677s(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := pbkdf2.Key(sha256.New, "pencil", salt, 4096, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	c := NewScramCredential(ScramSHA256, salt, salted, 4096)
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	mac := func(key []byte) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(authMessage))
		return h.Sum(nil)
	}
	clientKey := mac(c.StoredKey)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	if got := sha256.Sum256(clientKey); !bytes.Equal(got[:], c.StoredKey) {
		t.Fatalf("the example's proof does not verify against StoredKey %x", c.StoredKey)
	}
	if got := base64.StdEncoding.EncodeToString(mac(c.ServerKey)); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server signature %s", got)
	}
}

func TestScramCredentialsApply(t *testing.T) {
	a := applier{t: t, im: NewImage()}
	empty := a.im.ScramCredentials()
	a.ok(validScramRecord("alice", ScramSHA256, "a"), validScramRecord("alice", ScramSHA512, "a"))
	held := a.im.ScramCredentials()
	if got := held.Users(); !cmp.Equal(got, []ScramUser{{"alice", ScramSHA256}, {"alice", ScramSHA512}}) {
		t.Fatalf("users %v", got)
	}
	if c, ok := held.LookupScram("SCRAM-SHA-512", "alice"); !ok || len(c.StoredKey) != 64 {
		t.Fatalf("lookup SCRAM-SHA-512 alice: %v %v", c, ok)
	}
	if _, ok := held.LookupScram("PLAIN", "alice"); ok {
		t.Fatal("a PLAIN lookup found a SCRAM credential")
	}
	if empty.Len() != 0 {
		t.Fatal("the credentials handed out before the records changed")
	}

	// A change replaces the set: the one handed out stays as it was.
	a.ok(validScramRecord("alice", ScramSHA256, "b"))
	if c, _ := held.Credential(ScramUser{"alice", ScramSHA256}); bytes.Equal(c.StoredKey, validScramRecord("alice", ScramSHA256, "b").StoredKey) {
		t.Fatal("a credential set handed out earlier changed")
	}
	a.ok(&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512})
	if _, ok := a.im.ScramCredentials().LookupScram("SCRAM-SHA-512", "alice"); ok {
		t.Fatal("a removed credential is still found")
	}
	if _, ok := held.LookupScram("SCRAM-SHA-512", "alice"); !ok {
		t.Fatal("the removal changed a set handed out earlier")
	}

	bad := func(mutate func(*UserScramCredentialRecord)) *UserScramCredentialRecord {
		r := validScramRecord("bob", ScramSHA256, "p")
		mutate(r)
		return r
	}
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.Name = "" }), "field Name")
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.Mechanism = 3 }), "field Mechanism 3")
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.Salt = nil }), "field Salt")
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.StoredKey = r.StoredKey[:5] }), "StoredKey")
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.Iterations = ScramIterationsMin - 1 }), "field Iterations 4095")
	a.rejected(bad(func(r *UserScramCredentialRecord) { r.Iterations = ScramIterationsMax + 1 }), "field Iterations 16385")
	a.rejected(&RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA256}, "has no SCRAM-SHA-256 credential")
	a.rejected(&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512}, "has no SCRAM-SHA-512 credential")
}

func TestSnapshotKeepsScramCredentials(t *testing.T) {
	a := applier{t: t, im: NewImage()}
	a.ok(validScramRecord("bob", ScramSHA512, "x"), validScramRecord("alice", ScramSHA256, "y"))
	got, err := DecodeSnapshot(a.im.EncodeSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !got.ScramCredentials().Equal(a.im.ScramCredentials()) {
		t.Fatalf("snapshot credentials %v, want %v", got.ScramCredentials().Users(), a.im.ScramCredentials().Users())
	}
	if diff := cmp.Diff(a.im, got, allFields, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decoded image differs:\n%s", diff)
	}
}

func TestScramRecordSaltIsBounded(t *testing.T) {
	r := validScramRecord("a", ScramSHA256, "p")
	r.Salt = make([]byte, ScramSaltBytesMax+1)
	if _, err := DecodeRecord(EncodeRecord(r)); err == nil {
		t.Fatalf("a %d-byte salt decoded", len(r.Salt))
	}
}

func TestBootstrapHoldsValidCredentialsOnly(t *testing.T) {
	want := []Record{validScramRecord("broker", ScramSHA256, "p"), validScramRecord("alice", ScramSHA512, "q")}
	got, err := DecodeBootstrap(EncodeBootstrap(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("bootstrap records (-want +got):\n%s", diff)
	}
	if _, err := DecodeBootstrap(EncodeBootstrap([]Record{&TopicRecord{Name: "a", ID: TopicID{1}}})); err == nil {
		t.Fatal("a bootstrap file holding a TopicRecord was accepted")
	}
	short := validScramRecord("x", ScramSHA256, "p")
	short.Iterations = 100
	if _, err := DecodeBootstrap(EncodeBootstrap([]Record{short})); err == nil || !bytes.Contains([]byte(err.Error()), []byte("Iterations 100")) {
		t.Fatalf("a credential of 100 iterations: %v", err)
	}
	data := EncodeBootstrap(want)
	if _, err := DecodeBootstrap(data[:len(data)-1]); err == nil {
		t.Fatal("a cut bootstrap file was accepted")
	}
}

func TestEmptyImage(t *testing.T) {
	a := applier{t: t, im: NewImage()}
	a.ok(&NoOpRecord{}, &NoOpRecord{})
	if !a.im.Empty() {
		t.Fatal("an image of leader changes only is not empty")
	}
	a.ok(validScramRecord("a", ScramSHA256, "p"))
	if a.im.Empty() {
		t.Fatal("an image holding a credential is empty")
	}
	b := applier{t: t, im: NewImage()}
	b.ok(&RegisterBrokerRecord{BrokerID: 1})
	if b.im.Empty() {
		t.Fatal("an image holding a broker is empty")
	}
	c := applier{t: t, im: NewImage()}
	c.ok(NewAccessControlEntryRecord(acl.ID{1}, acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: "orders", PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow},
	}))
	if c.im.Empty() {
		t.Fatal("an image holding an ACL is empty")
	}
}
