package realnet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/realnet/authtest"
)

// tlsClusterProps secures every listener of a test cluster with TLS and
// client certificates: nodes authenticate to each other with their own
// certificates (CN=node<id>), as clients do.
func tlsClusterProps(t *testing.T, pki *testPKI) func(id int) map[string]string {
	return func(id int) map[string]string {
		cert := pki.issue(t, pkix.Name{CommonName: fmt.Sprintf("node%d", id), Organization: []string{"Strand"}}, "127.0.0.1")
		return map[string]string{
			"listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
			"ssl.keystore.type":              "PEM",
			"ssl.keystore.location":          pki.keystore(t, fmt.Sprintf("node%d", id), cert),
			"ssl.truststore.type":            "PEM",
			"ssl.truststore.location":        pki.caFile,
			"ssl.client.auth":                "required",
			"ssl.principal.mapping.rules":    "RULE:^CN=([^,]+),O=Strand$/$1/,DEFAULT",
			"super.users":                    "User:node1;User:node2;User:node3",
		}
	}
}

// TestTLSClusterServesKgoAndKcat runs a 3-node cluster whose every
// listener, client, inter-broker and controller, is TLS with required
// client certificates: registration, heartbeats and replication go over
// TLS with each node's certificate. kgo and kcat (librdkafka, OpenSSL)
// produce and consume with a client certificate, RF 3 acks=all, and a
// 100 KiB record is fetched back whole: TLS connections read Fetch regions
// with pread, not sendfile. A client without a certificate is refused.
func TestTLSClusterServesKgoAndKcat(t *testing.T) {
	pki := newTestPKI(t)
	c := startSecureCluster(t, secureClusterSpec{size: 3, clientListener: "SSL", props: tlsClusterProps(t, pki)})
	alice := pki.issue(t, pkix.Name{CommonName: "alice", Organization: []string{"Strand"}})
	cl := c.secureClient(kgoTLS(pki.clientTLS(t, alice)), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopicWith(t, cl, "tls", 3, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16)
	var want []string
	for i := range 200 {
		v := fmt.Sprintf("kgo-%03d", i)
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tls", Partition: int32(i % 3), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tls", Partition: 0, Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce 100 KiB: %v", err)
	}

	if path := kcatOrSkip(t); path != "" {
		certFile, keyFile := pki.files(t, "alice", alice)
		ssl := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + pki.caFile,
			"-X", "ssl.certificate.location=" + certFile, "-X", "ssl.key.location=" + keyFile}
		var lines []string
		for i := range 50 {
			lines = append(lines, fmt.Sprintf("kcat-%02d", i))
		}
		kcatAt(t, c.clientAddrs(), []byte(strings.Join(lines, "\n")+"\n"), append(ssl, "-P", "-t", "tls", "-p", "1", "-X", "acks=all")...)
		out := string(kcatAt(t, c.clientAddrs(), nil, append(ssl, "-C", "-t", "tls", "-p", "1", "-o", "beginning", "-e", "-f", "%s\n")...))
		for _, l := range lines {
			if !strings.Contains(out, l+"\n") {
				t.Fatalf("kcat over TLS did not read back %q:\n%s", l, out)
			}
		}
		want = append(want, lines...)
	}

	consumer := c.secureClient(kgoTLS(pki.clientTLS(t, alice)), kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1<<20))
	got := map[string]bool{}
	sawBig := false
	for len(got) < len(want) || !sawBig {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records (100 KiB one: %v): %v", len(got), len(want), sawBig, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == len(big) {
				if !bytes.Equal(r.Value, big) {
					t.Fatal("the 100 KiB record came back altered")
				}
				sawBig = true
				return
			}
			got[string(r.Value)] = true
		})
	}
	for _, v := range want {
		if !got[v] {
			t.Fatalf("record %q not consumed", v)
		}
	}

	// No certificate: the handshake fails, nothing is served.
	anon := c.secureClient(kgoTLS(pki.clientTLS(t, authtest.Certificate{})), kgo.RetryTimeout(2*time.Second))
	shortCtx, shortCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shortCancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(shortCtx, anon); err == nil {
		t.Fatal("a client without a certificate was served on a listener with ssl.client.auth=required")
	}
}

// secureClient is a kgo client of the cluster's client listener.
func (c *testCluster) secureClient(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.clientAddrs()...), kgo.DisableIdempotentWrite()}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// kcatOrSkip returns kcat's path, or "" (logged) when it is missing: the
// kgo half of a test still runs.
func kcatOrSkip(t *testing.T) string {
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Log("kcat is not installed: skipping the librdkafka half (apt-get install -y kcat)")
		return ""
	}
	return path
}

// TestCertificatePrincipal checks the principal a TLS connection's
// requests carry: the client certificate's RFC 2253 subject mapped by
// ssl.principal.mapping.rules (User:alice), ANONYMOUS without a
// certificate on ssl.client.auth=requested, and a connection closed when
// no rule maps the certificate.
func TestCertificatePrincipal(t *testing.T) {
	pki := newTestPKI(t)
	server := pki.issue(t, pkix.Name{CommonName: "server"}, "127.0.0.1")
	an := startAuthNetwork(t, "SSL", map[string]string{
		"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.certificate.chain": server.ChainPEM,
		"ssl.keystore.key":               server.KeyPEM,
		"ssl.truststore.type":            "PEM",
		"ssl.truststore.certificates":    pki.ca.PEM,
		"ssl.client.auth":                "requested",
		"ssl.principal.mapping.rules":    `RULE:^CN=([^,]+),OU=eng,O=Strand$/$1/L, RULE:^CN=([^,]+),OU=ops\\,west,O=Strand$/ops-$1/`,
	}, "")
	metadata := func(cert authtest.Certificate) error {
		cfg := pki.clientTLS(t, cert)
		cfg.ServerName = "127.0.0.1"
		c, err := tls.Dial("tcp", an.addr.String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		rc := &rawConn{t: t, c: c}
		req := kmsg.NewPtrMetadataRequest()
		rc.send(1, req)
		_, err = rc.readFrame(10 * time.Second)
		return err
	}
	alice := pki.issue(t, pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strand"}})
	bob := pki.issue(t, pkix.Name{CommonName: "bob", OrganizationalUnit: []string{"ops,west"}, Organization: []string{"Strand"}})
	for _, cert := range []authtest.Certificate{alice, bob, {}} {
		if err := metadata(cert); err != nil {
			t.Fatalf("metadata: %v", err)
		}
	}
	got := an.recorder.principals(kmsg.Metadata.Int16())
	want := []string{"User:alice", "User:ops-bob", env.AnonymousPrincipal}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("principals %v, want %v", got, want)
	}
	carol := pki.issue(t, pkix.Name{CommonName: "carol", Organization: []string{"Other"}})
	if err := metadata(carol); err == nil {
		t.Error("a certificate no rule maps was served")
	}
}

// TestTLSProtocolVersions: ssl.enabled.protocols bounds what is
// negotiated: a TLSv1.3-only listener refuses a TLS 1.2 client, a
// TLSv1.2-only one negotiates 1.2 with a client offering both.
func TestTLSProtocolVersions(t *testing.T) {
	pki := newTestPKI(t)
	server := pki.issue(t, pkix.Name{CommonName: "server"}, "127.0.0.1")
	serve := func(protocols string) net.Addr {
		return startAuthNetwork(t, "SSL", map[string]string{
			"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
			"ssl.keystore.type":              "PEM",
			"ssl.keystore.certificate.chain": server.ChainPEM,
			"ssl.keystore.key":               server.KeyPEM,
			"ssl.enabled.protocols":          protocols,
		}, "").addr
	}
	only13 := serve("TLSv1.3")
	cfg := pki.clientTLS(t, authtest.Certificate{})
	cfg.MaxVersion = tls.VersionTLS12
	if c, err := tls.Dial("tcp", only13.String(), cfg); err == nil {
		c.Close()
		t.Error("a TLSv1.3-only listener accepted a TLS 1.2 client")
	}
	only12 := serve("TLSv1.2")
	c, err := tls.Dial("tcp", only12.String(), pki.clientTLS(t, authtest.Certificate{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := c.ConnectionState().Version; v != tls.VersionTLS12 {
		t.Errorf("negotiated %x, want TLS 1.2", v)
	}
}

// TestStalledHandshakeIsClosed: a connection that opens a TLS listener
// and sends nothing is closed at authenticationTimeout.
func TestStalledHandshakeIsClosed(t *testing.T) {
	pki := newTestPKI(t)
	server := pki.issue(t, pkix.Name{CommonName: "server"}, "127.0.0.1")
	an := startAuthNetwork(t, "SSL", map[string]string{
		"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.certificate.chain": server.ChainPEM,
		"ssl.keystore.key":               server.KeyPEM,
	}, "", func(n *Network) { n.authenticationTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", an.addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a stalled handshake was not closed at the bound (read %v after %v)", err, time.Since(start))
	}
}

// TestMetadataNamesTheRequestsListener: a node with a PLAINTEXT and an SSL
// client listener answers Metadata, FindCoordinator and DescribeCluster
// with the endpoints of the listener the request came in on, as Kafka
// does: a TLS client is sent to TLS ports, never to the first advertised
// listener's PLAINTEXT port.
func TestMetadataNamesTheRequestsListener(t *testing.T) {
	pki := newTestPKI(t)
	server := pki.issue(t, pkix.Name{CommonName: "node1"}, "127.0.0.1")
	plainL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := startSecureCluster(t, secureClusterSpec{size: 1, clientListener: "SSL", props: func(int) map[string]string {
		return map[string]string{
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name":     "PLAINTEXT",
			"ssl.keystore.type":              "PEM",
			"ssl.keystore.certificate.chain": server.ChainPEM,
			"ssl.keystore.key":               server.KeyPEM,
		}
	}, extraListeners: map[string]net.Listener{"PLAINTEXT": plainL}})
	sslAddr := c.nodes[0].Addr("SSL").(*net.TCPAddr)
	cl := c.secureClient(kgoTLS(pki.clientTLS(t, authtest.Certificate{})))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Port != int32(sslAddr.Port) {
		t.Fatalf("Metadata on SSL names %+v, want port %d", meta.Brokers, sslAddr.Port)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || len(dc.Brokers) != 1 || dc.Brokers[0].Port != int32(sslAddr.Port) {
		t.Fatalf("DescribeCluster on SSL: %+v %v", dc, err)
	}
	plainCl := c.secureClient(kgo.SeedBrokers(plainL.Addr().String()))
	meta, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, plainCl)
	if err != nil || len(meta.Brokers) != 1 || meta.Brokers[0].Port != int32(plainL.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("Metadata on PLAINTEXT: %+v %v", meta, err)
	}
}

// countingConn is a net.Conn that is not TCP (as a tls.Conn is not) and
// counts its Writes.
type countingConn struct {
	net.Conn
	writes int
	data   []byte
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes++
	c.data = append(c.data, b...)
	return len(b), nil
}

// TestTLSWriterJoinsPieces: on a connection without writev (TLS), the
// response writer joins a response's byte pieces into one Write, so that
// tls.Conn makes one record of them, not one per piece; the bytes are
// unchanged.
func TestTLSWriterJoinsPieces(t *testing.T) {
	conn := &countingConn{}
	w := newResponseWriter(conn)
	var want []byte
	var pieces []env.FramePiece
	for i := range 12 {
		b := bytes.Repeat([]byte{byte(i)}, 10+i)
		want = append(want, b...)
		pieces = append(pieces, env.FramePiece{Bytes: b})
	}
	w.add(slot{pieced: env.Frame{Pieces: pieces}})
	if err := w.run(func(func()) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if conn.writes != 1 || !bytes.Equal(conn.data, want) {
		t.Fatalf("%d writes of %d bytes, want 1 write of the %d bytes in order", conn.writes, len(conn.data), len(want))
	}
}
