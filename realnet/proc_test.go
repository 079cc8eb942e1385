package realnet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tests in this file run the real `strand` binary as separate processes,
// so that a node can be killed with SIGKILL (CLARIFICATIONS.md, "Testing the
// real build under faults"): no deferred code, no clean close of files or
// sockets. The binary is built once per test run, without -race, which also
// keeps these tests fast next to the in-process clusters.

// strandBinary is the binary built for this test run.
var strandBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the built binary and stops the package's KDC after the
// tests.
func TestMain(m *testing.M) {
	code := m.Run()
	stopRealnetKDC()
	if strandBinary.dir != "" {
		os.RemoveAll(strandBinary.dir)
	}
	os.Exit(code)
}

// buildStrand builds cmd/strand once per test run and returns its path.
func buildStrand(t *testing.T) string {
	t.Helper()
	strandBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "strand-realnet-bin-")
		if err != nil {
			strandBinary.err = err
			return
		}
		strandBinary.dir = dir
		path := filepath.Join(dir, "strand")
		out, err := exec.Command("go", "build", "-o", path, "strand/cmd/strand").CombinedOutput()
		if err != nil {
			strandBinary.err = fmt.Errorf("go build strand/cmd/strand: %w\n%s", err, out)
			return
		}
		strandBinary.path = path
	})
	if strandBinary.err != nil {
		t.Fatal(strandBinary.err)
	}
	return strandBinary.path
}

// procNode is one `strand serve` process and what restarts it.
type procNode struct {
	id             int
	clientPort     int
	controllerPort int
	configPath     string
	logPath        string
	// cmd and exited belong to the running process; nil when stopped.
	cmd    *exec.Cmd
	exited chan struct{}
}

// procCluster is a cluster of `strand serve` processes on 127.0.0.1, with
// configurations written as config/examples/three-nodes/ writes them,
// on free ports.
type procCluster struct {
	t   *testing.T
	bin string
	// nodes are the brokers, node.id 1..size at index id-1.
	nodes []*procNode
	// controller is the separate controller process, if the shape has one.
	controller *procNode
	// admin is a client for metadata and raw requests, closed at cleanup.
	admin *kgo.Client
}

// procDefaults are the server.properties every process cluster uses: the
// examples' keys, with failure detection shortened so a kill is noticed in
// about a second and a half rather than nine.
var procDefaults = map[string]string{
	"num.partitions":                   "3",
	"default.replication.factor":       "3",
	"min.insync.replicas":              "2",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "6",
	"auto.create.topics.enable":        "true",
	"group.initial.rebalance.delay.ms": "0",
	"broker.heartbeat.interval.ms":     "200",
	"broker.session.timeout.ms":        "1500",
	"replica.lag.time.max.ms":          "5000",
}

// freePorts returns n ports nothing listens on right now. Another process
// could take one before a node binds it; start fails loudly if so.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range listeners {
		l.Close()
	}
	return ports
}

// quorumShape says where a process cluster's controllers run.
type quorumShape int

const (
	// everyNodeVotes makes every node broker and controller, as the
	// three-nodes example does: a kill can take the active controller.
	everyNodeVotes quorumShape = iota
	// separateController adds one controller-only process that the tests
	// never kill, so kills hit brokers only.
	separateController
)

// controllerNodeID is the separate controller's node.id.
const controllerNodeID = 100

// startProcCluster writes size broker configurations (plus a controller's,
// by shape) with extra keys on top of procDefaults, starts every node and
// waits until the cluster serves metadata listing all brokers.
func startProcCluster(t *testing.T, size int, shape quorumShape, extra map[string]string) *procCluster {
	t.Helper()
	c := &procCluster{t: t, bin: buildStrand(t)}
	ports := freePorts(t, 2*size+2)
	var voters []string
	if shape == everyNodeVotes {
		for i := range size {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[2*i+1]))
		}
	} else {
		voters = []string{fmt.Sprintf("%d@127.0.0.1:%d", controllerNodeID, ports[2*size+1])}
	}
	base := t.TempDir()
	write := func(id int, roles string, clientPort, controllerPort int) *procNode {
		n := &procNode{id: id, clientPort: clientPort, controllerPort: controllerPort}
		dir := filepath.Join(base, fmt.Sprintf("node%d", id))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		props := map[string]string{
			"node.id":                        fmt.Sprint(id),
			"process.roles":                  roles,
			"controller.listener.names":      "CONTROLLER",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"controller.quorum.voters":       strings.Join(voters, ","),
			"log.dirs":                       filepath.Join(dir, "data"),
		}
		switch roles {
		case "broker,controller":
			props["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", clientPort, controllerPort)
			props["advertised.listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", clientPort)
		case "broker":
			props["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", clientPort)
		case "controller":
			props["listeners"] = fmt.Sprintf("CONTROLLER://127.0.0.1:%d", controllerPort)
		}
		for k, v := range procDefaults {
			props[k] = v
		}
		for k, v := range extra {
			props[k] = v
		}
		keys := make([]string, 0, len(props))
		for k := range props { // order-independent: sorted below
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var file bytes.Buffer
		for _, k := range keys {
			fmt.Fprintf(&file, "%s=%s\n", k, props[k])
		}
		n.configPath = filepath.Join(dir, "server.properties")
		n.logPath = filepath.Join(dir, "strand.log")
		if err := os.WriteFile(n.configPath, file.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return n
	}
	roles := "broker,controller"
	if shape == separateController {
		roles = "broker"
		c.controller = write(controllerNodeID, "controller", 0, ports[2*size+1])
	}
	for i := range size {
		c.nodes = append(c.nodes, write(i+1, roles, ports[2*i], ports[2*i+1]))
	}
	t.Cleanup(c.stopAll)
	if c.controller != nil {
		c.startNode(c.controller)
	}
	for id := 1; id <= size; id++ {
		c.start(id)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	c.admin = admin
	t.Cleanup(admin.Close)
	c.waitBrokers(size)
	return c
}

// start runs broker id's process.
func (c *procCluster) start(id int) {
	c.t.Helper()
	c.startNode(c.nodes[id-1])
}

// startNode runs n's process; its log goes to strand.log in its directory,
// appended across restarts.
func (c *procCluster) startNode(n *procNode) {
	c.t.Helper()
	id := n.id
	if n.cmd != nil {
		c.t.Fatalf("node %d started twice", id)
	}
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(logFile, "==== test: start node %d at %s\n", id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, "serve", "--config", n.configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A test binary killed by its timeout runs no cleanup: the kernel
	// kills the node with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		c.t.Fatalf("start node %d: %v", id, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
}

// kill sends SIGKILL to node id and waits for the process to be gone.
func (c *procCluster) kill(id int) {
	c.t.Helper()
	n := c.nodes[id-1]
	if n.cmd == nil {
		c.t.Fatalf("kill node %d: not running", id)
	}
	select {
	case <-n.exited:
		c.t.Fatalf("node %d had exited before the kill: %s", id, n.cmd.ProcessState)
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill node %d: %v", id, err)
	}
	<-n.exited
	n.cmd, n.exited = nil, nil
}

// running reports whether node id's process is up.
func (c *procCluster) running(id int) bool {
	n := c.nodes[id-1]
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stopAll kills every node at cleanup, and on failure logs the tail of
// every node's log.
func (c *procCluster) stopAll() {
	all := c.nodes
	if c.controller != nil {
		all = append(slices.Clone(all), c.controller)
	}
	for _, n := range all {
		if n.cmd != nil {
			select {
			case <-n.exited:
				c.t.Errorf("node %d exited on its own: %s", n.id, n.cmd.ProcessState)
			default:
				n.cmd.Process.Signal(syscall.SIGKILL)
				<-n.exited
			}
			n.cmd = nil
		}
	}
	if c.t.Failed() || os.Getenv("STRAND_TEST_LOG") != "" {
		for _, n := range all {
			log, _ := os.ReadFile(n.logPath)
			c.t.Logf("node %d log (last 6 KiB):\n%s", n.id, lastBytes(log, 6<<10))
		}
	}
}

// bootstrap is every node's client address, running or not: clients skip
// the dead ones.
func (c *procCluster) bootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", n.clientPort))
	}
	return addrs
}

// brokerAddrs is each broker's client address by node id.
func (c *procCluster) brokerAddrs() map[int32]string {
	addrs := map[int32]string{}
	for _, n := range c.nodes {
		addrs[int32(n.id)] = fmt.Sprintf("127.0.0.1:%d", n.clientPort)
	}
	return addrs
}

// client returns a kgo client for the cluster, closed at cleanup. Unlike
// testCluster's it keeps kgo's defaults, idempotence included.
func (c *procCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// metadata asks the cluster for topic's metadata (every topic when topic
// is empty); nil when no broker answered in time.
func (c *procCluster) metadata(topic string) *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	if topic != "" {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.admin)
	if err != nil {
		return nil
	}
	return resp
}

// waitBrokers waits until metadata lists size brokers.
func (c *procCluster) waitBrokers(size int) {
	c.t.Helper()
	waitUntil(c.t, fmt.Sprintf("%d brokers in metadata", size), 30*time.Second, func() bool {
		for id := 1; id <= size; id++ {
			if !c.running(id) {
				c.t.Fatalf("node %d exited during start-up", id)
			}
		}
		resp := c.metadata("")
		return resp != nil && len(resp.Brokers) == size
	})
}

// partitionState is one partition's leader and ISR as metadata reports them.
type partitionState struct {
	leader int32
	isr    []int32
}

// partitions returns topic's partitions by index, or nil if metadata is
// unavailable or reports an error.
func (c *procCluster) partitions(topic string) map[int32]partitionState {
	resp := c.metadata(topic)
	if resp == nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil
	}
	states := map[int32]partitionState{}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode == 0 {
			states[p.Partition] = partitionState{leader: p.Leader, isr: slices.Clone(p.ISR)}
		}
	}
	return states
}

// createTopic creates topic and waits until every partition has a leader
// and a full ISR.
func (c *procCluster) createTopic(name string, partitions int32, rf int16) {
	c.t.Helper()
	createTopicWith(c.t, c.admin, name, partitions, rf)
	c.waitFullISR(name, partitions, int(rf), 30*time.Second)
}

// waitFullISR waits until each of topic's partitions has a live leader and
// rf replicas in its ISR.
func (c *procCluster) waitFullISR(topic string, partitions int32, rf int, timeout time.Duration) {
	c.t.Helper()
	waitUntil(c.t, fmt.Sprintf("a leader and %d in-sync replicas for every partition of %s", rf, topic), timeout, func() bool {
		states := c.partitions(topic)
		if len(states) != int(partitions) {
			return false
		}
		for _, s := range states { // order-independent: all must hold
			if s.leader < 0 || len(s.isr) != rf {
				return false
			}
		}
		return true
	})
}

// coordinator returns the node that coordinates group, by FindCoordinator.
func (c *procCluster) coordinator(group string) int32 {
	c.t.Helper()
	var node int32 = -1
	waitUntil(c.t, "the coordinator of group "+group, 20*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		req.CoordinatorKeys = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, c.admin)
		if err != nil {
			return false
		}
		code, id := resp.ErrorCode, resp.NodeID
		if len(resp.Coordinators) == 1 {
			code, id = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
		}
		if code != 0 {
			return false
		}
		node = id
		return true
	})
	return node
}
