package realnet

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdg "github.com/xdg-go/scram"

	"strand/core/metadata"
	"strand/realnet/auth"
)

// scramUser is a user a test cluster is bootstrapped with.
type scramUser struct {
	name      string
	mechanism metadata.ScramMechanism
	password  string
}

// writeBootstrap writes the bootstrap file `strand format --add-scram`
// writes, for users, into log directory dir.
func writeBootstrap(t *testing.T, dir string, users ...scramUser) {
	t.Helper()
	var records []metadata.Record
	for _, u := range users {
		c, err := auth.NewScramCredential(u.mechanism, u.password, metadata.ScramIterationsMin)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, metadata.NewUserScramCredentialRecord(metadata.ScramUser{Name: u.name, Mechanism: u.mechanism}, c))
	}
	if err := os.MkdirAll(filepath.Join(dir, "metadata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata", metadata.BootstrapFileName), metadata.EncodeBootstrap(records), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scramJAAS is a node's own SCRAM login.
const scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`

// scramFailureDelay is the cluster's connection.failed.authentication.delay.ms.
const scramFailureDelay = 300 * time.Millisecond

// scramReauth is connections.max.reauth.ms for SCRAM-SHA-256 on the
// SASL_PLAINTEXT listener.
const scramReauth = 1500 * time.Millisecond

// startScramCluster runs three nodes whose client and inter-broker
// listener SCRAMTLS is SASL_SSL and whose second client listener SCRAM is
// SASL_PLAINTEXT, both serving SCRAM-SHA-256 and SCRAM-SHA-512; the nodes
// replicate as user broker with SCRAM-SHA-512, bootstrapped into node 1's
// (the controller's) log directory as `strand format --add-scram` does.
// The controller listener is SSL with required client certificates
// (SCRAM cannot serve it): node certificates CN=broker are members too.
func startScramCluster(t *testing.T, pki *testPKI) *testCluster {
	t.Helper()
	node1Dir := t.TempDir()
	writeBootstrap(t, node1Dir,
		scramUser{"broker", metadata.ScramSHA512, "broker-secret"},
		scramUser{"alice", metadata.ScramSHA256, "alice-secret"},
		scramUser{"alice", metadata.ScramSHA512, "alice-secret"})
	return startSecureCluster(t, secureClusterSpec{size: 3, clientListener: "SCRAMTLS", nodeListeners: []string{"SCRAM"},
		props: func(id int) map[string]string {
			cert := pki.issue(t, pkix.Name{CommonName: "broker"}, "127.0.0.1")
			keystore := pki.keystore(t, fmt.Sprintf("node%d", id), cert)
			props := map[string]string{
				"listener.security.protocol.map":                              "SCRAMTLS:SASL_SSL,SCRAM:SASL_PLAINTEXT,CONTROLLER:SSL",
				"inter.broker.listener.name":                                  "SCRAMTLS",
				"listener.name.scramtls.sasl.enabled.mechanisms":              "SCRAM-SHA-256,SCRAM-SHA-512",
				"listener.name.scram.sasl.enabled.mechanisms":                 "SCRAM-SHA-256,SCRAM-SHA-512",
				"sasl.mechanism.inter.broker.protocol":                        "SCRAM-SHA-512",
				"listener.name.scramtls.scram-sha-512.sasl.jaas.config":       scramJAAS,
				"listener.name.scramtls.scram-sha-256.sasl.jaas.config":       scramJAAS,
				"listener.name.scram.scram-sha-512.sasl.jaas.config":          scramJAAS,
				"listener.name.scram.scram-sha-256.sasl.jaas.config":          scramJAAS,
				"listener.name.scram.scram-sha-256.connections.max.reauth.ms": fmt.Sprint(scramReauth.Milliseconds()),
				"ssl.keystore.type":                                           "PEM",
				"ssl.keystore.location":                                       keystore,
				"ssl.truststore.type":                                         "PEM",
				"ssl.truststore.location":                                     pki.caFile,
				"listener.name.controller.ssl.client.auth":                    "required",
				"connection.failed.authentication.delay.ms":                   fmt.Sprint(scramFailureDelay.Milliseconds()),
				"super.users":         "User:broker;User:CN=broker",
				"min.insync.replicas": "3",
			}
			if id == 1 {
				props["log.dirs"] = node1Dir
			}
			return props
		}})
}

// TestScramCluster runs SCRAM end to end on one 3-node cluster whose nodes
// authenticate to each other with SCRAM credentials bootstrapped into the
// metadata log: kgo and kcat over SASL_SSL and SASL_PLAINTEXT with both
// mechanisms, credentials altered and described with kadm, and the
// refusals (wrong password, unknown user, a replayed client-final, too few
// iterations, a deleted user's re-authentication).
func TestScramCluster(t *testing.T) {
	pki := newTestPKI(t)
	c := startScramCluster(t, pki)
	tlsCfg := pki.clientTLS(t, authtestNoCert)
	plainAddrs := func() []string {
		var out []string
		for _, n := range c.nodes {
			out = append(out, n.Addr("SCRAM").String())
		}
		return out
	}
	aliceTLS := c.secureClient(kgoTLS(tlsCfg), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	// min.insync.replicas=3: an acks=all produce is acknowledged only once
	// both followers fetched it, over SCRAMTLS as user broker.
	createTopicWith(t, aliceTLS, "scram", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("kgo", func(t *testing.T) {
		alicePlain := newKgo(t, plainAddrs(), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
		for i := range 20 {
			cl := aliceTLS
			if i%2 == 1 {
				cl = alicePlain
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "scram", Value: []byte(fmt.Sprintf("kgo-%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		got := consumeValues(t, ctx, newKgo(t, plainAddrs(), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
			kgo.ConsumeTopics("scram"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 20)
		if !strings.Contains(got, "kgo-0\n") || !strings.Contains(got, "kgo-19\n") {
			t.Fatalf("consumed:\n%s", got)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		if kcatOrSkip(t) == "" {
			return
		}
		overTLS := []string{"-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + pki.caFile,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		plain := []string{"-X", "security.protocol=sasl_plaintext",
			"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		kcatAt(t, c.clientAddrs(), []byte("kcat-tls\n"), append(overTLS, "-P", "-t", "scram", "-X", "acks=all")...)
		kcatAt(t, plainAddrs(), []byte("kcat-plain\n"), append(plain, "-P", "-t", "scram", "-X", "acks=all")...)
		consume := func(addrs, args []string) string {
			return string(kcatAt(t, addrs, nil, append(args, "-C", "-t", "scram", "-o", "beginning", "-e", "-f", "%s\n")...))
		}
		for what, out := range map[string]string{"SASL_SSL": consume(c.clientAddrs(), overTLS), "SASL_PLAINTEXT": consume(plainAddrs(), plain)} {
			for _, v := range []string{"kcat-tls", "kcat-plain"} {
				if !strings.Contains(out, v+"\n") {
					t.Fatalf("kcat %s consume lacks %q:\n%s", what, v, out)
				}
			}
		}
	})

	t.Run("refusals", func(t *testing.T) {
		addr := c.nodes[1].Addr("SCRAM")
		generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		// exchange runs SCRAM-SHA-256 on a fresh connection and returns
		// the final answer, how long it took, and the client-final sent.
		exchange := func(user, password string, replay string) (*kmsg.SASLAuthenticateResponse, time.Duration, string, *rawConn) {
			rc := dialRaw(t, addr)
			if hs := sendSaslHandshake(t, rc, 1, 1, "SCRAM-SHA-256"); hs.ErrorCode != 0 {
				t.Fatalf("handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
			}
			client, _ := xdg.SHA256.NewClientUnprepped(user, password, "")
			conv := client.NewConversation()
			first, _ := conv.Step("")
			resp, _ := sendSaslAuthenticate(t, rc, 2, []byte(first))
			if resp.ErrorCode != 0 {
				t.Fatalf("%s: client-first refused: %v", user, kerr.ErrorForCode(resp.ErrorCode))
			}
			final, err := conv.Step(string(resp.SASLAuthBytes))
			if err != nil {
				t.Fatal(err)
			}
			if replay != "" {
				final = replay
			}
			resp, took := sendSaslAuthenticate(t, rc, 3, []byte(final))
			return resp, took, final, rc
		}
		ok, _, final, _ := exchange("alice", "alice-secret", "")
		if ok.ErrorCode != 0 {
			t.Fatalf("alice: %v", kerr.ErrorForCode(ok.ErrorCode))
		}
		for _, c := range []struct{ what, user, password, replay string }{
			{"wrong password", "alice", "nope", ""},
			{"unknown user", "mallory", "alice-secret", ""},
			{"replayed client-final", "alice", "alice-secret", final},
		} {
			resp, took, _, rc := exchange(c.user, c.password, c.replay)
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != generic {
				t.Errorf("%s: error %v %v, want SASL_AUTHENTICATION_FAILED with %q", c.what, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, generic)
			}
			if took < scramFailureDelay {
				t.Errorf("%s: answered after %v, before connection.failed.authentication.delay.ms %v", c.what, took, scramFailureDelay)
			}
			expectClosed(t, rc, c.what)
		}
		// kgo's delegation-token login is refused too.
		token := newKgo(t, plainAddrs(), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}.AsSha256Mechanism()))
		shortCtx, shortCancel := context.WithTimeout(ctx, 10*time.Second)
		defer shortCancel()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(shortCtx, token); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("tokenauth=true: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("alter, describe, and a deleted user's re-authentication", func(t *testing.T) {
		adm := kadm.NewClient(aliceTLS)
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-secret"}})
		if err != nil || altered["carol"].Err != nil {
			t.Fatalf("create carol: %v %+v", err, altered)
		}
		// Usable on a broker once it applied the record: each broker
		// describes carol from its own metadata.
		for i := range c.nodes {
			waitUntil(t, fmt.Sprintf("node %d describes carol", i+1), 10*time.Second, func() bool {
				cl := newKgo(t, []string{c.nodes[i].Addr("SCRAMTLS").String()}, kgoTLS(tlsCfg),
					kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
				defer cl.Close()
				req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
				req.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "carol"}}
				resp, err := req.RequestWith(ctx, cl.Broker(i+1))
				return err == nil && len(resp.Results) == 1 && resp.Results[0].ErrorCode == 0 &&
					len(resp.Results[0].CredentialInfos) == 1 && resp.Results[0].CredentialInfos[0].Iterations == 8192
			})
		}
		described, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil || len(described["alice"].CredInfos) != 2 || described["broker"].Err != nil {
			t.Fatalf("describe all: %v %+v", err, described)
		}

		// Too few iterations, sent as salt and salted password (kadm
		// checks the count itself for a password).
		weak, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 1000,
			Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}})
		if err != nil || !errors.Is(weak["dave"].Err, kerr.UnacceptableCredential) {
			t.Fatalf("1000 iterations: %v %+v", err, weak)
		}

		carol := newKgo(t, []string{c.nodes[2].Addr("SCRAM").String()}, kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()))
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, carol); err != nil {
			t.Fatalf("carol: %v", err)
		}
		if deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil); err != nil || deleted["carol"].Err != nil {
			t.Fatalf("delete carol: %v %+v", err, deleted)
		}
		// carol's connection outlives the deletion until its session ends
		// (connections.max.reauth.ms); her re-authentication then fails.
		time.Sleep(scramReauth + 200*time.Millisecond)
		shortCtx, shortCancel := context.WithTimeout(ctx, 10*time.Second)
		defer shortCancel()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(shortCtx, carol.Broker(3)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("carol after her deletion: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
}

// newKgo is a kgo client of addrs, closed with the test.
func newKgo(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeValues polls cl until it has n records and returns their values,
// one a line.
func consumeValues(t *testing.T, ctx context.Context, cl *kgo.Client, n int) string {
	t.Helper()
	var b strings.Builder
	got := 0
	for got < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			b.WriteString(string(r.Value) + "\n")
		})
	}
	return b.String()
}
