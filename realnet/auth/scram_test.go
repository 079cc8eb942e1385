package auth

import (
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xdg-go/scram"

	"strand/core/env"
	"strand/core/metadata"
)

// scramUsers is a ScramLookup over credentials made from passwords, as
// `strand format --add-scram` and AlterUserScramCredentials make them.
func scramUsers(t testing.TB, iterations int32, passwords map[string]string) ScramLookup {
	creds := map[string]env.ScramCredential{}
	for _, m := range metadata.ScramMechanisms {
		for user, password := range passwords {
			salt := []byte("salt-of-" + user)
			salted, err := pbkdf2.Key(m.Hash(), password, salt, int(iterations), m.KeyBytes())
			if err != nil {
				t.Fatal(err)
			}
			c := metadata.NewScramCredential(m, salt, salted, iterations)
			creds[m.String()+"/"+user] = env.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
		}
	}
	return func(mechanism, user string) (env.ScramCredential, bool) {
		c, ok := creds[mechanism+"/"+user]
		return c, ok
	}
}

func newScram(t testing.TB, name string, lookup ScramLookup) Mechanism {
	m, err := NewScram(name, lookup)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// clientRun runs a whole exchange of xdg-go's client against ex and
// returns the first failure.
func clientRun(t testing.TB, hash scram.HashGeneratorFcn, ex Exchange, user, password string) error {
	client, err := hash.NewClientUnprepped(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, _ := conv.Step("")
	serverFirst, done, err := ex.Next([]byte(first))
	if err != nil || done {
		return errors.Join(err, errors.New("first step"))
	}
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		t.Fatalf("client refused the server-first-message %q: %v", serverFirst, err)
	}
	serverFinal, done, err := ex.Next([]byte(final))
	if err != nil {
		return err
	}
	if !done {
		t.Fatal("exchange not done after the client-final-message")
	}
	if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
		t.Fatalf("client could not verify the server's signature %q: %v", serverFinal, err)
	}
	return nil
}

const scramGenericFailure = "Authentication failed during authentication due to invalid credentials with SASL mechanism "

func TestScramExchange(t *testing.T) {
	lookup := scramUsers(t, 4096, map[string]string{"alice": "alice-secret", "a,b=c": "odd"})
	for _, name := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(name, func(t *testing.T) {
			m := newScram(t, name, lookup)
			hash := scramHash(map[string]metadata.ScramMechanism{"SCRAM-SHA-256": metadata.ScramSHA256, "SCRAM-SHA-512": metadata.ScramSHA512}[name])
			ex := m.Start(nil)
			if err := clientRun(t, hash, ex, "alice", "alice-secret"); err != nil {
				t.Fatalf("alice: %v", err)
			}
			if got := ex.Result().Principal; got != "User:alice" {
				t.Fatalf("principal %q", got)
			}
			// A name with ',' and '=' travels escaped (=2C, =3D).
			ex = m.Start(nil)
			if err := clientRun(t, hash, ex, "a,b=c", "odd"); err != nil || ex.Result().Principal != "User:a,b=c" {
				t.Fatalf("escaped name: %v, principal %q", err, ex.Result().Principal)
			}
			// The wrong password and an unknown user fail alike: at the
			// proof, with the same message.
			for _, c := range []struct{ user, password string }{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
				err := clientRun(t, hash, m.Start(nil), c.user, c.password)
				var f *Failure
				if !errors.As(err, &f) || f.Message != scramGenericFailure+name {
					t.Errorf("%s/%s: %v, want the generic failure at the proof", c.user, c.password, err)
				}
			}
		})
	}
}

// firstAndFinal runs a successful exchange for alice and returns its two
// client messages, to replay or alter.
func firstAndFinal(t *testing.T, m Mechanism) (first, final string) {
	client, _ := scram.SHA256.NewClientUnprepped("alice", "alice-secret", "")
	conv := client.NewConversation()
	first, _ = conv.Step("")
	serverFirst, _, err := m.Start(nil).Next([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	final, err = conv.Step(string(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	return first, final
}

// TestScramRefusals: each refusal the mechanism makes, each failing
// without its rule.
func TestScramRefusals(t *testing.T) {
	lookup := scramUsers(t, 4096, map[string]string{"alice": "alice-secret"})
	m := newScram(t, "SCRAM-SHA-256", lookup)
	generic := scramGenericFailure + "SCRAM-SHA-256"
	refused := func(t *testing.T, ex Exchange, token, message string) {
		t.Helper()
		_, done, err := ex.Next([]byte(token))
		var f *Failure
		if !errors.As(err, &f) || f.Message != message || done {
			t.Fatalf("%q: got %v (done %v), want failure %q", token, err, done, message)
		}
		if _, _, err := ex.Next([]byte(token)); err == nil {
			t.Fatal("a failed exchange took another token")
		}
	}

	t.Run("replayed client-final", func(t *testing.T) {
		first, final := firstAndFinal(t, m)
		ex := m.Start(nil)
		if _, _, err := ex.Next([]byte(first)); err != nil {
			t.Fatal(err)
		}
		// The server's nonce differs in every exchange.
		refused(t, ex, final, generic)
	})
	t.Run("wrong nonce", func(t *testing.T) {
		client, _ := scram.SHA256.NewClientUnprepped("alice", "alice-secret", "")
		conv := client.NewConversation()
		first, _ := conv.Step("")
		ex := m.Start(nil)
		serverFirst, _, _ := ex.Next([]byte(first))
		final, _ := conv.Step(string(serverFirst))
		nonceStart := strings.Index(final, ",r=") + 3
		tampered := final[:nonceStart] + "X" + final[nonceStart+1:]
		refused(t, ex, tampered, generic)
	})
	t.Run("proof longer than the hash", func(t *testing.T) {
		first, final := firstAndFinal(t, m)
		ex := m.Start(nil)
		serverFirst, _, _ := ex.Next([]byte(first))
		nonce := strings.Split(strings.TrimPrefix(string(serverFirst), "r="), ",")[0]
		long := "c=biws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 100))
		_ = final
		refused(t, ex, long, generic) // xdg-go alone indexes past the signature
	})
	t.Run("delegation token", func(t *testing.T) {
		refused(t, m.Start(nil), "n,,n=alice,r=abcdef,tokenauth=true", generic)
	})
	t.Run("other authorization id", func(t *testing.T) {
		refused(t, m.Start(nil), "n,a=bob,n=alice,r=abcdef", "Authentication failed: Client requested an authorization id that is different from username")
	})
	t.Run("channel binding", func(t *testing.T) {
		refused(t, m.Start(nil), "p=tls-unique,,n=alice,r=abcdef", generic)
	})
	t.Run("iterations below the minimum", func(t *testing.T) {
		weak := newScram(t, "SCRAM-SHA-256", scramUsers(t, 1000, map[string]string{"alice": "alice-secret"}))
		refused(t, weak.Start(nil), "n,,n=alice,r=abcdef", generic)
	})
	t.Run("a SCRAM-SHA-512 user is not a SCRAM-SHA-256 one", func(t *testing.T) {
		only512 := func(mechanism, user string) (env.ScramCredential, bool) {
			if mechanism != "SCRAM-SHA-512" {
				return env.ScramCredential{}, false
			}
			return lookup("SCRAM-SHA-512", user)
		}
		err := clientRun(t, scram.SHA256, newScram(t, "SCRAM-SHA-256", only512).Start(nil), "alice", "alice-secret")
		var f *Failure
		if !errors.As(err, &f) || f.Message != generic {
			t.Fatalf("got %v", err)
		}
	})
}

// TestScramUnknownUserLooksKnown: an unknown user gets a server-first
// message like a known user's, with a salt stable for the node's life, so
// that a prober cannot tell from the first answer whether a user exists.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	m := newScram(t, "SCRAM-SHA-256", scramUsers(t, 4096, map[string]string{"alice": "alice-secret"}))
	answer := func(user string) ScramServerFirstFields {
		a, _, err := m.Start(nil).Next([]byte("n,,n=" + user + ",r=abcdef"))
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		return parseServerFirstForTest(t, string(a))
	}
	known, unknown, again := answer("alice"), answer("mallory"), answer("mallory")
	if unknown.iterations != known.iterations || len(unknown.salt) != scramMockSaltBytes {
		t.Fatalf("unknown user's answer %+v, a known user's %+v", unknown, known)
	}
	if unknown.salt != again.salt {
		t.Fatal("an unknown user's salt changed between two exchanges")
	}
	if other := answer("eve"); other.salt == unknown.salt {
		t.Fatal("two unknown users got the same salt")
	}
}

type ScramServerFirstFields struct {
	salt       string
	iterations string
}

func parseServerFirstForTest(t *testing.T, msg string) ScramServerFirstFields {
	var out ScramServerFirstFields
	for _, f := range strings.Split(msg, ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			salt, err := base64.StdEncoding.DecodeString(f[2:])
			if err != nil {
				t.Fatal(err)
			}
			out.salt = string(salt)
		case strings.HasPrefix(f, "i="):
			out.iterations = f[2:]
		}
	}
	return out
}

func TestParseScramClientFirst(t *testing.T) {
	got, err := ParseScramClientFirst([]byte("n,a=x=2Cy,n=x=2Cy,r=nonce,tokenauth=false,foo=bar"))
	if err != nil {
		t.Fatal(err)
	}
	if got.AuthzID != "x,y" || got.User != "x,y" || got.Nonce != "nonce" || got.Extensions["foo"] != "bar" || got.Extensions["tokenauth"] != "false" {
		t.Fatalf("parsed %+v", got)
	}
	for _, bad := range []string{
		"", ",,n=a,r=b", "y,,n=a,r=b", "n,b=x,n=a,r=b", "n,,m=x,n=a,r=b", "n,,n=,r=b", "n,,n=a=2,r=b",
		"n,,n=a=41,r=b", "n,,n=a,r=", "n,,n=a,r=b c", "n,,n=a,r=b,=x", "n,,n=a,r=b,k1=v", "n,,n=a,r=b,k=v,k=w",
		"n,,n=a\x00,r=b", "n,,n=\xff,r=b",
	} {
		if _, err := ParseScramClientFirst([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestScramExtensionsAreBounded: scramExtensionsMax extensions parse, one
// more is refused.
func TestScramExtensionsAreBounded(t *testing.T) {
	msg := "n,,n=alice,r=abc"
	for i := range scramExtensionsMax {
		msg += fmt.Sprintf(",k%c=v", 'a'+i)
	}
	msg = strings.ReplaceAll(msg, "k", "x") // keys are letters only
	if _, err := ParseScramClientFirst([]byte(msg)); err != nil {
		t.Fatalf("%d extensions: %v", scramExtensionsMax, err)
	}
	if _, err := ParseScramClientFirst([]byte(msg + ",xz=v")); err == nil || !strings.Contains(err.Error(), "at most 16") {
		t.Fatalf("%d extensions: %v", scramExtensionsMax+1, err)
	}
}

func TestParseScramClientFinal(t *testing.T) {
	got, err := ParseScramClientFinal([]byte("c=biws,r=abc,ext=1,p=AAEC"))
	if err != nil || string(got.ChannelBinding) != "n,," || got.Nonce != "abc" || len(got.Proof) != 3 {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	for _, bad := range []string{"", "c=biws,r=abc", "c=!!,r=abc,p=AAEC", "c=biws,r=abc,p=", "x=biws,r=abc,p=AAEC", "c=biws,n=abc,p=AAEC"} {
		if _, err := ParseScramClientFinal([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestScramClient: a node's own SCRAM login authenticates to Strand's
// server, refuses a server that cannot prove it holds the credential, and
// one asking for more iterations than a credential may have.
func TestScramClient(t *testing.T) {
	lookup := scramUsers(t, 4096, map[string]string{"broker": "broker-secret"})
	run := func(server Mechanism, password string) error {
		c := scramClient{mechanism: metadata.ScramSHA512, user: "broker", password: password}
		ex, token, err := c.Start("")
		if err != nil {
			return err
		}
		sex := server.Start(nil)
		for {
			answer, _, err := sex.Next(token)
			if err != nil {
				return err
			}
			var done bool
			token, done, err = ex.Next(answer)
			if err != nil || (done && token == nil) {
				return err
			}
		}
	}
	if err := run(newScram(t, "SCRAM-SHA-512", lookup), "broker-secret"); err != nil {
		t.Fatalf("node login: %v", err)
	}
	if err := run(newScram(t, "SCRAM-SHA-512", lookup), "wrong"); err == nil {
		t.Fatal("a wrong password logged in")
	}
	// An impostor that knows the salt but not the keys.
	impostor := func(mechanism, user string) (env.ScramCredential, bool) {
		c, ok := lookup(mechanism, user)
		c.ServerKey = make([]byte, len(c.ServerKey))
		return c, ok
	}
	if err := run(newScram(t, "SCRAM-SHA-512", impostor), "broker-secret"); err == nil || !strings.Contains(err.Error(), "did not prove") {
		t.Fatalf("an impostor server: %v", err)
	}
	ex := &scramClientExchange{name: "SCRAM-SHA-512"}
	if _, _, err := ex.Next([]byte("r=abc,s=c2FsdA==,i=1000000")); err == nil || !strings.Contains(err.Error(), "at most 16384") {
		t.Fatalf("a server asking for a million iterations: %v", err)
	}
}

func FuzzParseScramClientFirst(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abcdef"))
	f.Add([]byte("n,a=alice,n=alice,r=abcdef,tokenauth=true"))
	f.Add([]byte("n,,n=a=2Cb=3D,r=x"))
	f.Add([]byte(",,n=a,r=b"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		p, err := ParseScramClientFirst(msg)
		if err != nil {
			return
		}
		if p.User == "" || p.Nonce == "" || strings.ContainsRune(p.Nonce, ',') {
			t.Fatalf("parsed %+v from %q", p, msg)
		}
		// The user name round-trips through its escaping.
		if again, err := decodeSaslName(EncodeSaslName(p.User)); err != nil || again != p.User {
			t.Fatalf("user %q does not round-trip: %q %v", p.User, again, err)
		}
	})
}

func FuzzParseScramClientFinal(f *testing.F) {
	f.Add([]byte("c=biws,r=abc,p=AAEC"))
	f.Add([]byte("c=biws,r=abc,ext=1,p=AAEC"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		p, err := ParseScramClientFinal(msg)
		if err == nil && (len(p.Proof) == 0 || len(p.ChannelBinding) == 0 || p.Nonce == "") {
			t.Fatalf("parsed %+v from %q", p, msg)
		}
	})
}

// FuzzScramExchange feeds the server any two client messages: it never
// panics, and never authenticates without alice's password.
func FuzzScramExchange(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAEC"))
	f.Add([]byte("n,,n=alice,r=a"), []byte("c=biws,r=a,p="+base64.StdEncoding.EncodeToString(make([]byte, 64))))
	m := newScram(f, "SCRAM-SHA-256", scramUsers(f, 4096, map[string]string{"alice": "alice-secret"}))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		ex := m.Start(nil)
		if _, done, err := ex.Next(first); err != nil || done {
			return
		}
		if _, done, err := ex.Next(final); err == nil || done {
			t.Fatalf("authenticated as %q with %q then %q", ex.Result().Principal, first, final)
		}
	})
}

// TestNewScramCredentialMatchesTheController: the credential xdg-go
// derives from a password is the one the controller derives from the
// salted password a client sends (metadata.NewScramCredential over
// PBKDF2), and it authenticates.
func TestNewScramCredentialMatchesTheController(t *testing.T) {
	for _, m := range metadata.ScramMechanisms {
		c, err := NewScramCredential(m, "pw", 4096)
		if err != nil {
			t.Fatal(err)
		}
		salted, _ := pbkdf2.Key(m.Hash(), "pw", c.Salt, 4096, m.KeyBytes())
		want := metadata.NewScramCredential(m, c.Salt, salted, 4096)
		if string(c.StoredKey) != string(want.StoredKey) || string(c.ServerKey) != string(want.ServerKey) || len(c.Salt) != ScramSaltBytes {
			t.Fatalf("%v: xdg-go's credential differs from the controller's", m)
		}
		lookup := func(string, string) (env.ScramCredential, bool) {
			return env.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, true
		}
		if err := clientRun(t, scramHash(m), newScram(t, m.String(), lookup).Start(nil), "u", "pw"); err != nil {
			t.Fatalf("%v: %v", m, err)
		}
	}
	if _, err := NewScramCredential(metadata.ScramSHA256, "pw", 100); err == nil {
		t.Fatal("100 iterations accepted")
	}
}

// TestScramAcceptsLibrdkafkasNonce: librdkafka sends its own nonce again
// in front of the joined one in its client-final-message; Kafka accepts
// any nonce that ends with the joined one, and so does Strand (xdg-go's
// server conversation refuses it). Any other nonce is refused.
func TestScramAcceptsLibrdkafkasNonce(t *testing.T) {
	m := newScram(t, "SCRAM-SHA-512", scramUsers(t, 4096, map[string]string{"alice": "alice-secret"}))
	run := func(finalNonce func(clientNonce, joined string) string) error {
		ex := m.Start(nil)
		first := "n,,n=alice,r=cnonce"
		serverFirst, _, err := ex.Next([]byte(first))
		if err != nil {
			t.Fatal(err)
		}
		fields := parseServerFirstForTest(t, string(serverFirst))
		joined := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
		salted, _ := pbkdf2.Key(metadata.ScramSHA512.Hash(), "alice-secret", []byte(fields.salt), 4096, 64)
		c := metadata.NewScramCredential(metadata.ScramSHA512, []byte(fields.salt), salted, 4096)
		withoutProof := "c=biws,r=" + finalNonce("cnonce", joined)
		authMessage := "n=alice,r=cnonce," + string(serverFirst) + "," + withoutProof
		clientKey := scramHMAC(metadata.ScramSHA512, salted, []byte("Client Key"))
		proof := scramHMAC(metadata.ScramSHA512, c.StoredKey, []byte(authMessage))
		for i := range proof {
			proof[i] ^= clientKey[i]
		}
		_, _, err = ex.Next([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		return err
	}
	if err := run(func(_, joined string) string { return joined }); err != nil {
		t.Fatalf("the joined nonce: %v", err)
	}
	if err := run(func(client, joined string) string { return client + joined }); err != nil {
		t.Fatalf("librdkafka's nonce: %v", err)
	}
	if err := run(func(_, joined string) string { return joined + "x" }); err == nil {
		t.Fatal("a nonce with a suffix after the joined one was accepted")
	}
	if err := run(func(client, _ string) string { return client }); err == nil {
		t.Fatal("the client's nonce alone was accepted")
	}
}
