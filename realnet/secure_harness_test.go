package realnet

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"maps"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/realnet/auth"
	"strand/realnet/authtest"
)

// secureClusterSpec describes a test cluster with secured listeners:
// node 1 is broker and controller, the others brokers (as startCluster).
// Every node has a client-facing listener named clientListener and node 1
// the CONTROLLER listener; props gives each node's security keys, with the
// bound ports known.
type secureClusterSpec struct {
	size           int
	clientListener string
	// hosts is each node's listening address (127.0.0.1 when empty):
	// distinct loopback addresses give each node its own Kerberos host
	// principal.
	hosts []string
	// props returns node id's extra properties.
	props func(id int) map[string]string
	// krb5Config is the krb5.conf the nodes log in with.
	krb5Config string
	// extraListeners are node 1's listeners beside the client one, bound
	// already, by name.
	extraListeners map[string]net.Listener
	// nodeListeners are more listeners every node binds on its host,
	// beside the client one, by name.
	nodeListeners []string
}

func (s secureClusterSpec) host(id int) string {
	if len(s.hosts) >= id && s.hosts[id-1] != "" {
		return s.hosts[id-1]
	}
	return "127.0.0.1"
}

// startSecureCluster starts the nodes and waits until every broker is
// registered and unfenced.
func startSecureCluster(t *testing.T, spec secureClusterSpec) *testCluster {
	t.Helper()
	listen := func(host string) net.Listener {
		l, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	portOf := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
	controllerL := listen(spec.host(1))
	voters := fmt.Sprintf("1@%s:%d", spec.host(1), portOf(controllerL))
	c := &testCluster{t: t, clientListener: spec.clientListener}
	t.Cleanup(c.stop)
	for id := 1; id <= spec.size; id++ {
		clientL := listen(spec.host(id))
		props := map[string]string{
			"node.id":                      fmt.Sprint(id),
			"process.roles":                "broker",
			"listeners":                    fmt.Sprintf("%s://%s:%d", spec.clientListener, spec.host(id), portOf(clientL)),
			"controller.listener.names":    "CONTROLLER",
			"controller.quorum.voters":     voters,
			"log.dirs":                     t.TempDir(),
			"auto.create.topics.enable":    "true",
			"broker.heartbeat.interval.ms": "200",
			"broker.session.timeout.ms":    "3000",
		}
		bound := map[string]net.Listener{spec.clientListener: clientL}
		for _, name := range spec.nodeListeners {
			l := listen(spec.host(id))
			props["listeners"] += fmt.Sprintf(",%s://%s", name, l.Addr())
			bound[name] = l
		}
		if id == 1 {
			props["process.roles"] = "broker,controller"
			props["listeners"] += fmt.Sprintf(",CONTROLLER://%s:%d", spec.host(1), portOf(controllerL))
			bound["CONTROLLER"] = controllerL
			for name, l := range spec.extraListeners {
				props["listeners"] += fmt.Sprintf(",%s://%s", name, l.Addr())
				bound[name] = l
			}
		}
		maps.Copy(props, spec.props(id))
		cfg, _, err := config.FromProperties(props)
		if err != nil {
			t.Fatalf("node %d config: %v", id, err)
		}
		n, err := Start(Options{Config: cfg, Logger: testLogger(t, id), Listeners: bound, Krb5Config: spec.krb5Config})
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		c.nodes = append(c.nodes, n)
		c.configs = append(c.configs, cfg)
	}
	c.waitRegistered(spec.size)
	return c
}

// clientAddrs is every node's address on the cluster's client listener.
func (c *testCluster) clientAddrs() []string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr(c.clientListener).String())
	}
	return addrs
}

// testPKI is a CA with certificates for nodes and clients, written to dir
// as PEM files.
type testPKI struct {
	ca     *authtest.CA
	dir    string
	caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := authtest.NewCA("Strand test CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, err := authtest.WriteFile(dir, "ca.pem", ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{ca: ca, dir: dir, caFile: caFile}
}

// issue makes a certificate for subject and hosts.
func (p *testPKI) issue(t *testing.T, subject pkix.Name, hosts ...string) authtest.Certificate {
	t.Helper()
	cert, err := p.ca.Issue(subject, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// keystore writes cert as a PEM key store file and returns its path.
func (p *testPKI) keystore(t *testing.T, name string, cert authtest.Certificate) string {
	t.Helper()
	path, err := authtest.WriteFile(p.dir, name+".pem", cert.KeystorePEM())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// files writes cert's chain and key apart (kcat's ssl.certificate.location
// and ssl.key.location) and returns their paths.
func (p *testPKI) files(t *testing.T, name string, cert authtest.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile, err := authtest.WriteFile(p.dir, name+".crt", cert.ChainPEM)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, err = authtest.WriteFile(p.dir, name+".key", cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// clientTLS is a client's tls.Config trusting the CA, with cert (if not
// zero) as its certificate.
func (p *testPKI) clientTLS(t *testing.T, cert authtest.Certificate) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(p.ca.PEM))
	cfg := &tls.Config{RootCAs: pool}
	if cert.ChainPEM != "" {
		pair, err := tls.X509KeyPair([]byte(cert.ChainPEM), []byte(cert.KeyPEM))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// principalRecorder is an env.Handler that records each request's header
// and answers ApiVersions (the node's table) and Metadata (this one
// broker), enough for kgo and kcat to connect and ask for metadata.
type principalRecorder struct {
	net  *Network
	addr func() net.Addr
	mu   sync.Mutex
	hdrs []env.RequestHeader
}

func (r *principalRecorder) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	r.mu.Lock()
	r.hdrs = append(r.hdrs, hdr)
	r.mu.Unlock()
	switch q := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := q.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = recorderAPIs()
		r.net.Reply(conn, hdr.CorrelationID, resp)
	case *kmsg.MetadataRequest:
		resp := q.ResponseKind().(*kmsg.MetadataResponse)
		a := r.addr().(*net.TCPAddr)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, a.IP.String(), int32(a.Port)
		resp.Brokers = append(resp.Brokers, b)
		resp.ControllerID = 1
		r.net.Reply(conn, hdr.CorrelationID, resp)
	default:
		r.net.Close(conn, hdr.CorrelationID)
	}
}

func (r *principalRecorder) HandleClosed(env.ConnID) {}

// principals returns the principals of the requests of API key seen so
// far.
func (r *principalRecorder) principals(key int16) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range r.hdrs {
		if h.APIKey == key {
			out = append(out, h.Principal)
		}
	}
	return out
}

func recorderAPIs() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, r := range [][3]int16{{3, 0, 12}, {17, 0, 1}, {18, 0, 3}, {36, 0, 2}} {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = r[0], r[1], r[2]
		out = append(out, k)
	}
	return out
}

// authNetwork is a Network serving one listener with real authentication
// and a principalRecorder behind it.
type authNetwork struct {
	net      *Network
	addr     net.Addr
	recorder *principalRecorder
}

// startAuthNetwork serves listener name (its properties on top of a
// broker-only configuration) with the recorder as the node.
func startAuthNetwork(t *testing.T, name string, props map[string]string, krb5Config string, setup ...func(*Network)) *authNetwork {
	t.Helper()
	all := map[string]string{
		"node.id": "1", "process.roles": "broker", "listeners": name + "://127.0.0.1:0",
		"controller.listener.names": "CONTROLLER", "controller.quorum.voters": "2@127.0.0.1:9",
		// A secured inter-broker listener needs its members named.
		"super.users": "User:broker",
	}
	maps.Copy(all, props)
	cfg, _, err := config.FromProperties(all)
	if err != nil {
		t.Fatal(err)
	}
	loop := NewLoop()
	go loop.Run()
	n := testNetwork(t, loop, cfg)
	security, err := auth.Load(cfg, auth.Options{Krb5Config: krb5Config, Logger: testLogger(t, 1)})
	if err != nil {
		loop.Stop()
		t.Fatal(err)
	}
	n.security = security
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	an := &authNetwork{net: n, addr: l.Addr()}
	an.recorder = &principalRecorder{net: n, addr: func() net.Addr { return an.addr }}
	n.setHandler(an.recorder, func(string) []kmsg.ApiVersionsResponseApiKey { return recorderAPIs() }, recorderAPIs())
	for _, f := range setup {
		f(n)
	}
	if err := n.Serve(name, l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Shutdown()
		loop.Stop()
		security.Close()
	})
	return an
}

// kgoTLS returns a kgo client option dialing with cfg.
func kgoTLS(cfg *tls.Config) kgo.Opt {
	return kgo.DialTLSConfig(cfg)
}
