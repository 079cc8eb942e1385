package realnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"strand/realnet/auth"
)

// TestSessionExpiryAndReauthentication is KIP-368 on the server side, with
// connections.max.reauth.ms=1000: the session lifetime is announced in
// SaslAuthenticate; a request after the session ended closes the
// connection unanswered; a re-authentication (SaslHandshake and
// SaslAuthenticate again) before it ends renews it, and the connection is
// served past the first session's end; a re-authentication as another
// user is refused. Without the expiry rule the late request is served.
func TestSessionExpiryAndReauthentication(t *testing.T) {
	an := plainNetwork(t, 0, "connections.max.reauth.ms", "1000")
	login := func(rc *rawConn, id int32, user, password string) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		if hs := sendSaslHandshake(t, rc, id, 1, "PLAIN"); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %d", hs.ErrorCode)
		}
		resp, _ := sendSaslAuthenticate(t, rc, id+1, auth.AppendPlainMessage(nil, user, password))
		return resp
	}
	meta := kmsg.NewPtrMetadataRequest()

	expiring := dialRaw(t, an.addr)
	if resp := login(expiring, 1, "alice", "alice-secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1000 {
		t.Fatalf("login: error %d lifetime %d, want 0 and 1000", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	renewed := dialRaw(t, an.addr)
	login(renewed, 1, "alice", "alice-secret")
	expiring.send(3, meta)
	expiring.receive(3, meta)

	time.Sleep(700 * time.Millisecond)
	if resp := login(renewed, 3, "alice", "alice-secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1000 {
		t.Fatalf("re-authentication: error %d lifetime %d", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	time.Sleep(500 * time.Millisecond) // past the first session's end
	renewed.send(5, meta)
	renewed.receive(5, meta)
	// A second re-authentication within a second of the last one is not
	// one: the SaslHandshake goes to the node (which answers
	// ILLEGAL_SASL_STATE; the recorder closes the connection).
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	renewed.send(6, hs)
	expectClosed(t, renewed, "a SaslHandshake within a second of the last re-authentication")
	if got := an.recorder.principals(kmsg.SASLHandshake.Int16()); len(got) != 1 || got[0] != "User:alice" {
		t.Errorf("the node got SaslHandshakes from %v, want one from User:alice", got)
	}
	expiring.send(4, meta)
	expectClosed(t, expiring, "a request after the session ended")
	if got := an.net.expiredSessions.Load(); got != 1 {
		t.Errorf("expired sessions counted %d, want 1", got)
	}

	// Another user on re-authentication: refused, the connection closes.
	switched := dialRaw(t, an.addr)
	login(switched, 1, "alice", "alice-secret")
	resp := login(switched, 3, "broker", "broker-secret")
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "Cannot change principals") {
		t.Errorf("re-authentication as another user: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	expectClosed(t, switched, "after a principal change")
	if got := strings.Join(an.recorder.principals(kmsg.Metadata.Int16()), " "); got != "User:alice User:alice" {
		t.Errorf("Metadata principals %q", got)
	}
}

// TestClusterOutlivesShortSessions runs a 3-node PLAIN cluster with
// connections.max.reauth.ms=1500 for 5 s of acks=all produces: nodes
// replace their connections to each other before their sessions end
// (peerConn.drainBefore) and kgo re-authenticates in place, so no server
// ever closes a connection for an expired session, and every produce
// succeeds. Without the nodes' renewal their own connections expire.
func TestClusterOutlivesShortSessions(t *testing.T) {
	c := startSecureCluster(t, secureClusterSpec{size: 3, clientListener: "CLIENT", props: func(int) map[string]string {
		return map[string]string{
			"listener.security.protocol.map":                  "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
			"sasl.enabled.mechanisms":                         "PLAIN",
			"sasl.mechanism.inter.broker.protocol":            "PLAIN",
			"sasl.mechanism.controller.protocol":              "PLAIN",
			"listener.name.client.plain.sasl.jaas.config":     plainJAAS,
			"listener.name.controller.plain.sasl.jaas.config": plainJAAS,
			"connections.max.reauth.ms":                       "1500",
			"super.users":                                     "User:broker",
		}
	}})
	cl := c.secureClient(kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopicWith(t, cl, "short", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "short", Value: []byte(fmt.Sprint(n))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		n++
		time.Sleep(20 * time.Millisecond)
	}
	for i, node := range c.nodes {
		if got := node.net.expiredSessions.Load(); got != 0 {
			t.Errorf("node %d closed %d connections whose session expired", i+1, got)
		}
	}
	t.Logf("%d produces over 5 s with 1.5 s sessions", n)
}
