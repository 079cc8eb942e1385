package realnet

import (
	"context"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"strand/core/env"
	"strand/realnet/auth"
	"strand/realnet/authtest"
)

// plainJAAS is a PLAIN listener's JAAS: the node's own credentials and the
// users it accepts.
const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`

// TestSASLPlainClusterKgoAndKcat runs a 3-node cluster whose client and
// inter-broker listener is SASL_SSL and whose controller listener is
// SASL_PLAINTEXT, all with PLAIN: the nodes register, heartbeat and
// replicate as user broker, over TLS where the listener has it. kgo
// (franz-go's sasl/plain) and kcat (librdkafka) produce and consume as
// alice; a wrong password is refused with SASL_AUTHENTICATION_FAILED.
func TestSASLPlainClusterKgoAndKcat(t *testing.T) {
	pki := newTestPKI(t)
	c := startSecureCluster(t, secureClusterSpec{size: 3, clientListener: "CLIENT", props: func(id int) map[string]string {
		cert := pki.issue(t, pkix.Name{CommonName: fmt.Sprintf("node%d", id)}, "127.0.0.1")
		return map[string]string{
			"listener.security.protocol.map":                  "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
			"sasl.enabled.mechanisms":                         "PLAIN",
			"sasl.mechanism.inter.broker.protocol":            "PLAIN",
			"sasl.mechanism.controller.protocol":              "PLAIN",
			"listener.name.client.plain.sasl.jaas.config":     plainJAAS,
			"listener.name.controller.plain.sasl.jaas.config": plainJAAS,
			"listener.name.client.ssl.keystore.type":          "PEM",
			"listener.name.client.ssl.keystore.location":      pki.keystore(t, fmt.Sprintf("node%d", id), cert),
			"listener.name.client.ssl.truststore.type":        "PEM",
			"listener.name.client.ssl.truststore.location":    pki.caFile,
			"super.users": "User:broker",
		}
	}})
	tlsCfg := pki.clientTLS(t, authtestNoCert)
	cl := c.secureClient(kgoTLS(tlsCfg), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopicWith(t, cl, "plain", 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]bool{}
	for i := range 100 {
		v := fmt.Sprintf("kgo-%d", i)
		want[v] = true
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "plain", Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if kcatOrSkip(t) != "" {
		sasl := []string{"-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + pki.caFile,
			"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		kcatAt(t, c.clientAddrs(), []byte("kcat-a\nkcat-b\n"), append(sasl, "-P", "-t", "plain", "-p", "0", "-X", "acks=all")...)
		out := string(kcatAt(t, c.clientAddrs(), nil, append(sasl, "-C", "-t", "plain", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n")...))
		for _, v := range []string{"kcat-a", "kcat-b", "kgo-0", "kgo-98"} {
			if !strings.Contains(out, v+"\n") {
				t.Fatalf("kcat SASL_SSL/PLAIN consume lacks %q:\n%s", v, out)
			}
		}
		want["kcat-a"], want["kcat-b"] = true, true
	}
	consumer := c.secureClient(kgoTLS(tlsCfg), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ConsumeTopics("plain"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < len(want) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, len(want))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if want[string(r.Value)] {
				got++
			}
		})
	}

	wrong := c.secureClient(kgoTLS(tlsCfg), kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()))
	shortCtx, shortCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shortCancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(shortCtx, wrong)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// plainNetwork serves a SASL_PLAINTEXT listener with PLAIN (users broker
// and alice) and a failure delay of delay; setup runs before it serves.
func plainNetwork(t *testing.T, delay time.Duration, extra ...string) *authNetwork {
	return plainNetworkWith(t, delay, nil, extra...)
}

func plainNetworkWith(t *testing.T, delay time.Duration, setup func(*Network), extra ...string) *authNetwork {
	props := map[string]string{
		"listener.security.protocol.map":                      "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":                             "PLAIN",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"connection.failed.authentication.delay.ms":           fmt.Sprint(delay.Milliseconds()),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		props[extra[i]] = extra[i+1]
	}
	if setup == nil {
		return startAuthNetwork(t, "SASL_PLAINTEXT", props, "")
	}
	return startAuthNetwork(t, "SASL_PLAINTEXT", props, "", setup)
}

// TestAuthenticationTimeoutEndsWithAuthentication: the bound on the time to
// authenticate closes a connection that has not, and stops applying once
// it has: an authenticated connection is served past it, not closed at
// the bound.
func TestAuthenticationTimeoutEndsWithAuthentication(t *testing.T) {
	an := plainNetworkWith(t, 0, func(n *Network) { n.authenticationTimeout = 300 * time.Millisecond })
	idle := dialRaw(t, an.addr)
	rc := dialRaw(t, an.addr)
	sendSaslHandshake(t, rc, 1, 1, "PLAIN")
	if resp, _ := sendSaslAuthenticate(t, rc, 2, auth.AppendPlainMessage(nil, "alice", "alice-secret")); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	time.Sleep(600 * time.Millisecond)
	meta := kmsg.NewPtrMetadataRequest()
	rc.send(3, meta)
	rc.receive(3, meta)
	expectClosed(t, idle, "a connection that never authenticated, past the bound")
}

// authtestNoCert is no client certificate.
var authtestNoCert = authtest.Certificate{}

// sendSaslHandshake sends SaslHandshake for mechanism at version and returns
// the answer.
func sendSaslHandshake(t *testing.T, rc *rawConn, id int32, version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(version)
	req.Mechanism = mechanism
	rc.send(id, req)
	return rc.receive(id, req).(*kmsg.SASLHandshakeResponse)
}

// sendSaslAuthenticate sends one SaslAuthenticate v2 with token and returns
// the answer, and how long it took.
func sendSaslAuthenticate(t *testing.T, rc *rawConn, id int32, token []byte) (*kmsg.SASLAuthenticateResponse, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(2)
	req.SASLAuthBytes = token
	start := time.Now()
	rc.send(id, req)
	resp := rc.receive(id, req).(*kmsg.SASLAuthenticateResponse)
	return resp, time.Since(start)
}

// expectClosed checks the server closes the connection without another
// answer.
func expectClosed(t *testing.T, rc *rawConn, what string) {
	t.Helper()
	if frame, err := rc.readFrame(10 * time.Second); err == nil {
		t.Fatalf("%s: got a %d-byte answer, want the connection closed", what, len(frame))
	} else if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("%s: %v, want the connection closed", what, err)
	}
}

// TestPlainPrincipalAndRawTokens: requests after a PLAIN authentication
// carry User:alice; the ApiVersions before it carries ANONYMOUS; a client of
// SaslHandshake v0 sends its token raw and gets an empty raw token back
// (KIP-43's framing), then is served as alice too.
func TestPlainPrincipalAndRawTokens(t *testing.T) {
	an := plainNetwork(t, 0)
	rc := dialRaw(t, an.addr)
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	rc.send(1, api)
	rc.receive(1, api)
	if hs := sendSaslHandshake(t, rc, 2, 1, "PLAIN"); hs.ErrorCode != 0 || strings.Join(hs.SupportedMechanisms, ",") != "PLAIN" {
		t.Fatalf("handshake: %d %v", hs.ErrorCode, hs.SupportedMechanisms)
	}
	if resp, _ := sendSaslAuthenticate(t, rc, 3, auth.AppendPlainMessage(nil, "alice", "alice-secret")); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %d %v lifetime %d", resp.ErrorCode, resp.ErrorMessage, resp.SessionLifetimeMillis)
	}
	meta := kmsg.NewPtrMetadataRequest()
	rc.send(4, meta)
	rc.receive(4, meta)

	v0 := dialRaw(t, an.addr)
	if hs := sendSaslHandshake(t, v0, 1, 0, "PLAIN"); hs.ErrorCode != 0 {
		t.Fatalf("v0 handshake: %d", hs.ErrorCode)
	}
	token := auth.AppendPlainMessage(nil, "alice", "alice-secret")
	v0.write(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	v0.write(token)
	if frame, err := v0.readFrame(10 * time.Second); err != nil || len(frame) != 0 {
		t.Fatalf("v0 token answer: %d bytes, %v; want an empty raw token", len(frame), err)
	}
	v0.send(2, meta)
	v0.receive(2, meta)

	got := strings.Join(an.recorder.principals(kmsg.Metadata.Int16()), " ")
	if got != "User:alice User:alice" {
		t.Errorf("Metadata principals %q, want User:alice twice", got)
	}
	if got := an.recorder.principals(kmsg.ApiVersions.Int16()); len(got) != 1 || got[0] != env.AnonymousPrincipal {
		t.Errorf("ApiVersions before authentication: principals %v, want ANONYMOUS", got)
	}
}

// TestPlainRefusals: each refusal of the SASL layer, each failing without
// its rule. A wrong password and an unknown user get the same
// SASL_AUTHENTICATION_FAILED message, after
// connection.failed.authentication.delay.ms, then the connection closes;
// an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled
// list; a request before the handshake is not served (the connection
// closes unanswered, as Kafka's InvalidRequestException); another API
// during the exchange gets ILLEGAL_SASL_STATE; a frame over
// sasl.server.max.receive.size before authentication closes the
// connection.
func TestPlainRefusals(t *testing.T) {
	const delay = 250 * time.Millisecond
	an := plainNetwork(t, delay, "sasl.server.max.receive.size", "1024")
	var messages []string
	for _, creds := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
		rc := dialRaw(t, an.addr)
		sendSaslHandshake(t, rc, 1, 1, "PLAIN")
		resp, took := sendSaslAuthenticate(t, rc, 2, auth.AppendPlainMessage(nil, creds[0], creds[1]))
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
			t.Fatalf("%s/%s: error %d, want SASL_AUTHENTICATION_FAILED with a message", creds[0], creds[1], resp.ErrorCode)
		}
		if took < delay {
			t.Errorf("%s/%s: answered after %v, before connection.failed.authentication.delay.ms (%v)", creds[0], creds[1], took, delay)
		}
		messages = append(messages, *resp.ErrorMessage)
		expectClosed(t, rc, "after a failed authentication")
	}
	if messages[0] != messages[1] || !strings.Contains(messages[0], "Invalid username or password") {
		t.Errorf("wrong password %q and unknown user %q must read alike", messages[0], messages[1])
	}

	rc := dialRaw(t, an.addr)
	hs := sendSaslHandshake(t, rc, 1, 1, "SCRAM-SHA-256")
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hs.SupportedMechanisms, ",") != "PLAIN" {
		t.Errorf("unknown mechanism: error %d mechanisms %v, want UNSUPPORTED_SASL_MECHANISM [PLAIN]", hs.ErrorCode, hs.SupportedMechanisms)
	}
	expectClosed(t, rc, "after an unsupported mechanism")

	rc = dialRaw(t, an.addr)
	meta := kmsg.NewPtrMetadataRequest()
	rc.send(1, meta)
	expectClosed(t, rc, "Metadata before the handshake")

	rc = dialRaw(t, an.addr)
	sendSaslHandshake(t, rc, 1, 1, "PLAIN")
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	rc.send(2, api)
	if resp := rc.receive(2, api).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("ApiVersions during the exchange: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	expectClosed(t, rc, "after ILLEGAL_SASL_STATE")

	rc = dialRaw(t, an.addr)
	rc.write(binary.BigEndian.AppendUint32(nil, 4096))
	rc.write(make([]byte, 4096))
	expectClosed(t, rc, "a 4 KiB frame before authentication with sasl.server.max.receive.size=1024")

	if got := an.recorder.principals(kmsg.Metadata.Int16()); len(got) != 0 {
		t.Errorf("the node was given %d Metadata requests from unauthenticated connections", len(got))
	}
}

// TestIPAddressPrincipal: the design's light mode. With
// authentication=ipaddress (principal.builder.class set to Strand's
// IpAddressPrincipalBuilder) a PLAINTEXT connection's requests carry
// User:<source IP>; with Kafka's default builder, ANONYMOUS.
func TestIPAddressPrincipal(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"authentication": "ipaddress"}, "User:127.0.0.1"},
		{map[string]string{"principal.builder.class": "strand.security.IpAddressPrincipalBuilder"}, "User:127.0.0.1"},
		{nil, env.AnonymousPrincipal},
	} {
		props := map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
		for k, v := range c.props {
			props[k] = v
		}
		an := startAuthNetwork(t, "PLAINTEXT", props, "")
		rc := dialRaw(t, an.addr)
		meta := kmsg.NewPtrMetadataRequest()
		rc.send(1, meta)
		rc.receive(1, meta)
		if got := an.recorder.principals(kmsg.Metadata.Int16()); len(got) != 1 || got[0] != c.want {
			t.Errorf("%v: principals %v, want %s", c.props, got, c.want)
		}
	}
}

// BenchmarkInterceptsAfterAuthentication is what authentication costs a
// request once the connection has authenticated: intercepts' check on a
// PLAINTEXT connection, an authenticated SASL one, and one whose session
// expires (an atomic load: a timer marks the end, no clock is read).
func BenchmarkInterceptsAfterAuthentication(b *testing.B) {
	frame := make([]byte, 64) // a Produce request's first bytes: key 0
	for _, c := range []struct {
		name string
		auth *connAuth
	}{
		{"plaintext", &connAuth{state: saslOff}},
		{"sasl", &connAuth{state: saslComplete}},
		{"sasl-expiring", &connAuth{state: saslComplete, session: 1, lastSession: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			sc := &serverConn{auth: c.auth}
			for b.Loop() {
				if sc.intercepts(frame) {
					b.Fatal("an authenticated request was intercepted")
				}
			}
		})
	}
}
