package main

// Broker processes for the broker section: Strand (bin/strand serve, one or
// three nodes) and franz-go's kfake, each a process of its own, so that
// /proc/<pid> gives each broker's CPU time and memory apart from the client's
// (CLARIFICATIONS.md, "Benchmarks: how the goals are measured").

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
const clockTicksPerSecond = 100

// brokerStopTimeout bounds a broker's graceful stop. The last voter of a
// quorum waits up to 30 s for a successor before it stops (core/broker,
// KRaft's graceful resignation), and none can come.
const brokerStopTimeout = 40 * time.Second

// brokerProcess is one running broker process.
type brokerProcess struct {
	name string
	cmd  *exec.Cmd
	// logPath holds the process's stderr, shown if it fails.
	logPath string
	// profilePath is where the process writes its CPU profile, "" if none.
	profilePath string
	// env is added to the process's environment (KRB5_CONFIG).
	env     []string
	done    chan struct{}
	waitErr error

	mu         sync.Mutex
	rssAnonMax int64 // KiB, the largest sample so far
}

// cluster is the broker processes of one case and the address a client
// bootstraps from.
type cluster struct {
	name      string
	processes []*brokerProcess
	bootstrap []string
	// dataDirs are a Strand cluster's nodes' log.dirs (none for kfake).
	dataDirs     []string
	stopSampling context.CancelFunc
	sampled      sync.WaitGroup
	// stopOnce makes stop idempotent, so that a case can be stopped early
	// in the background and again, harmlessly, at the end.
	stopOnce sync.Once
	stopErr  error
}

// kfakeServeFlag makes strandbench itself the kfake process: the broker
// section re-executes its own binary with it, so that kfake runs apart from
// the client as Strand does.
var kfakeServeFlag = flag.Int("serve-kfake", 0, "internal: run franz-go's kfake as a one-broker cluster on this port until SIGTERM (the broker section's peer process)")

// serveKfake runs kfake until SIGTERM or SIGINT.
func serveKfake(port int) int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "strandbench: kfake:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Fprintln(os.Stderr, "kfake listening on", c.ListenAddrs())
	<-ctx.Done()
	c.Close()
	return 0
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1 by listening on
// port 0, then releases them for the broker to bind. Another process could
// take one in between; the broker then fails to start and says so.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// strandNodeProperties is one node's server.properties, written as the
// examples in config/examples/three-nodes are, with free ports, except
// that only the first voters nodes are controllers (quorum voters); the
// others are brokers only. Everything else is Kafka's default, the group
// coordinator's group.initial.rebalance.delay.ms of 3 s included.
func strandNodeProperties(nodeID, voters int, clientPorts, controllerPorts []int, logDir string) string {
	var voterList []string
	for id := 1; id <= voters; id++ {
		voterList = append(voterList, fmt.Sprintf("%d@127.0.0.1:%d", id, controllerPorts[id-1]))
	}
	roles, listeners := "broker", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", clientPorts[nodeID-1])
	if nodeID <= voters {
		roles, listeners = "broker,controller", listeners+fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", controllerPorts[nodeID-1])
	}
	nodes := len(clientPorts)
	return fmt.Sprintf(`node.id=%d
process.roles=%s
listeners=%s
advertised.listeners=PLAINTEXT://127.0.0.1:%d
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=%s
log.dirs=%s
num.partitions=1
default.replication.factor=%d
min.insync.replicas=%d
offsets.topic.replication.factor=%d
auto.create.topics.enable=true
`, nodeID, roles, listeners, clientPorts[nodeID-1], strings.Join(voterList, ","), logDir, nodes, min(2, nodes), nodes)
}

// startStrand starts nodes Strand processes from strandBin, the first voters
// of them controllers, each with its own configuration and log directory
// under dir, each writing a CPU profile into profileDir unless it is "".
func startStrand(name, strandBin, dir string, nodes, voters int, profileDir string) (*cluster, error) {
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	clientPorts, controllerPorts := ports[:nodes], ports[nodes:]
	c := &cluster{name: name}
	for id := 1; id <= nodes; id++ {
		nodeDir := filepath.Join(dir, fmt.Sprintf("%s-node%d", name, id))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, errors.Join(err, c.stop())
		}
		configPath := filepath.Join(nodeDir, "server.properties")
		dataDir := filepath.Join(nodeDir, "data")
		c.dataDirs = append(c.dataDirs, dataDir)
		properties := strandNodeProperties(id, voters, clientPorts, controllerPorts, dataDir)
		if err := os.WriteFile(configPath, []byte(properties), 0o644); err != nil {
			return nil, errors.Join(err, c.stop())
		}
		args := []string{"serve", "--config", configPath}
		p := &brokerProcess{name: fmt.Sprintf("%s node %d", name, id), logPath: filepath.Join(nodeDir, "stderr.log")}
		if profileDir != "" {
			p.profilePath = filepath.Join(profileDir, fmt.Sprintf("%s-node%d.pprof", name, id))
			args = append(args, "--cpuprofile", p.profilePath)
		}
		if err := p.start(strandBin, args...); err != nil {
			return nil, errors.Join(err, c.stop())
		}
		c.processes = append(c.processes, p)
		c.bootstrap = append(c.bootstrap, fmt.Sprintf("127.0.0.1:%d", clientPorts[id-1]))
	}
	if err := c.awaitReady(nodes); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	c.startSampling()
	return c, nil
}

// startKfake starts kfake in a process of its own: this binary again, with
// -serve-kfake.
func startKfake(dir string) (*cluster, error) {
	return startSelf(dir, "kfake", "-serve-kfake")
}

// startSelf starts this binary again in a process of its own, serving a
// one-broker cluster called name with serveFlag (-serve-kfake, -serve-null)
// on a free port; its stderr goes to "<name>-stderr.log" in dir.
func startSelf(dir, name, serveFlag string) (*cluster, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	c := &cluster{name: name, bootstrap: []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}}
	p := &brokerProcess{name: name, logPath: filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+"-stderr.log")}
	if err := p.start(self, serveFlag, strconv.Itoa(ports[0])); err != nil {
		return nil, err
	}
	c.processes = append(c.processes, p)
	if err := c.awaitReady(1); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	c.startSampling()
	return c, nil
}

func (p *brokerProcess) start(bin string, args ...string) error {
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bin, args...)
	if p.env != nil {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// A benchmark interrupted or killed must not leave brokers running.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s (%s): %w", p.name, bin, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return nil
}

// exited reports whether the process has ended, with its log's tail.
func (p *brokerProcess) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.name, p.waitErr, logTail(p.logPath))
	default:
		return nil
	}
}

// logTail is the last lines of a log file.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// stop (once; later calls return the first's error) sends SIGTERM to each process (which lets Strand finish its CPU
// profile) and waits for it, killing it if it takes more than
// brokerStopTimeout. The processes stop one at a time, the last started
// first, so that brokers leave while a controller still answers their
// controlled shutdown.
func (c *cluster) stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stopProcesses() })
	return c.stopErr
}

// stopProcesses is stop's work, done once.
func (c *cluster) stopProcesses() error {
	if c.stopSampling != nil {
		c.stopSampling()
		c.sampled.Wait()
	}
	var errs []error
	for _, p := range slices.Backward(c.processes) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(brokerStopTimeout):
			p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within %v of SIGTERM; killed; its log ends:\n%s", p.name, brokerStopTimeout, logTail(p.logPath)))
		}
	}
	return errors.Join(errs...)
}

// awaitReady waits until the cluster's metadata names all its brokers and a
// controller, and every process is still running.
func (c *cluster) awaitReady(brokers int) error {
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		for _, p := range c.processes {
			if err := p.exited(); err != nil {
				return err
			}
		}
		lastErr = c.probe(brokers)
		if lastErr == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within 30 s: %w", c.name, lastErr)
}

// adminClient is a kgo client of c for one-off admin requests and a context
// that ends after timeout; done closes both.
func (c *cluster) adminClient(timeout time.Duration) (*kgo.Client, context.Context, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

func (c *cluster) probe(brokers int) error {
	cl, ctx, done, err := c.adminClient(2 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Brokers) < brokers || resp.ControllerID < 0 {
		return fmt.Errorf("metadata names %d brokers and controller %d", len(resp.Brokers), resp.ControllerID)
	}
	return nil
}

// createTopic creates topic with the given partitions and a replication
// factor of every broker, and waits until each partition has a leader.
func (c *cluster) createTopic(topic string, partitions int32) error {
	cl, ctx, done, err := c.adminClient(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, int16(len(c.processes))
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s on %s: %w", topic, c.name, err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			return fmt.Errorf("create topic %s on %s: error code %d", topic, c.name, rt.ErrorCode)
		}
	}
	for ctx.Err() == nil {
		leaders, err := partitionLeaders(ctx, cl, topic)
		if err == nil && int32(len(leaders)) == partitions {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("topic %s on %s: partitions without a leader after 30 s", topic, c.name)
}

// deleteTopics deletes topics and waits until no node holds a partition
// directory of theirs (Strand removes a deleted partition's files at once,
// not after Kafka's file.delete.delay.ms).
func (c *cluster) deleteTopics(topics ...string) error {
	cl, ctx, done, err := c.adminClient(30 * time.Second)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDeleteTopicsRequest()
	for _, topic := range topics {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
	}
	req.TopicNames = topics // before v6
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("delete topics %v on %s: %w", topics, c.name, err)
	}
	for i, t := range resp.Topics {
		if t.ErrorCode != 0 {
			name := fmt.Sprintf("number %d", i)
			if t.Topic != nil {
				name = *t.Topic
			}
			return fmt.Errorf("delete topic %s on %s: error code %d", name, c.name, t.ErrorCode)
		}
	}
	for ctx.Err() == nil {
		var left []string
		for _, dir := range c.dataDirs {
			for _, topic := range topics {
				held, err := filepath.Glob(filepath.Join(dir, topic+"-[0-9]*"))
				if err != nil {
					return err
				}
				left = append(left, held...)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("topics %v on %s: partition directories still there 30 s after their deletion", topics, c.name)
}

// partitionLeaders maps each partition of topic with a leader to the
// leader's address.
func partitionLeaders(ctx context.Context, cl *kgo.Client, topic string) (map[int32]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	addresses := map[int32]string{}
	for _, b := range resp.Brokers {
		addresses[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	leaders := map[int32]string{}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata for %s: error code %d", topic, t.ErrorCode)
		}
		for _, p := range t.Partitions {
			if address, ok := addresses[p.Leader]; ok && p.ErrorCode == 0 {
				leaders[p.Partition] = address
			}
		}
	}
	return leaders, nil
}

// startSampling samples each process's RssAnon every 50 ms until stop.
func (c *cluster) startSampling() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopSampling = cancel
	c.sampled.Add(1)
	go func() {
		defer c.sampled.Done()
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for {
			for _, p := range c.processes {
				p.sampleMemory()
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}

func (p *brokerProcess) sampleMemory() {
	kib, err := rssAnonKiB(p.cmd.Process.Pid)
	if err != nil {
		return // the process is gone; exited() reports why
	}
	p.mu.Lock()
	p.rssAnonMax = max(p.rssAnonMax, kib)
	p.mu.Unlock()
}

// rssAnonMaxKiB is the largest RssAnon sampled over the processes.
func (c *cluster) rssAnonMaxKiB() int64 {
	var most int64
	for _, p := range c.processes {
		p.mu.Lock()
		most = max(most, p.rssAnonMax)
		p.mu.Unlock()
	}
	return most
}

// exitedErr reports, for a failed request's error, the first of the
// cluster's processes that has ended, or nil if all still run.
func (c *cluster) exitedErr() error {
	for _, p := range c.processes {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// cpu is the CPU time (user + system) all the cluster's processes have used.
func (c *cluster) cpu() (time.Duration, error) {
	var total time.Duration
	for _, p := range c.processes {
		if err := p.exited(); err != nil {
			return 0, err
		}
		d, err := processCPUOf(p.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// processCPUOf reads utime + stime of pid from /proc/<pid>/stat. The fields
// are counted after the command name's closing parenthesis, since the name
// may hold spaces: utime and stime are fields 14 and 15 of the line, 12 and
// 13 after the name.
func processCPUOf(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, field := range fields[11:13] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// rssAnonKiB reads RssAnon of pid from /proc/<pid>/status.
func rssAnonKiB(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no RssAnon", pid)
}
