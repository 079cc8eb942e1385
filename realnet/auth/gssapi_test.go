package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"

	"strand/core/config"
	"strand/realnet/authtest"
)

// The package's KDC: one real MIT krb5kdc for all its tests, in a fresh
// realm, stopped by TestMain.
var testKDC struct {
	once sync.Once
	kdc  *authtest.KDC
	dir  string
	err  error
}

const testRealm = "STRAND.TEST"

func TestMain(m *testing.M) {
	code := m.Run()
	if testKDC.kdc != nil {
		testKDC.kdc.Stop()
	}
	if testKDC.dir != "" {
		os.RemoveAll(testKDC.dir)
	}
	os.Exit(code)
}

// kdcFor starts the KDC once with the principals the tests use, or skips
// where MIT Kerberos is not installed.
func kdcFor(t *testing.T) *authtest.KDC {
	t.Helper()
	if err := authtest.KDCAvailable(); err != nil {
		t.Skip(err)
	}
	testKDC.once.Do(func() {
		dir, err := os.MkdirTemp("", "strand-auth-kdc-")
		if err != nil {
			testKDC.err = err
			return
		}
		testKDC.dir = dir
		k, err := authtest.StartKDC(dir, testRealm)
		if err != nil {
			testKDC.err = err
			return
		}
		testKDC.kdc = k
		for _, p := range []struct{ name, password, maxLife string }{
			{"kafka/127.0.0.1", "", ""},
			{"other/127.0.0.1", "", ""},
			{"short/127.0.0.1", "", "3 seconds"},
			{"alice", "alice-pw", ""},
		} {
			if testKDC.err = k.AddPrincipal(p.name, p.password, p.maxLife); testKDC.err != nil {
				return
			}
		}
		for _, p := range []string{"kafka/127.0.0.1", "other/127.0.0.1", "short/127.0.0.1", "alice"} {
			file := filepath.Join(dir, strings.ReplaceAll(p, "/", "_")+".keytab")
			if testKDC.err = k.Keytab(file, p); testKDC.err != nil {
				return
			}
		}
	})
	if testKDC.err != nil {
		t.Fatal(testKDC.err)
	}
	return testKDC.kdc
}

func keytabPath(principal string) string {
	return filepath.Join(testKDC.dir, strings.ReplaceAll(principal, "/", "_")+".keytab")
}

// testLogin logs principal in with its keytab, with krb5.conf's clock
// skew skewS.
func testLogin(t *testing.T, principal string, skewS int) *kerberosLogin {
	t.Helper()
	k := kdcFor(t)
	conf, err := k.WriteKrb5Conf(fmt.Sprintf("krb5-skew%d.conf", skewS), skewS)
	if err != nil {
		t.Fatal(err)
	}
	logins, err := newKerberosLogins(conf, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(logins.close)
	l, err := logins.login(k.Principal(principal), keytabPath(principal))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// server is the GSSAPI mechanism of a node logged in as kafka/127.0.0.1.
func testServer(t *testing.T, skewS int) Mechanism {
	rules, err := config.ParseKerberosRules("rules", "DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	return newGSSAPI(testLogin(t, "kafka/127.0.0.1", skewS), rules)
}

// runExchange drives a client exchange against the server until both are
// done, as the SaslAuthenticate round trips do.
func runExchange(server Exchange, first []byte, next func([]byte) ([]byte, bool, error)) error {
	token := first
	for range 8 {
		answer, done, err := server.Next(token)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		var clientDone bool
		token, clientDone, err = next(answer)
		if err != nil {
			return err
		}
		if clientDone && token == nil {
			return errors.New("the client finished before the server")
		}
	}
	return errors.New("the exchange did not end")
}

// TestGSSAPIMutualAuthentication runs Strand's own initiator (what nodes
// use between themselves: mutual authentication, so the server answers the
// AP-REP gokrb5 cannot write) against the acceptor, both logged in to the
// real KDC: the client gets User:alice (DEFAULT strips the default realm),
// a node's host principal User:kafka, and the session ends with the ticket.
func TestGSSAPIMutualAuthentication(t *testing.T) {
	server := testServer(t, 300)
	for _, who := range []struct{ principal, want string }{{"alice", "User:alice"}, {"kafka/127.0.0.1", "User:kafka"}} {
		c := gssapiClient{login: testLogin(t, who.principal, 300), service: "kafka"}
		ex, first, err := c.Start("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		s := server.Start(nil)
		if err := runExchange(s, first, ex.Next); err != nil {
			t.Fatalf("%s: %v", who.principal, err)
		}
		r := s.Result()
		if r.Principal != who.want {
			t.Errorf("%s: principal %q, want %q", who.principal, r.Principal, who.want)
		}
		if until := time.Until(r.ExpiresAt); until < 9*time.Hour || until > 10*time.Hour+time.Minute {
			t.Errorf("%s: session ends in %v, want the ticket's 10 h", who.principal, until)
		}
	}
}

// TestGSSAPIWithFranzGo: franz-go's sasl/kerberos (gokrb5, no mutual
// authentication: the server sends its offer right after the AP-REQ).
func TestGSSAPIWithFranzGo(t *testing.T) {
	server := testServer(t, 300)
	cl := testLogin(t, "alice", 300).client
	mech := kerberos.Auth{Client: cl, Service: "kafka"}.AsMechanism()
	session, first, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	s := server.Start(nil)
	var lastSent bool
	err = runExchange(s, first, func(answer []byte) ([]byte, bool, error) {
		if lastSent {
			return nil, true, nil
		}
		done, token, err := session.Challenge(answer)
		lastSent = done
		return token, false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Result().Principal != "User:alice" {
		t.Errorf("principal %q", s.Result().Principal)
	}
}

// apReqFor builds an AP-REQ from principal to service/127.0.0.1 with
// edit applied to the authenticator, as a client would send it (no mutual
// authentication).
func apReqFor(t *testing.T, principal, service string, edit func(*types.Authenticator)) []byte {
	t.Helper()
	cl := testLogin(t, principal, 300).client
	ticket, key, err := cl.GetServiceTicket(service + "/127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := types.NewAuthenticator(cl.Credentials.Domain(), cl.Credentials.CName())
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&a)
	}
	req, err := messages.NewAPReq(ticket, key, a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return AppendContextToken(nil, tokenAPReq, b)
}

// TestGSSAPIRefusals: each rule of the acceptor, with the token that
// breaks it; each is refused with Kafka's generic message (the cause stays
// in the broker's log).
func TestGSSAPIRefusals(t *testing.T) {
	server := testServer(t, 300)
	refused := func(what string, token []byte, contains string) {
		t.Helper()
		_, _, err := server.Start(nil).Next(token)
		var f *Failure
		if !errors.As(err, &f) || f.Message != "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI" {
			t.Errorf("%s: got %v, want the generic GSSAPI failure", what, err)
			return
		}
		if !strings.Contains(err.Error(), contains) {
			t.Errorf("%s: cause %q lacks %q", what, err, contains)
		}
	}
	// A replayed authenticator: the same AP-REQ twice.
	token := apReqFor(t, "alice", "kafka", nil)
	if _, _, err := server.Start(nil).Next(token); err != nil {
		t.Fatalf("first presentation: %v", err)
	}
	refused("a replayed authenticator", token, "replayed")
	// A ticket for another service.
	refused("a ticket for other/127.0.0.1", apReqFor(t, "alice", "other", nil), "not for this node")
	// A clock outside the skew: an authenticator made 10 minutes ago.
	refused("a clock 10 minutes behind", apReqFor(t, "alice", "kafka", func(a *types.Authenticator) {
		a.CTime = a.CTime.Add(-10 * time.Minute)
	}), "skew")
	refused("a clock 10 minutes ahead", apReqFor(t, "alice", "kafka", func(a *types.Authenticator) {
		a.CTime = a.CTime.Add(10 * time.Minute)
	}), "skew")
	refused("not a GSS-API token", []byte("hello"), "InitialContextToken")
}

// TestGSSAPIExpiredTicket: a ticket from the KDC for a service whose
// tickets live 3 seconds, presented after it ended (and past a 1 s clock
// skew), is refused. The service logs in with the default skew: a 1 s
// skew on its own AS exchange fails whenever the loaded machine takes
// over a second to answer; only the acceptor's check needs it.
func TestGSSAPIExpiredTicket(t *testing.T) {
	rules, _ := config.ParseKerberosRules("rules", "DEFAULT")
	login := testLogin(t, "short/127.0.0.1", 300)
	login.conf.LibDefaults.Clockskew = time.Second
	server := newGSSAPI(login, rules)
	token := apReqFor(t, "alice", "short", nil)
	// Fresh, it is accepted (and the session is bounded by the ticket).
	fresh := server.Start(nil)
	if _, _, err := fresh.Next(apReqFor(t, "alice", "short", nil)); err != nil {
		t.Fatalf("fresh ticket: %v", err)
	}
	time.Sleep(4500 * time.Millisecond)
	_, _, err := server.Start(nil).Next(token)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired ticket: got %v, want refused as expired", err)
	}
}

// TestAPRepRoundTrip: the AP-REP Strand writes reads back with gokrb5's
// reader, carrying the authenticator's time and the sequence number.
func TestAPRepRoundTrip(t *testing.T) {
	key := types.EncryptionKey{KeyType: 18, KeyValue: make([]byte, 32)}
	ctime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, err := MarshalAPRep(key, ctime, 123456, 987)
	if err != nil {
		t.Fatal(err)
	}
	part, err := ParseAPRep(b, key)
	if err != nil {
		t.Fatal(err)
	}
	if !part.CTime.Equal(ctime) || part.Cusec != 123456 || part.SequenceNumber != 987 || part.Subkey.KeyType != 0 {
		t.Errorf("read back %+v", part)
	}
	if _, err := ParseAPRep(b, types.EncryptionKey{KeyType: 18, KeyValue: make([]byte, 32)[:31]}); err == nil {
		t.Error("decrypted with a wrong key")
	}
}

// TestWrapTokenRoundTrip: Wrap tokens sign and verify, a rotated token
// (RRC, as Windows writes them) reads the same, and a changed byte fails.
func TestWrapTokenRoundTrip(t *testing.T) {
	key := types.EncryptionKey{KeyType: 18, KeyValue: []byte("0123456789abcdef0123456789abcdef")}
	b, err := WrapToken{Flags: wrapSentByAcceptor, SeqNum: 7, Payload: []byte{1, 0, 0, 0}}.Marshal(key, 22)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParseWrapToken(b)
	if err != nil || w.Verify(key, 22) != nil || w.SeqNum != 7 {
		t.Fatalf("round trip: %+v %v", w, err)
	}
	if w.Verify(key, 24) == nil {
		t.Error("verified with the initiator's key usage")
	}
	rotated := append([]byte{}, b[:16]...)
	data := b[16:]
	rotated[7] = 5 // RRC 5: the last 5 bytes first
	rotated = append(rotated, data[len(data)-5:]...)
	rotated = append(rotated, data[:len(data)-5]...)
	if w, err := ParseWrapToken(rotated); err != nil || w.Verify(key, 22) != nil {
		t.Errorf("rotated token: %v", err)
	}
	b[17] ^= 1
	if w, err := ParseWrapToken(b); err == nil && w.Verify(key, 22) == nil {
		t.Error("a changed payload verified")
	}
}

// TestLoginFailuresNameTheirCause: a login's error names the principal,
// the keytab and the KDC's answer (a stale key), or the missing file.
func TestLoginFailuresNameTheirCause(t *testing.T) {
	k := kdcFor(t)
	logins, err := newKerberosLogins(k.Krb5Conf, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer logins.close()
	stale := filepath.Join(t.TempDir(), "stale.keytab")
	if err := k.AddPrincipal("rotated/127.0.0.1", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := k.Keytab(stale, "rotated/127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := k.RandomizeKey("rotated/127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	principal := k.Principal("rotated/127.0.0.1")
	_, err = logins.login(principal, stale)
	if err == nil || !strings.Contains(err.Error(), principal) || !strings.Contains(err.Error(), stale) || !strings.Contains(err.Error(), "KDC answered") {
		t.Errorf("stale keytab: %v", err)
	}
	_, err = logins.login(principal, "/nonexistent/node.keytab")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/node.keytab") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing keytab: %v", err)
	}
	_, err = logins.login(k.Principal("alice"), keytabPath("kafka/127.0.0.1"))
	if err == nil || !strings.Contains(err.Error(), "no key for the principal") {
		t.Errorf("keytab of another principal: %v", err)
	}
}

func FuzzParseContextToken(f *testing.F) {
	f.Add(AppendContextToken(nil, tokenAPReq, []byte{0x6e, 0x03, 1, 2, 3}))
	f.Add(AppendContextToken(nil, tokenAPRep, make([]byte, 300)))
	f.Add([]byte{0x60, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, msg, err := ParseContextToken(b)
		if err != nil {
			return
		}
		if again := AppendContextToken(nil, id, msg); string(again) != string(b) {
			t.Fatalf("token %x re-frames as %x", b, again)
		}
	})
}

func FuzzParseWrapToken(f *testing.F) {
	key := types.EncryptionKey{KeyType: 18, KeyValue: []byte("0123456789abcdef0123456789abcdef")}
	tok, _ := WrapToken{Flags: wrapSentByAcceptor, Payload: []byte{1, 0, 0, 0}}.Marshal(key, 22)
	f.Add(tok)
	f.Add([]byte{5, 4, 0, 0xff, 0, 100, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWrapToken(b)
		if err != nil {
			return
		}
		if len(w.Payload)+len(w.checksum) != len(b)-wrapHeaderBytes {
			t.Fatalf("payload %d + checksum %d of a %d-byte token", len(w.Payload), len(w.checksum), len(b))
		}
		_ = w.Verify(key, 24)
	})
}

// FuzzGSSAPIExchange feeds the acceptor arbitrary tokens: it never panics
// and never completes without a ticket its keytab decrypts.
func FuzzGSSAPIExchange(f *testing.F) {
	f.Add(AppendContextToken(nil, tokenAPReq, []byte{0x6e, 0x00}), []byte{})
	f.Add([]byte{0x60, 0x00}, []byte{5, 4, 0, 0xff})
	rules, _ := config.ParseKerberosRules("rules", "DEFAULT")
	login := &kerberosLogin{principal: "kafka/h@R", name: types.NewPrincipalName(1, "kafka/h"), realm: "R", keytab: keytab.New(),
		conf: krbconfig.New(), replays: newReplayCache()}
	m := newGSSAPI(login, rules)
	f.Fuzz(func(t *testing.T, first, second []byte) {
		ex := m.Start(nil)
		_, done, err := ex.Next(first)
		if done || err == nil {
			t.Fatalf("an arbitrary token authenticated: done %v err %v", done, err)
		}
		if _, done, _ := ex.Next(second); done {
			t.Fatal("completed after a failed first step")
		}
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
