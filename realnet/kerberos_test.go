package realnet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"

	"strand/realnet/authtest"
)

// The package's KDC: one MIT krb5kdc for every Kerberos test here, in a
// fresh realm, started on first use and stopped by TestMain.
var realnetKDC struct {
	once sync.Once
	kdc  *authtest.KDC
	dir  string
	err  error
}

const realnetRealm = "STRAND.TEST"

// kdcPrincipals are the principals the tests use: a host principal per
// node address (each node its own keytab), a client, and one whose tickets
// end at once.
var kdcPrincipals = []string{"kafka/127.0.0.1", "kafka/127.0.0.2", "kafka/127.0.0.3", "alice"}

// testKDC starts the package's KDC once, or skips where MIT Kerberos is
// not installed (.ci/run installs it).
func testKDC(t *testing.T) *authtest.KDC {
	t.Helper()
	if err := authtest.KDCAvailable(); err != nil {
		t.Skip(err)
	}
	realnetKDC.once.Do(func() {
		dir, err := os.MkdirTemp("", "strand-realnet-kdc-")
		if err != nil {
			realnetKDC.err = err
			return
		}
		realnetKDC.dir = dir
		k, err := authtest.StartKDC(dir, realnetRealm)
		if err != nil {
			realnetKDC.err = err
			return
		}
		realnetKDC.kdc = k
		for _, p := range kdcPrincipals {
			if realnetKDC.err = k.AddPrincipal(p, "", ""); realnetKDC.err != nil {
				return
			}
			if realnetKDC.err = k.Keytab(kdcKeytab(p), p); realnetKDC.err != nil {
				return
			}
		}
	})
	if realnetKDC.err != nil {
		t.Fatal(realnetKDC.err)
	}
	return realnetKDC.kdc
}

func stopRealnetKDC() {
	if realnetKDC.kdc != nil {
		realnetKDC.kdc.Stop()
	}
	if realnetKDC.dir != "" {
		os.RemoveAll(realnetKDC.dir)
	}
}

// kdcKeytab is principal's keytab file.
func kdcKeytab(principal string) string {
	return filepath.Join(realnetKDC.dir, strings.ReplaceAll(principal, "/", "_")+".keytab")
}

// kerberosClient is a gokrb5 client logged in as principal with its
// keytab, for franz-go's sasl/kerberos.
func kerberosClient(t *testing.T, principal string) *client.Client {
	t.Helper()
	k := testKDC(t)
	conf, err := krbconfig.Load(k.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(kdcKeytab(principal))
	if err != nil {
		t.Fatal(err)
	}
	kt := keytab.New()
	if err := kt.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	cl := client.NewWithKeytab(principal, k.Realm, kt, conf, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Destroy)
	return cl
}

// kerberosNodeProps configures node id with the design's shorthand: its
// own host principal kafka/127.0.0.<id> and keytab, every listener
// SASL_PLAINTEXT with GSSAPI.
func kerberosNodeProps(t *testing.T) func(id int) map[string]string {
	k := testKDC(t)
	return func(id int) map[string]string {
		p := fmt.Sprintf("kafka/127.0.0.%d", id)
		return map[string]string{
			"authentication": "kerberos",
			"principal":      k.Principal(p),
			"keytab":         kdcKeytab(p),
		}
	}
}

// loopbackAvailable skips unless 127.0.0.2 and .3 can be bound (Linux
// routes all of 127/8 to lo).
func loopbackAvailable(t *testing.T) {
	t.Helper()
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Skipf("cannot bind %s: %v", ip, err)
		}
		l.Close()
	}
}

// TestKerberosClusterKcatAndFranzGo runs the design's strong mode: three
// nodes on 127.0.0.1-3, configured with authentication=kerberos, each
// logging in with its own principal kafka/127.0.0.<n> and keytab; every
// listener is SASL_PLAINTEXT/GSSAPI, so registration, heartbeats, the
// metadata log and replication all authenticate with service tickets
// (Strand's initiator, mutual authentication). franz-go's sasl/kerberos
// and kcat (librdkafka with Cyrus SASL's GSSAPI plugin, which asks for
// mutual authentication and so checks Strand's AP-REP and Wrap tokens)
// produce RF 3 acks=all and consume back as alice.
func TestKerberosClusterKcatAndFranzGo(t *testing.T) {
	k := testKDC(t)
	loopbackAvailable(t)
	c := startSecureCluster(t, secureClusterSpec{
		size: 3, clientListener: "BROKER", hosts: []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"},
		props: kerberosNodeProps(t), krb5Config: k.Krb5Conf,
	})
	alice := kgo.SASL(kerberos.Auth{Client: kerberosClient(t, "alice"), Service: "kafka"}.AsMechanism())
	cl := c.secureClient(alice, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopicWith(t, cl, "krb", 3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]bool{}
	for i := range 90 {
		v := fmt.Sprintf("kgo-%d", i)
		want[v] = true
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "krb", Partition: int32(i % 3), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if kcatOrSkip(t) != "" {
		gssapi := kcatGSSAPIArgs(k, "alice")
		kcatEnv(t, kcatGSSAPIEnv(t, k), c.clientAddrs(), []byte("kcat-1\nkcat-2\n"), append(gssapi, "-P", "-t", "krb", "-p", "2", "-X", "acks=all")...)
		out := string(kcatEnv(t, kcatGSSAPIEnv(t, k), c.clientAddrs(), nil, append(gssapi, "-C", "-t", "krb", "-p", "2", "-o", "beginning", "-e", "-f", "%s\n")...))
		for _, v := range []string{"kcat-1", "kcat-2", "kgo-2", "kgo-89"} {
			if !strings.Contains(out, v+"\n") {
				t.Fatalf("kcat GSSAPI consume lacks %q:\n%s", v, out)
			}
		}
		want["kcat-1"], want["kcat-2"] = true, true
	}
	consumer := c.secureClient(alice, kgo.ConsumeTopics("krb"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
}

// kcatGSSAPIArgs are kcat's settings for GSSAPI as principal, logging in
// from its keytab with librdkafka's kinit command.
func kcatGSSAPIArgs(k *authtest.KDC, principal string) []string {
	return []string{"-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=GSSAPI",
		"-X", "sasl.kerberos.service.name=kafka", "-X", "sasl.kerberos.principal=" + k.Principal(principal),
		"-X", "sasl.kerberos.keytab=" + kdcKeytab(principal)}
}

// kcatGSSAPIEnv points kcat's Kerberos library at the test realm and a
// credentials cache of its own.
func kcatGSSAPIEnv(t *testing.T, k *authtest.KDC) []string {
	return []string{"KRB5_CONFIG=" + k.Krb5Conf, "KRB5CCNAME=FILE:" + filepath.Join(t.TempDir(), "ccache")}
}

// kcatEnv runs kcat against brokers with env added.
func kcatEnv(t *testing.T, env, brokers []string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	args = append([]string{"-b", strings.Join(brokers, ",")}, args...)
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr (last 2 KiB):\n%s", strings.Join(args, " "), err, lastBytes(stderr.Bytes(), 2048))
	}
	return stdout.Bytes()
}

// gssapiNetwork serves a SASL_PLAINTEXT/GSSAPI listener as
// kafka/127.0.0.1 with the recorder behind it.
func gssapiNetwork(t *testing.T, extra map[string]string) *authNetwork {
	k := testKDC(t)
	props := map[string]string{
		"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "GSSAPI",
		"sasl.kerberos.service.name":     "kafka",
		"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": fmt.Sprintf(
			`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`,
			kdcKeytab("kafka/127.0.0.1"), k.Principal("kafka/127.0.0.1")),
		"connection.failed.authentication.delay.ms": "0",
	}
	for key, v := range extra {
		props[key] = v
	}
	return startAuthNetwork(t, "SASL_PLAINTEXT", props, k.Krb5Conf)
}

// authenticateGSSAPI authenticates rc as alice with franz-go's kerberos
// mechanism over raw SaslAuthenticate v2 requests and returns the last
// answer.
func authenticateGSSAPI(t *testing.T, rc *rawConn, firstID int32) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	mech := kerberos.Auth{Client: kerberosClient(t, "alice"), Service: "kafka"}.AsMechanism()
	if hs := sendSaslHandshake(t, rc, firstID, 1, "GSSAPI"); hs.ErrorCode != 0 {
		t.Fatalf("handshake: %d", hs.ErrorCode)
	}
	session, token, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	id := firstID
	for {
		id++
		resp, _ := sendSaslAuthenticate(t, rc, id, token)
		if resp.ErrorCode != 0 || token == nil {
			return resp
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		if done && next == nil {
			return resp
		}
		token = next
		if done {
			id++
			resp, _ := sendSaslAuthenticate(t, rc, id, token)
			return resp
		}
	}
}

// TestKerberosPrincipalAndSessionLifetime: a GSSAPI connection's requests
// carry User:alice (sasl.kerberos.principal.to.local.rules' DEFAULT), and
// SaslAuthenticate's SessionLifetimeMillis is bounded by the ticket's end
// (the KDC's 10 h), or by connections.max.reauth.ms when it is shorter.
func TestKerberosPrincipalAndSessionLifetime(t *testing.T) {
	an := gssapiNetwork(t, nil)
	rc := dialRaw(t, an.addr)
	resp := authenticateGSSAPI(t, rc, 1)
	if resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	if life := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond; life < 9*time.Hour || life > 10*time.Hour {
		t.Errorf("session lifetime %v, want the ticket's (about 10 h)", life)
	}
	meta := kmsg.NewPtrMetadataRequest()
	rc.send(10, meta)
	rc.receive(10, meta)
	if got := an.recorder.principals(kmsg.Metadata.Int16()); len(got) != 1 || got[0] != "User:alice" {
		t.Errorf("principals %v, want User:alice", got)
	}

	short := gssapiNetwork(t, map[string]string{"connections.max.reauth.ms": "60000"})
	rc = dialRaw(t, short.addr)
	if resp := authenticateGSSAPI(t, rc, 1); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 60000 {
		t.Errorf("with connections.max.reauth.ms=60000: error %d lifetime %d", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
}

// TestServeWithBadKeytabExits runs `strand serve` as a process with the
// design's kerberos mode and a keytab the KDC refuses (its key was changed
// after the keytab was written), then with a keytab that does not exist:
// each exits non-zero at once, with one line naming the principal, the
// keytab and the KDC's answer (or the missing file).
func TestServeWithBadKeytabExits(t *testing.T) {
	k := testKDC(t)
	bin := buildStrand(t)
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.keytab")
	if err := k.AddPrincipal("kafka/stale", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := k.Keytab(stale, "kafka/stale"); err != nil {
		t.Fatal(err)
	}
	if err := k.RandomizeKey("kafka/stale"); err != nil {
		t.Fatal(err)
	}
	principal := k.Principal("kafka/stale")
	for _, c := range []struct {
		keytab, answer string
	}{
		{stale, "PREAUTH_FAILED"},
		{filepath.Join(dir, "missing.keytab"), "no such file"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cfg := filepath.Join(t.TempDir(), "server.properties")
		props := fmt.Sprintf("process.roles=broker,controller\nnode.id=1\nlisteners=BROKER://127.0.0.1:0,CONTROLLER://127.0.0.1:%d\n"+
			"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:%d\nlog.dirs=%s\n"+
			"authentication=kerberos\nprincipal=%s\nkeytab=%s\n", port, port, t.TempDir(), principal, c.keytab)
		if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg)
		cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		timedOut := ctx.Err() == context.DeadlineExceeded
		cancel()
		if timedOut {
			t.Fatalf("keytab %s: strand serve still ran after 30 s:\n%s", c.keytab, stderr.String())
		}
		if cmd.ProcessState.ExitCode() == 0 {
			t.Fatalf("keytab %s: exited 0, want non-zero\n%s", c.keytab, stderr.String())
		}
		var lines []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "level=ERROR") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], principal) || !strings.Contains(lines[0], c.keytab) || !strings.Contains(lines[0], c.answer) {
			t.Errorf("keytab %s: want one ERROR line naming %s, the keytab and %q; got:\n%s", c.keytab, principal, c.answer, stderr.String())
		}
	}
}
