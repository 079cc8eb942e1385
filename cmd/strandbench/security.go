package main

// The security section (authentication issue §5): one Strand process with
// a PLAINTEXT, an SSL and a SASL_PLAINTEXT listener side by side, so that
// every row is a ratio to plaintext measured in the same run on the same
// broker. Per repetition, interleaved: kgo produces 100-byte records for
// -broker-duration on each listener (acks=1, the broker's CPU per record
// from /proc), then reads the topic whole back over PLAINTEXT and over SSL.
// SSL costs the broker the record bytes' encryption (and, for Fetch, the
// copy sendfile saves on plaintext); SASL/PLAIN shows what authentication
// costs per request after the handshake (nothing is expected: the reader
// checks one state per request). Then new authenticated connections per
// second, one after another for connectionsDuration each: TCP plus
// ApiVersions on PLAINTEXT, a TLS handshake, SASL/PLAIN, SASL/SCRAM-SHA-256
// and SCRAM-SHA-512 (credentials of 4096 iterations bootstrapped with
// `strand format --add-scram`; the client derives the salted password on
// every connection, as Kafka's clients do) and, where MIT Kerberos is
// installed, SASL/GSSAPI against a KDC started for the run (the client's
// service ticket is fetched once and cached, as clients do; each
// connection sends a fresh AP-REQ the broker verifies). Each connection
// row is also given as a ratio to the PLAINTEXT row of the same run.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strand/core/env"
	"strand/core/wire"
	"strand/realnet/authtest"
)

const (
	// tlsCPURatioMax is the issue's goal: TLS costs at most 1.5× the
	// plaintext broker CPU per record at 100-byte records.
	tlsCPURatioMax = 1.5
	// securityValueBytes is the record size of the goal.
	securityValueBytes = 100
	// connectionsDuration is each connection-rate run.
	connectionsDuration = time.Second
	securityRealm       = "STRAND.BENCH"
)

// securityProfile keeps the security node's CPU profile.
var securityProfile = flag.String("security-profile", "", "security section: write the broker's CPU profile to this file")

// securityListener is one of the section's listeners and how a client
// reaches it.
type securityListener struct {
	name      string
	bootstrap []string
	opts      []kgo.Opt
}

// securityNode is the section's Strand process and its clients' settings.
type securityNode struct {
	cl      *cluster
	plain   securityListener
	tls     securityListener
	sasl    securityListener
	tlsCfg  *tls.Config
	kdc     *authtest.KDC
	krbConf *krbconfig.Config
	dir     string
}

func runSecuritySection(env *benchEnv) (met bool, err error) {
	strandBin, err := filepath.Abs(brokerFlags.strandBin)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(strandBin); err != nil {
		return false, fmt.Errorf("-strand %s: %w (run make build)", brokerFlags.strandBin, err)
	}
	dir := filepath.Join(env.root, "security")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	n, err := startSecurityNode(strandBin, dir)
	if err != nil {
		return false, err
	}
	defer func() {
		err = errors.Join(err, n.cl.stop())
		if n.kdc != nil {
			n.kdc.Stop()
		}
	}()

	listeners := []securityListener{n.plain, n.tls, n.sasl}
	produce := make([][]produceResult, len(listeners))
	topic := func(i int) string { return fmt.Sprintf("bench-security-%d", i) }
	for i := range listeners {
		if err := n.cl.createTopic(topic(i), 1); err != nil {
			return false, err
		}
	}
	consume := make([][]produceResult, 2) // PLAINTEXT and SSL reading the PLAINTEXT topic
	var endOffset int64
	for rep := range brokerFlags.reps {
		fmt.Printf("produce %d B, run %d of %d:", securityValueBytes, rep+1, brokerFlags.reps)
		for i, l := range listeners {
			p, err := produceFor(n.cl, topic(i), securityValueBytes, brokerFlags.duration,
				produceSettings{bootstrap: l.bootstrap, extra: l.opts})
			if err != nil {
				return false, fmt.Errorf("produce on %s: %w", l.name, err)
			}
			fmt.Printf(" %s %.0f rec/s", l.name, p.recordsPerSec())
			produce[i] = append(produce[i], p)
			if i == 0 {
				endOffset += p.records + 1
			}
		}
		fmt.Println()
	}
	for range brokerFlags.reps {
		for i, l := range listeners[:2] {
			r, err := consumeMeasured(n.cl, l, topic(0), endOffset)
			if err != nil {
				return false, fmt.Errorf("consume on %s: %w", l.name, err)
			}
			consume[i] = append(consume[i], r)
		}
	}
	bytesPerRecord, err := logBytesPerRecord(filepath.Join(dir, "data"), topic(0), endOffset)
	if err != nil {
		return false, err
	}
	sealSec, err := sealSecPerMillion(bytesPerRecord)
	if err != nil {
		return false, err
	}
	conns, err := measureConnections(n)
	if err != nil {
		return false, err
	}
	return printSecurityResults(listeners, produce, consume, sealLimit{bytesPerRecord, sealSec}, conns), nil
}

// startSecurityNode makes the certificates (and the KDC, where MIT
// Kerberos is installed) and starts one Strand node with the three
// listeners.
func startSecurityNode(strandBin, dir string) (*securityNode, error) {
	n := &securityNode{dir: dir}
	ca, err := authtest.NewCA("strandbench CA")
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue(pkix.Name{CommonName: "strandbench"}, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	keystore, err := authtest.WriteFile(dir, "node.pem", cert.KeystorePEM())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(ca.PEM))
	n.tlsCfg = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}

	mechanisms := "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
	var gssapiJAAS string
	var procEnv []string
	if authtest.KDCAvailable() == nil {
		if n.kdc, err = authtest.StartKDC(dir, securityRealm); err != nil {
			return nil, fmt.Errorf("KDC: %w", err)
		}
		for _, p := range []string{"kafka/127.0.0.1", "alice"} {
			if err := n.kdc.AddPrincipal(p, "", ""); err != nil {
				return nil, err
			}
			if err := n.kdc.Keytab(filepath.Join(dir, strings.ReplaceAll(p, "/", "_")+".keytab"), p); err != nil {
				return nil, err
			}
		}
		if n.krbConf, err = krbconfig.Load(n.kdc.Krb5Conf); err != nil {
			return nil, err
		}
		mechanisms += ",GSSAPI"
		gssapiJAAS = fmt.Sprintf("listener.name.sasl.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab=\"%s\" principal=\"%s\";\nsasl.kerberos.service.name=kafka\n",
			filepath.Join(dir, "kafka_127.0.0.1.keytab"), n.kdc.Principal("kafka/127.0.0.1"))
		procEnv = []string{"KRB5_CONFIG=" + n.kdc.Krb5Conf}
	} else {
		fmt.Println("MIT Kerberos is not installed: no GSSAPI row (apt-get install -y krb5-kdc krb5-admin-server krb5-user)")
	}

	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	props := fmt.Sprintf(`node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://%[1]s,SSL://%[2]s,SASL://%[3]s,CONTROLLER://%[4]s
advertised.listeners=PLAINTEXT://%[1]s,SSL://%[2]s,SASL://%[3]s
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=1@%[4]s
log.dirs=%[5]s
num.partitions=1
offsets.topic.replication.factor=1
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=%[6]s
listener.name.sasl.sasl.enabled.mechanisms=%[7]s
listener.name.sasl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
listener.name.sasl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
%[8]s`, addr(0), addr(1), addr(2), addr(3), filepath.Join(dir, "data"), keystore, mechanisms, gssapiJAAS)
	configPath := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(configPath, []byte(props), 0o644); err != nil {
		return nil, err
	}
	format := exec.Command(strandBin, "format", "--config", configPath,
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]", "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]")
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("strand format --add-scram: %w: %s", err, out)
	}
	p := &brokerProcess{name: "security node", logPath: filepath.Join(dir, "stderr.log"), env: procEnv}
	args := []string{"serve", "--config", configPath}
	if *securityProfile != "" {
		args = append(args, "--cpuprofile", *securityProfile)
	}
	if err := p.start(strandBin, args...); err != nil {
		return nil, err
	}
	n.cl = &cluster{name: "security node", processes: []*brokerProcess{p}, bootstrap: []string{addr(0)}, dataDirs: []string{filepath.Join(dir, "data")}}
	if err := n.cl.awaitReady(1); err != nil {
		return nil, errors.Join(err, n.cl.stop())
	}
	n.cl.startSampling()
	n.plain = securityListener{name: "PLAINTEXT", bootstrap: []string{addr(0)}}
	n.tls = securityListener{name: "SSL", bootstrap: []string{addr(1)}, opts: []kgo.Opt{kgo.DialTLSConfig(n.tlsCfg.Clone())}}
	n.sasl = securityListener{name: "SASL_PLAINTEXT/PLAIN", bootstrap: []string{addr(2)},
		opts: []kgo.Opt{kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}}
	return n, nil
}

// consumeMeasured reads topic whole on l with kgo, with the broker's CPU
// over the run (as a produceResult: records, bytes, elapsed, broker CPU).
func consumeMeasured(c *cluster, l securityListener, topic string, endOffset int64) (produceResult, error) {
	before, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	sub := &cluster{name: c.name, processes: c.processes, bootstrap: l.bootstrap}
	r, err := consumeKgoWith(sub, topic, endOffset, l.opts...)
	if err != nil {
		return produceResult{}, err
	}
	after, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	return produceResult{records: r.records, valueBytes: r.bytes, elapsed: r.elapsed, brokerCPU: after - before}, nil
}

// connectionRun is one connection-rate run.
type connectionRun struct {
	name        string
	connections int
	elapsed     time.Duration
	brokerCPU   time.Duration
}

func (r connectionRun) perSec() float64 { return float64(r.connections) / r.elapsed.Seconds() }

// brokerMicrosPerConn is the broker's CPU per connection.
func (r connectionRun) brokerMicrosPerConn() float64 {
	return float64(r.brokerCPU.Microseconds()) / float64(r.connections)
}

// measureConnections opens connections one after another on each kind of
// listener for connectionsDuration, each authenticated and then answered
// one ApiVersions (so that the server has finished with it) before it
// closes.
func measureConnections(n *securityNode) ([]connectionRun, error) {
	kinds := []struct {
		name      string
		addr      string
		tls       bool
		mechanism sasl.Mechanism
	}{
		{"PLAINTEXT", n.plain.bootstrap[0], false, nil},
		{"SSL", n.tls.bootstrap[0], true, nil},
		{"SASL/PLAIN", n.sasl.bootstrap[0], false, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
		{"SASL/SCRAM-SHA-256", n.sasl.bootstrap[0], false, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()},
		{"SASL/SCRAM-SHA-512", n.sasl.bootstrap[0], false, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()},
	}
	if n.kdc != nil {
		b, err := os.ReadFile(filepath.Join(n.dir, "alice.keytab"))
		if err != nil {
			return nil, err
		}
		kt := keytab.New()
		if err := kt.Unmarshal(b); err != nil {
			return nil, err
		}
		cl := client.NewWithKeytab("alice", securityRealm, kt, n.krbConf, client.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return nil, fmt.Errorf("alice's Kerberos login: %w", err)
		}
		defer cl.Destroy()
		kinds = append(kinds, struct {
			name      string
			addr      string
			tls       bool
			mechanism sasl.Mechanism
		}{"SASL/GSSAPI", n.sasl.bootstrap[0], false, kerberos.Auth{Client: cl, Service: "kafka"}.AsMechanism()})
	}
	var runs []connectionRun
	for _, k := range kinds {
		before, err := n.cl.cpu()
		if err != nil {
			return nil, err
		}
		run := connectionRun{name: k.name}
		start := time.Now()
		for time.Since(start) < connectionsDuration {
			if err := oneConnection(k.addr, k.tls, n.tlsCfg, k.mechanism); err != nil {
				return nil, fmt.Errorf("%s connection: %w", k.name, err)
			}
			run.connections++
		}
		run.elapsed = time.Since(start)
		after, err := n.cl.cpu()
		if err != nil {
			return nil, err
		}
		run.brokerCPU = after - before
		runs = append(runs, run)
	}
	return runs, nil
}

// oneConnection dials addr, runs TLS and SASL if asked, then one
// ApiVersions, and closes.
func oneConnection(addr string, useTLS bool, tlsCfg *tls.Config, mech sasl.Mechanism) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if useTLS {
		tc := tls.Client(c, tlsCfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		c = tc
	}
	rt := &roundTripper{c: c, r: bufio.NewReader(c)}
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	api.ClientSoftwareName, api.ClientSoftwareVersion = "strandbench", "1"
	if _, err := rt.do(api); err != nil {
		return err
	}
	if mech == nil {
		return nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := rt.do(hs)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("SaslHandshake: error %d", code)
	}
	session, token, err := mech.Authenticate(context.Background(), addr)
	if err != nil {
		return err
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(2)
		req.SASLAuthBytes = token
		raw, err := rt.do(req)
		if err != nil {
			return err
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return fmt.Errorf("SaslAuthenticate: error %d", resp.ErrorCode)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done && next == nil {
			break
		}
		token = next
		if done {
			req.SASLAuthBytes = token
			if _, err := rt.do(req); err != nil {
				return err
			}
			break
		}
	}
	meta := kmsg.NewPtrApiVersionsRequest()
	meta.SetVersion(3)
	_, err = rt.do(meta)
	return err
}

// roundTripper sends requests on one connection and reads their answers.
type roundTripper struct {
	c  net.Conn
	r  *bufio.Reader
	id int32
}

func (rt *roundTripper) do(req kmsg.Request) (kmsg.Response, error) {
	rt.id++
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: rt.id, ClientID: "strandbench"}
	if _, err := rt.c.Write(wire.AppendRequest(nil, hdr, req)); err != nil {
		return nil, err
	}
	var prefix [4]byte
	if _, err := io.ReadFull(rt.r, prefix[:]); err != nil {
		return nil, err
	}
	length, err := wire.FrameLength(prefix, 16<<20)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, length)
	if _, err := io.ReadFull(rt.r, frame); err != nil {
		return nil, err
	}
	_, resp, err := wire.ParseResponse(frame, req)
	return resp, err
}

// printSecurityResults prints the rows and whether the TLS goal is met.
// sealLimit is the consume rows' physical limit, measured in the same run:
// what sealing the consumed bytes alone costs (sealSecPerMillion).
type sealLimit struct {
	bytesPerRecord float64
	secPerMillion  float64
}

func printSecurityResults(listeners []securityListener, produce, consume [][]produceResult, seal sealLimit, conns []connectionRun) bool {
	fmt.Printf("\nsecurity: one Strand node, listeners side by side, %d B records, acks=1, kgo, medians of %d interleaved runs\n", securityValueBytes, brokerFlags.reps)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\trec/s\tbroker CPU s per M rec\trec/s / plaintext\tCPU per rec / plaintext\tgoal")
	paired := func(runs [][]produceResult, i int, rate func(produceResult) float64) float64 {
		var ratios []float64
		for rep := range runs[i] {
			ratios = append(ratios, rate(runs[i][rep])/rate(runs[0][rep]))
		}
		return medianFloat(ratios)
	}
	median := func(runs []produceResult, rate func(produceResult) float64) float64 {
		var values []float64
		for _, r := range runs {
			values = append(values, rate(r))
		}
		return medianFloat(values)
	}
	met := true
	row := func(what string, runs [][]produceResult, i int, goal bool) {
		rate, cpu := median(runs[i], produceResult.recordsPerSec), median(runs[i], produceResult.cpuSecPerMillion)
		if i == 0 {
			fmt.Fprintf(w, "%s\t%.0f\t%.3f\t1\t1\t\n", what, rate, cpu)
			return
		}
		cpuRatio := paired(runs, i, produceResult.cpuSecPerMillion)
		verdict := "info"
		if goal {
			verdict = fmt.Sprintf("<= %.1f: met", tlsCPURatioMax)
			if cpuRatio > tlsCPURatioMax {
				verdict, met = fmt.Sprintf("<= %.1f: FAIL", tlsCPURatioMax), false
			}
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.3f\t%.2f\t%.2f\t%s\n", what, rate, cpu, paired(runs, i, produceResult.recordsPerSec), cpuRatio, verdict)
	}
	for i, l := range listeners {
		row("produce "+l.name, produce, i, l.name == "SSL")
	}
	for i, l := range listeners[:2] {
		row("consume "+l.name+" (kgo)", consume, i, l.name == "SSL")
	}
	plainConsumeCPU := median(consume[0], produceResult.cpuSecPerMillion)
	fmt.Fprintf(w, "limit: AES-128-GCM seal alone, %.0f B/record\t\t%.3f\t\t%.2f\tSSL adds at least this; the goal allows 0.50\n",
		seal.bytesPerRecord, seal.secPerMillion, seal.secPerMillion/plainConsumeCPU)
	w.Flush()
	fmt.Println("  (consume: PLAINTEXT sends the record bytes with sendfile; SSL must read, encrypt and write them. The limit\n" +
		"  row is the encryption alone, on one core in this process: when it exceeds 0.50, no TLS consume can meet 1.5x)")
	fmt.Println("\nnew authenticated connections, one after another (dial, TLS/SASL, ApiVersions, close):")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\tconnections/s\tbroker CPU µs per connection\tconnections/s / plaintext\tCPU per connection / plaintext")
	for _, r := range conns {
		base := conns[0] // PLAINTEXT, measured first in the same run
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.2f\t%.2f\n", r.name, r.perSec(), r.brokerMicrosPerConn(),
			r.perSec()/base.perSec(), r.brokerMicrosPerConn()/base.brokerMicrosPerConn())
	}
	w.Flush()
	return met
}
