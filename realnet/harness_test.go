package realnet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/broker"
	"strand/core/config"
)

// testCluster is a real cluster on 127.0.0.1 in this process: node 1 is
// broker and controller (the active controller is the lowest voter), the
// others brokers. Every listener is bound to a random port first, so the
// ports can go into every node's configuration.
type testCluster struct {
	t     *testing.T
	nodes []*Node
	// configs are the nodes' configurations, for restarts.
	configs []config.Broker
	// clientListener names the listener clients use (secure clusters;
	// startCluster's is PLAINTEXT).
	clientListener string
}

// startCluster starts size nodes with extra server.properties on top.
func startCluster(t *testing.T, size int, extra map[string]string) *testCluster {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	portOf := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
	controllerL := listen()
	voters := fmt.Sprintf("1@127.0.0.1:%d", portOf(controllerL))
	c := &testCluster{t: t}
	for id := 1; id <= size; id++ {
		clientL := listen()
		props := map[string]string{
			"node.id":                        fmt.Sprint(id),
			"process.roles":                  "broker",
			"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", portOf(clientL)),
			"controller.listener.names":      "CONTROLLER",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"controller.quorum.voters":       voters,
			"log.dirs":                       t.TempDir(),
			"auto.create.topics.enable":      "true",
			"broker.heartbeat.interval.ms":   "200",
			"broker.session.timeout.ms":      "3000",
		}
		bound := map[string]net.Listener{"PLAINTEXT": clientL}
		if id == 1 {
			props["process.roles"] = "broker,controller"
			props["listeners"] += fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", portOf(controllerL))
			bound["CONTROLLER"] = controllerL
		}
		for k, v := range extra {
			props[k] = v
		}
		cfg, _, err := config.FromProperties(props)
		if err != nil {
			t.Fatalf("node %d config: %v", id, err)
		}
		n, err := Start(Options{Config: cfg, Logger: testLogger(t, id), Listeners: bound})
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		c.nodes = append(c.nodes, n)
		c.configs = append(c.configs, cfg)
	}
	t.Cleanup(c.stop)
	c.waitRegistered(size)
	return c
}

// testLogger logs warnings and errors to the test log; STRAND_TEST_LOG=1
// logs everything to stderr.
func testLogger(t *testing.T, id int) *slog.Logger {
	if os.Getenv("STRAND_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", id)
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stop shuts every node down, abruptly: the tests check serving, and
// Shutdown has its own test.
func (c *testCluster) stop() {
	for _, n := range c.nodes {
		if n != nil {
			n.Kill()
		}
	}
}

// restart starts node id again on its configuration, log directories and
// ports, after a Shutdown or Kill.
func (c *testCluster) restart(id int) {
	c.t.Helper()
	n, err := Start(Options{Config: c.configs[id-1], Logger: testLogger(c.t, id)})
	if err != nil {
		c.t.Fatalf("restart node %d: %v", id, err)
	}
	c.nodes[id-1] = n
}

// leaders returns the leader of each partition of topic, as node 1's
// metadata says.
func (c *testCluster) leaders(topic string, partitions int32) []int32 {
	c.t.Helper()
	leaders := make([]int32, partitions)
	c.nodes[0].Call(func(b *broker.Node) {
		for p := range partitions {
			s, ok := b.Image().PartitionByName(topic, p)
			if !ok {
				c.t.Errorf("partition %d of %s not in node 1's metadata", p, topic)
				continue
			}
			leaders[p] = s.Leader
		}
	})
	return leaders
}

// waitRegistered waits until node 1's metadata lists size unfenced brokers.
func (c *testCluster) waitRegistered(size int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%d brokers registered", size), 20*time.Second, func() bool {
		live := 0
		for _, n := range c.nodes {
			n.Call(func(b *broker.Node) {
				im := b.Image()
				for _, id := range im.BrokerIDs() {
					if br, ok := im.Broker(id); ok && !br.Fenced && int(id) == int(b.ID()) {
						live++
					}
				}
			})
		}
		return live == size
	})
}

// waitFor polls cond until it holds, failing after timeout.
func (c *testCluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	waitUntil(c.t, what, timeout, cond)
}

// waitUntil polls cond until it holds, failing after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: still waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bootstrap is every node's client address.
func (c *testCluster) bootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		if n != nil {
			addrs = append(addrs, n.Addr("PLAINTEXT").String())
		}
	}
	return addrs
}

// brokerAddrs is each node's client address by node id.
func (c *testCluster) brokerAddrs() map[int32]string {
	addrs := map[int32]string{}
	for i, n := range c.nodes {
		if n != nil {
			addrs[int32(i+1)] = n.Addr("PLAINTEXT").String()
		}
	}
	return addrs
}

// client returns a kgo client for the cluster, closed at cleanup.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...), kgo.DisableIdempotentWrite()}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic and waits until a producer can see leaders
// for every partition.
func (c *testCluster) createTopic(name string, partitions int32, rf int16) {
	c.t.Helper()
	createTopicWith(c.t, c.client(), name, partitions, rf)
}

// createTopicWith creates a topic through cl and waits until metadata shows
// a leader and rf in-sync replicas for every partition.
func createTopicWith(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error code %d", name, code)
	}
	waitUntil(t, "leaders of "+name, 20*time.Second, func() bool {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, cl)
		if err != nil || len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 || len(mresp.Topics[0].Partitions) != int(partitions) {
			return false
		}
		for _, p := range mresp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != int(rf) {
				return false
			}
		}
		return true
	})
}
