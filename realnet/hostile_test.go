package realnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"strand/core/admission"
	"strand/core/broker"
	"strand/core/config"
)

// The hostile-client suite (SPEC.md §7.2): each test attacks a real node
// and asserts both halves: the attack is contained (bounded memory, the
// connection closed or refused), and every other client and the controller
// are answered within answerWithin throughout.

// answerWithin is how soon an honest client and the controller must be
// answered while an attack runs.
const answerWithin = 2 * time.Second

// rssAnonGrowthBytesMax bounds how far the process's anonymous resident
// memory (the brokers' and the test's together) may grow above what it held
// when the attack began. The test process runs the whole realnet suite, so
// its RssAnon at the start holds what earlier tests left (under -race,
// several hundred MiB); the attack is what each test bounds.
const rssAnonGrowthBytesMax = 256 << 20

// rssAnonBytes reads this process's RssAnon from /proc/self/status.
func rssAnonBytes(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("RssAnon line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// heapAllocBytes is the Go heap's allocated bytes after a collection,
// whether their pages are resident or not.
func heapAllocBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memoryWatch samples RssAnon every 10 ms until stopped, keeping the peak.
type memoryWatch struct {
	t        *testing.T
	peak     atomic.Int64
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
}

// watchMemory starts sampling, from a baseline taken once the heap has
// given back what it could; the test's cleanup stops it and checks the
// growth of the peak over the baseline against rssAnonGrowthBytesMax.
func watchMemory(t *testing.T) *memoryWatch {
	m := &memoryWatch{t: t, stopCh: make(chan struct{}), done: make(chan struct{})}
	debug.FreeOSMemory()
	baseline := rssAnonBytes(t)
	m.peak.Store(baseline)
	go func() {
		defer close(m.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stopCh:
				return
			case <-tick.C:
			}
			status, err := os.ReadFile("/proc/self/status")
			if err != nil {
				continue
			}
			if i := bytes.Index(status, []byte("RssAnon:")); i >= 0 {
				fields := strings.Fields(string(status[i+len("RssAnon:"):]))
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil && kb<<10 > m.peak.Load() {
					m.peak.Store(kb << 10)
				}
			}
		}
	}()
	t.Cleanup(func() {
		peak := m.stop()
		growth := peak - baseline
		t.Logf("RssAnon peak %.1f MiB, %.1f MiB above the %.1f MiB at the start (bound %d MiB)",
			float64(peak)/(1<<20), float64(growth)/(1<<20), float64(baseline)/(1<<20), rssAnonGrowthBytesMax>>20)
		if growth > rssAnonGrowthBytesMax {
			t.Errorf("RssAnon grew %.1f MiB during the attack, over the bound of %d MiB", float64(growth)/(1<<20), rssAnonGrowthBytesMax>>20)
		}
	})
	return m
}

// stop ends the sampling and returns the peak.
func (m *memoryWatch) stop() int64 {
	m.stopOnce.Do(func() { close(m.stopCh) })
	<-m.done
	return m.peak.Load()
}

// apiVersionsLatency dials addr, asks ApiVersions and returns how long the
// answer took, or an error if none came within timeout.
func apiVersionsLatency(addr net.Addr, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr.String(), timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "probe", "1"
	if _, err := c.Write(frameOf(appendRequestBody(1, req))); err != nil {
		return 0, err
	}
	c.SetReadDeadline(start.Add(timeout))
	r := &rawConn{c: c}
	if _, err := r.readFrame(timeout); err != nil {
		return time.Since(start), fmt.Errorf("ApiVersions on %s unanswered after %s: %w", addr, time.Since(start).Round(time.Millisecond), err)
	}
	return time.Since(start), nil
}

// appendRequestBody encodes req with a request header, without the size
// prefix.
func appendRequestBody(correlationID int32, req kmsg.Request) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = append(b, 0, 5, 'p', 'r', 'o', 'b', 'e')
	if req.IsFlexible() {
		b = append(b, 0) // no header tags
	}
	return req.AppendTo(b)
}

// probeLoop keeps asking ApiVersions on each address every 50 ms until
// stopped, and records the slowest answer per address; an unanswered probe
// is recorded as its timeout.
type probeLoop struct {
	mu      sync.Mutex
	slowest map[string]time.Duration
	errs    []error
	stopCh  chan struct{}
	wg      sync.WaitGroup
}

func startProbes(addrs map[string]net.Addr) *probeLoop {
	p := &probeLoop{slowest: map[string]time.Duration{}, stopCh: make(chan struct{})}
	for name, addr := range addrs {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				took, err := apiVersionsLatency(addr, answerWithin)
				p.mu.Lock()
				if err != nil {
					took = answerWithin
					p.errs = append(p.errs, fmt.Errorf("%s: %w", name, err))
				}
				p.slowest[name] = max(p.slowest[name], took)
				p.mu.Unlock()
				select {
				case <-p.stopCh:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	return p
}

// stop ends the probes and fails t if any was unanswered within
// answerWithin; it logs the slowest answers.
func (p *probeLoop) stop(t *testing.T) map[string]time.Duration {
	t.Helper()
	close(p.stopCh)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, d := range p.slowest {
		t.Logf("slowest ApiVersions answer on %s: %s", name, d.Round(time.Millisecond))
	}
	for _, err := range p.errs {
		t.Errorf("honest probe: %v", err)
	}
	return p.slowest
}

// silentFrame opens a connection to addr and sends a size prefix of
// prefixBytes and bodyBytes of body, then nothing.
func silentFrame(t *testing.T, addr net.Addr, prefixBytes int32, bodyBytes int) *rawConn {
	t.Helper()
	r := dialRaw(t, addr)
	r.write(binary.BigEndian.AppendUint32(nil, uint32(prefixBytes)))
	r.write(make([]byte, bodyBytes))
	return r
}

// waitClosedByBroker waits up to timeout for the broker to close r, and
// returns how long it took.
func waitClosedByBroker(t *testing.T, r *rawConn, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	r.c.SetReadDeadline(start.Add(timeout))
	_, err := bufio.NewReader(r.c).ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open %s after the attack began", timeout)
	}
	return time.Since(start)
}

// TestHostileSilentHugeFramesDoNotFreezeTheNode: two connections
// each send a 64 MiB size prefix and 8 bytes, then nothing.
// Every other client, on both listeners, is still answered within
// answerWithin; neither connection costs the broker its claimed 64 MiB;
// and both are closed once strand.request.read.timeout.ms passes.
func TestHostileSilentHugeFramesDoNotFreezeTheNode(t *testing.T) {
	const readTimeoutMs = 1500
	c := startCluster(t, 1, map[string]string{"strand.request.read.timeout.ms": strconv.Itoa(readTimeoutMs)})
	mem := watchMemory(t)
	node := c.nodes[0]
	const topic = "honest"
	c.createTopic(topic, 1, 1)
	honest := c.client(kgo.DefaultProduceTopic(topic), kgo.RequestTimeoutOverhead(answerWithin))
	before, heapBefore := rssAnonBytes(t), heapAllocBytes()

	probes := startProbes(map[string]net.Addr{"PLAINTEXT": node.Addr("PLAINTEXT"), "CONTROLLER": node.Addr("CONTROLLER")})
	attackStart := time.Now()
	attackers := []*rawConn{
		silentFrame(t, node.Addr("PLAINTEXT"), 64<<20, 8),
		silentFrame(t, node.Addr("PLAINTEXT"), 64<<20, 8),
	}
	// An honest producer keeps producing through the attack.
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
		start := time.Now()
		err := honest.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("during-", i))}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("honest produce %d during the attack: %v after %s", i, err, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(25 * time.Millisecond)
	}
	if grown := rssAnonBytes(t) - before; grown > 32<<20 {
		t.Errorf("RssAnon grew %.1f MiB under two 8-byte sends claiming 64 MiB each", float64(grown)/(1<<20))
	}
	// Untouched pages of a buffer need not be resident: the heap says what
	// was allocated, and the client plane's budget what is reserved.
	if grown := heapAllocBytes() - heapBefore; grown > 16<<20 {
		t.Errorf("the heap grew %.1f MiB under two 8-byte sends claiming 64 MiB each", float64(grown)/(1<<20))
	}
	if requests, bytes := node.net.budgets.held(admission.PlaneClient); requests != 2 || bytes > 2*admission.FrameSmallBytes {
		t.Errorf("the client plane holds %d requests and %d bytes for two 8-byte sends", requests, bytes)
	}
	for i, r := range attackers {
		took := waitClosedByBroker(t, r, 10*time.Second)
		sinceStart := time.Since(attackStart)
		t.Logf("attacker %d closed %s after the attack began", i, sinceStart.Round(time.Millisecond))
		if sinceStart < readTimeoutMs*time.Millisecond*9/10 {
			t.Errorf("attacker %d closed after %s, before the read timeout of %d ms", i, took, readTimeoutMs)
		}
		if sinceStart > readTimeoutMs*time.Millisecond+2*time.Second {
			t.Errorf("attacker %d closed after %s, long past the read timeout of %d ms", i, sinceStart, readTimeoutMs)
		}
	}
	probes.stop(t)
	mem.stop()
}

// deletedFilesUnder lists the files this process holds open that were
// unlinked from under dir (/proc/self/fd links ending in "(deleted)").
func deletedFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, " (deleted)") {
			open = append(open, target)
		}
	}
	return open
}

// dialNotReading opens a connection to addr whose receive buffer is as
// small as the kernel allows, so that a response larger than a few KiB
// fills both ends' buffers while the test does not read.
func dialNotReading(t *testing.T, addr net.Addr) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var sockErr error
		err := c.Control(func(fd uintptr) { sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return errors.Join(err, sockErr)
	}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// TestHostileStalledFetchReleasesDeletedData: a client sends a Fetch
// for a whole partition and never reads the answer. Its topic is
// then deleted: the segment's file, unlinked, stays open only until
// strand.response.write.timeout.ms has passed, when the connection closes
// and the Fetch's regions are released; meanwhile other clients and the
// controller are answered.
func TestHostileStalledFetchReleasesDeletedData(t *testing.T) {
	const writeTimeoutMs = 1000
	c := startCluster(t, 1, map[string]string{"strand.response.write.timeout.ms": strconv.Itoa(writeTimeoutMs)})
	watchMemory(t)
	node := c.nodes[0]
	const topic = "pinned"
	c.createTopic(topic, 1, 1)
	producer := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte{'v'}, 100<<10)
	for range 40 { // 4 MB: more than the socket buffers of both ends
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	logDir := c.configs[0].LogDirs[0]

	stalled := dialNotReading(t, node.Addr("PLAINTEXT"))
	fetch := fetchRequest(topic, 0, 0)
	fetch.MaxBytes, fetch.Topics[0].Partitions[0].PartitionMaxBytes = 64<<20, 64<<20
	stalled.send(1, fetch)
	time.Sleep(200 * time.Millisecond) // the writer is now blocked on the full socket

	probes := startProbes(map[string]net.Addr{"PLAINTEXT": node.Addr("PLAINTEXT"), "CONTROLLER": node.Addr("CONTROLLER")})
	adm := kadm.NewClient(c.client())
	deleted := time.Now()
	resp, err := adm.DeleteTopics(context.Background(), topic)
	if err != nil || resp[topic].Err != nil {
		t.Fatalf("delete %s: %v %v", topic, err, resp[topic].Err)
	}
	var pinned []string
	waitUntil(t, "the topic's segment unlinked", 5*time.Second, func() bool {
		pinned = deletedFilesUnder(t, logDir)
		return len(pinned) > 0 || time.Since(deleted) > time.Second
	})
	if len(pinned) == 0 {
		t.Log("no deleted segment held open: the writer finished before the deletion")
	}
	released := time.Duration(0)
	waitUntil(t, "the stalled Fetch's deleted segment closed", writeTimeoutMs*time.Millisecond+3*time.Second, func() bool {
		released = time.Since(deleted)
		return len(deletedFilesUnder(t, logDir)) == 0
	})
	t.Logf("deleted segment held open %s after the deletion (write timeout %d ms): %v", released.Round(time.Millisecond), writeTimeoutMs, pinned)
	stalled.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, stalled.c); err != nil {
		t.Fatalf("the stalled connection was not closed by the broker: %v", err)
	}
	probes.stop(t)
}

// logCapture keeps every log line of a node, for tests that count them.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// matching returns the lines that contain every one of words.
func (l *logCapture) matching(words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// startLoggedNode is startCluster's single node (broker and controller),
// whose log lines at INFO and above are captured.
func startLoggedNode(t *testing.T, extra map[string]string) (*testCluster, *logCapture) {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	clientL, controllerL := listen(), listen()
	props := map[string]string{
		"node.id": "1", "process.roles": "broker,controller",
		"listeners":                 fmt.Sprintf("PLAINTEXT://%s,CONTROLLER://%s", clientL.Addr(), controllerL.Addr()),
		"controller.listener.names": "CONTROLLER", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.quorum.voters": "1@" + controllerL.Addr().String(), "log.dirs": t.TempDir(),
		"broker.heartbeat.interval.ms": "200", "broker.session.timeout.ms": "3000",
	}
	for k, v := range extra {
		props[k] = v
	}
	cfg, _, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := Start(Options{Config: cfg, Logger: logger, Listeners: map[string]net.Listener{"PLAINTEXT": clientL, "CONTROLLER": controllerL}})
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, nodes: []*Node{n}, configs: []config.Broker{cfg}}
	t.Cleanup(c.stop)
	c.waitRegistered(1)
	return c, logs
}

// openIdle opens count connections to addr from local address from (nil:
// any) that send nothing, and returns those the broker kept open after
// settle: a refused one is closed by the broker at once.
func openIdle(t *testing.T, addr net.Addr, from net.IP, count int, settle time.Duration) (open []*rawConn, refused int) {
	t.Helper()
	var all []*rawConn
	for range count {
		d := net.Dialer{Timeout: 5 * time.Second}
		if from != nil {
			d.LocalAddr = &net.TCPAddr{IP: from}
		}
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		all = append(all, &rawConn{t: t, c: c})
	}
	time.Sleep(settle)
	for _, r := range all {
		r.c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		var b [1]byte
		_, err := r.c.Read(b[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			open = append(open, r)
		} else {
			refused++
		}
	}
	return open, refused
}

// TestHostileIdleConnectionsLeaveTheControllerListenerAlone: idle
// client connections fill max.connections. The controller listener,
// counted apart as a KRaft controller's own SocketServer is, still
// accepts and answers; the refusals are logged once for the interval, with
// their count, not once each.
func TestHostileIdleConnectionsLeaveTheControllerListenerAlone(t *testing.T) {
	const connectionsMax = 20
	defer func(ms int64) { refusalLogIntervalMs = ms }(refusalLogIntervalMs)
	refusalLogIntervalMs = 1500
	c, logs := startLoggedNode(t, map[string]string{"max.connections": strconv.Itoa(connectionsMax)})
	watchMemory(t)
	node := c.nodes[0]
	open, refused := openIdle(t, node.Addr("PLAINTEXT"), nil, 2*connectionsMax, 300*time.Millisecond)
	t.Logf("%d idle client connections kept, %d refused", len(open), refused)
	if len(open) > connectionsMax || refused < connectionsMax {
		t.Errorf("max.connections=%d kept %d of %d idle connections open", connectionsMax, len(open), 2*connectionsMax)
	}
	for i := range 5 {
		took, err := apiVersionsLatency(node.Addr("CONTROLLER"), answerWithin)
		if err != nil {
			t.Fatalf("controller listener, probe %d, with the client listener full: %v", i, err)
		}
		t.Logf("controller listener answered in %s", took.Round(time.Millisecond))
	}
	// The first refusal is logged at once, the rest together once the
	// interval has passed.
	if lines := logs.matching("connections refused"); len(lines) != 1 {
		t.Errorf("refusals logged as %d lines within the interval, want one: %q", len(lines), lines)
	}
	waitUntil(t, "the interval's refusals logged", 5*time.Second, func() bool { return len(logs.matching("connections refused")) == 2 })
	counted := 0
	for _, line := range logs.matching("connections refused") {
		var n int
		if _, err := fmt.Sscanf(line[strings.Index(line, "count="):], "count=%d", &n); err != nil {
			t.Fatalf("no count in %q", line)
		}
		counted += n
	}
	if counted != refused {
		t.Errorf("the refusal lines count %d refusals, want %d", counted, refused)
	}
	if many := logs.matching("level=WARN"); len(many) > 3 {
		t.Errorf("%d WARN lines under the flood", len(many))
	}
}

// TestHostileConnectionsPerAddress: max.connections.per.ip refuses an
// address's connections past its limit, another address is still
// admitted, and max.connections.per.ip.overrides raises one address's.
func TestHostileConnectionsPerAddress(t *testing.T) {
	c, _ := startLoggedNode(t, map[string]string{"max.connections.per.ip": "4", "max.connections.per.ip.overrides": "127.0.0.3:8"})
	addr := c.nodes[0].Addr("PLAINTEXT")
	for _, tc := range []struct {
		from net.IP
		max  int
	}{{net.IPv4(127, 0, 0, 2), 4}, {net.IPv4(127, 0, 0, 3), 8}} {
		open, refused := openIdle(t, addr, tc.from, tc.max+3, 300*time.Millisecond)
		if len(open) != tc.max || refused != 3 {
			t.Errorf("from %s: %d open, %d refused; want %d open, 3 refused", tc.from, len(open), refused, tc.max)
		}
	}
	if _, err := apiVersionsLatency(addr, answerWithin); err != nil {
		t.Fatalf("a client from 127.0.0.1 while the other addresses are at their limit: %v", err)
	}
}

// TestHostileIdleConnectionsAreClosed: connections.max.idle.ms closes a
// connection that sends nothing, but not one whose long poll waits in the
// broker.
func TestHostileIdleConnectionsAreClosed(t *testing.T) {
	const idleMs = 800
	c, _ := startLoggedNode(t, map[string]string{"connections.max.idle.ms": strconv.Itoa(idleMs)})
	addr := c.nodes[0].Addr("PLAINTEXT")
	c.createTopic("polled", 1, 1)
	idle := dialRaw(t, addr)
	opened := time.Now()
	busy := dialRaw(t, addr)
	busy.send(1, fetchRequest("polled", 0, 3*idleMs))
	took := waitClosedByBroker(t, idle, 10*time.Second)
	t.Logf("idle connection closed after %s (connections.max.idle.ms=%d)", took.Round(time.Millisecond), idleMs)
	if took < idleMs*time.Millisecond*9/10 || took > idleMs*time.Millisecond+time.Second {
		t.Errorf("idle connection closed after %s, want about %d ms", took, idleMs)
	}
	if _, err := busy.readFrame(5 * time.Second); err != nil {
		t.Fatalf("the long poll's connection was closed while it waited (%s after it opened): %v", time.Since(opened), err)
	}
}

// TestHostileConnectionFloodIsThrottled: max.connection.creation.rate
// paces a flood of connections on the client listener (Kafka throttles,
// it does not refuse), while the controller listener keeps its own pace.
func TestHostileConnectionFloodIsThrottled(t *testing.T) {
	const rate = 10
	c, _ := startLoggedNode(t, map[string]string{"max.connection.creation.rate": strconv.Itoa(rate)})
	node := c.nodes[0]
	time.Sleep(time.Second) // the start-up's own connections leave the bucket full again
	start := time.Now()
	for i := range 2*rate + 5 {
		if _, err := apiVersionsLatency(node.Addr("PLAINTEXT"), 5*time.Second); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	took := time.Since(start)
	t.Logf("%d connections at max.connection.creation.rate=%d took %s", 2*rate+5, rate, took.Round(time.Millisecond))
	if took < 1400*time.Millisecond {
		t.Errorf("%d connections at %d/s took %s: the rate was not applied", 2*rate+5, rate, took)
	}
	if took, err := apiVersionsLatency(node.Addr("CONTROLLER"), answerWithin); err != nil || took > 200*time.Millisecond {
		t.Errorf("controller listener after the flood: %s, %v", took, err)
	}
}

// partialFrames opens count connections to addr, each sending the size
// prefix of a 1 MiB request and 10 bytes of it, then nothing: each holds a
// request of its plane's queued.max.requests until the read deadline.
func partialFrames(t *testing.T, addr net.Addr, count int) []*rawConn {
	t.Helper()
	var conns []*rawConn
	for range count {
		conns = append(conns, silentFrame(t, addr, 1<<20, 10))
	}
	return conns
}

// TestHostileStalledRequestsGiveWay: six connections each start a
// request and stall, on a client plane of queued.max.requests=4. Stalled
// (partial) requests get half of the plane's budget, so whole requests
// from honest clients, and the controller listener with a budget of its
// own, are answered at once throughout; and while requests wait for a
// place, the plane is under pressure, so the stalled ones holding places
// are closed after a tenth of strand.request.read.timeout.ms: four of the
// six within the read timeout, where without pressure the later ones
// would wait a whole timeout for a place and hold it another.
func TestHostileStalledRequestsGiveWay(t *testing.T) {
	const readTimeoutMs = 2500
	c, _ := startLoggedNode(t, map[string]string{"queued.max.requests": "4", "strand.request.read.timeout.ms": strconv.Itoa(readTimeoutMs)})
	watchMemory(t)
	node := c.nodes[0]
	probes := startProbes(map[string]net.Addr{"PLAINTEXT": node.Addr("PLAINTEXT"), "CONTROLLER": node.Addr("CONTROLLER")})
	attack := time.Now()
	attackers := partialFrames(t, node.Addr("PLAINTEXT"), 6)
	var wg sync.WaitGroup
	closedAfter := make([]time.Duration, len(attackers))
	for i, r := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.c.SetReadDeadline(attack.Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, r.c)
			closedAfter[i] = time.Since(attack)
		}()
	}
	wg.Wait()
	slowest := probes.stop(t)
	for name, d := range slowest {
		if d > 500*time.Millisecond {
			t.Errorf("%s answered in %s during the attack, want under 500 ms", name, d)
		}
	}
	slices.Sort(closedAfter)
	t.Logf("six stalled requests closed %v after the attack began (read timeout %d ms)", closedAfter, readTimeoutMs)
	// Four closed while others waited for their place; the last two, with
	// no one waiting behind them, keep the whole read timeout.
	if fourth := closedAfter[3]; fourth > readTimeoutMs*time.Millisecond {
		t.Errorf("the fourth stalled request held its place until %s: stalled requests did not give way under pressure", fourth)
	}
	if last := closedAfter[5]; last > 2*readTimeoutMs*time.Millisecond {
		t.Errorf("the last stalled request held its place until %s", last)
	}
}

// TestHostileAttackOnALeaderSparesReplication: silent huge frames and the
// control plane on three nodes, where replication shares the PLAINTEXT
// listener with clients (as in the three-node example). A partition's
// leader is attacked: first with silent 64 MiB frames, during
// which acks=all produces to it succeed within answerWithin; then with
// stalled requests that fill its client plane's queued.max.requests,
// during which its followers' fetches, on the control plane, keep its ISR
// whole (replica.lag.time.max.ms=1000).
func TestHostileAttackOnALeaderSparesReplication(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "1000", "queued.max.requests": "6",
		"strand.request.read.timeout.ms": "3000", "min.insync.replicas": "2"})
	watchMemory(t)
	const topic = "led"
	c.createTopic(topic, 3, 3)
	leaders := c.leaders(topic, 3)
	partition := int32(0)
	for p, l := range leaders {
		if l != 1 { // not the controller's node: its loss would move the quorum too
			partition = int32(p)
		}
	}
	leader := c.nodes[leaders[partition]-1]
	isr := func() []int32 {
		var got []int32
		c.nodes[0].Call(func(b *broker.Node) {
			if s, ok := b.Image().PartitionByName(topic, partition); ok {
				got = slices.Clone(s.ISR)
			}
		})
		return got
	}
	producer := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(what string) {
		ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
		defer cancel()
		start := time.Now()
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: partition, Value: []byte(what)}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce to partition %d led by node %d (%s): %v after %s", partition, leaders[partition], what, err, time.Since(start).Round(time.Millisecond))
		}
	}
	produce("before")

	silentFrame(t, leader.Addr("PLAINTEXT"), 64<<20, 8)
	silentFrame(t, leader.Addr("PLAINTEXT"), 64<<20, 8)
	for i := range 15 {
		produce(fmt.Sprint("silent-", i))
		time.Sleep(100 * time.Millisecond)
	}

	partialFrames(t, leader.Addr("PLAINTEXT"), 6)
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := isr(); len(got) != 3 {
			t.Fatalf("partition %d's ISR shrank to %v while clients stalled its leader's client plane", partition, got)
		}
	}
	c.waitFor("the leader's clients served again", 10*time.Second, func() bool {
		_, err := apiVersionsLatency(leader.Addr("PLAINTEXT"), time.Second)
		return err == nil
	})
	produce("after")
	if got := isr(); len(got) != 3 {
		t.Errorf("partition %d's ISR is %v after the attack", partition, got)
	}
}
