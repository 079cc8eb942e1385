package realnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/admission"
	"strand/core/config"
	"strand/core/env"
	"strand/core/wire"
	"strand/realnet/auth"
)

// Network is env.Network on TCP: inbound client and peer connections
// (Reply, Skip, Close) and the node's own outbound requests to its peers
// (Send). Every env.Network method runs on the node's event loop.
type Network struct {
	loop   *Loop
	logger *slog.Logger
	limits config.Limits
	// frameBytesMax is socket.request.max.bytes.
	frameBytesMax int32
	// checks are the request limits and the core's pre-check, applied by
	// the connection readers (precheck.go).
	checks *requestChecks
	// budgets are the planes' queued.max.requests and
	// queued.max.request.bytes (admission.go).
	budgets *planeBudgets
	// responses is strand.response.buffered.bytes.max: the client-plane
	// answers held until written, and the requests parked while it is
	// full (admission.go).
	responses *responseBudget
	// controllerListeners and interBrokerListener are the listeners whose
	// connections are the control plane's: all of a controller listener's,
	// and the inter-broker listener's replication connections.
	controllerListeners []string
	interBrokerListener string
	// deadlines are the connections' deadlines, which the reaper checks.
	deadlines admission.Deadlines
	// startedAt and clockMs are the connections' coarse clock: the reaper
	// stores the milliseconds since startedAt at every tick, and the
	// connections stamp their deadlines with it (nowMs), so that no request
	// pays for a clock read.
	startedAt time.Time
	clockMs   atomic.Int64
	tickMs    int64

	// gateMu guards gate, the connection quotas (admission.Gate).
	gateMu sync.Mutex
	gate   *admission.Gate

	// handler, supported and advertised are set once by setHandler, before
	// the first connection is accepted, and only read afterwards.
	handler    env.Handler
	supported  func(key, version int16) bool
	advertised func(listener string) []kmsg.ApiVersionsResponseApiKey

	mu         sync.Mutex
	conns      map[env.ConnID]*serverConn
	nextConnID env.ConnID
	listeners  []net.Listener
	closed     bool
	// stopped is closed by Shutdown, for the reaper and for accept loops
	// waiting out a connection creation rate; reaped is closed when the
	// reaper has exited.
	stopped chan struct{}
	reaped  chan struct{}
	// resumed is closed when the response budget's resumer has exited.
	resumed chan struct{}
	// goroutines counts the goroutines of listeners and connections, for
	// Shutdown.
	goroutines sync.WaitGroup

	peers *peerSet
	// security is the listeners' authentication (TLS, SASL, principals);
	// nil serves every listener as PLAINTEXT with ANONYMOUS principals
	// (tests that build a bare Network).
	security *auth.Security
	// authenticationTimeout is authenticationTimeoutDefault; tests
	// shorten it before serving.
	authenticationTimeout time.Duration
	// expiredSessions counts connections closed because their SASL
	// session ended without re-authentication (KIP-368).
	expiredSessions atomic.Int64
	// scram is the SCRAM credentials the core last published, which the
	// listeners' SCRAM mechanisms look users up in (scram.go).
	scram *scramStore
}

var _ env.Network = (*Network)(nil)

// newNetwork builds the network of a node whose event loop is loop, and
// starts its reaper. It resolves the host names of
// max.connections.per.ip.overrides, and fails if one does not resolve.
func newNetwork(loop *Loop, cfg config.Broker, logger *slog.Logger) (*Network, error) {
	overrides, err := resolveIPOverrides(cfg.Limits.ConnectionsPerIPOverrides)
	if err != nil {
		return nil, err
	}
	n := &Network{
		loop:                loop,
		logger:              logger,
		limits:              cfg.Limits,
		frameBytesMax:       cfg.SocketRequestMaxBytes,
		budgets:             newPlaneBudgets(cfg.Limits.RequestsQueuedMax, cfg.Limits.RequestBytesQueuedMax),
		responses:           newResponseBudget(cfg.Limits.ResponseBufferedBytesMax),
		checks:              newRequestChecks(cfg.Limits),
		controllerListeners: cfg.ControllerListenerNames,
		interBrokerListener: cfg.InterBrokerListenerName,
		deadlines:           admission.DeadlinesOf(cfg.Limits),
		tickMs:              admission.DeadlinesOf(cfg.Limits).CheckEveryMs(),
		startedAt:           time.Now(),
		conns:               map[env.ConnID]*serverConn{},
		nextConnID:          1,
		stopped:             make(chan struct{}),
		reaped:              make(chan struct{}),
		resumed:             make(chan struct{}),
		scram:               &scramStore{},

		authenticationTimeout: authenticationTimeoutDefault,
	}
	n.gate = admission.NewGate(cfg, overrides, 0)
	n.peers = newPeerSet(n, cfg)
	go n.reap()
	go func() {
		defer close(n.resumed)
		n.responses.resume(loop)
	}()
	return n, nil
}

// resolveIPOverrides turns the hosts of max.connections.per.ip.overrides
// into the addresses connections come from, as Kafka's
// InetAddress.getByName does once at start-up.
func resolveIPOverrides(byHost map[string]int32) (map[string]int32, error) {
	byIP := map[string]int32{}
	for host, n := range byHost { // order-independent: each host maps on its own
		if ip := net.ParseIP(host); ip != nil {
			byIP[ip.String()] = n
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: host %s does not resolve: %v", host, err)
		}
		for _, ip := range ips {
			byIP[ip.String()] = n
		}
	}
	return byIP, nil
}

// nowMs is the connections' coarse clock: milliseconds since the Network
// started, rounded up to the reaper's next tick. It is never behind the
// true time, so a deadline stamped with it never fires early, and at most
// two ticks late (a tick is a tenth of the shortest deadline:
// admission.Deadlines.CheckEveryMs).
func (n *Network) nowMs() int64 { return n.clockMs.Load() + n.tickMs }

// setHandler names the node requests are delivered to, the version table
// it advertises on each listener (KIP-511's answer to an unsupported
// ApiVersions lists the connection's listener's) and the table it accepts
// on any listener, from which the readers' acceptance test is built, so
// that what is accepted cannot drift from the node's tables
// (broker.Node.AdvertisedVersions, AcceptedVersions); the node refuses
// what the request's own listener does not serve.
func (n *Network) setHandler(h env.Handler, advertised func(listener string) []kmsg.ApiVersionsResponseApiKey, accepted []kmsg.ApiVersionsResponseApiKey) {
	n.handler = h
	n.advertised = advertised
	n.supported = wire.VersionsSupported(accepted)
}

// Serve accepts connections on l until the Network closes. name is the
// listener's name, for logs.
func (n *Network) Serve(name string, l net.Listener) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		l.Close()
		return errors.New("realnet: network closed")
	}
	if n.handler == nil {
		panic("realnet: Serve before setHandler")
	}
	n.listeners = append(n.listeners, l)
	n.goroutines.Add(1)
	go n.accept(name, l)
	return nil
}

// accept runs one listener's accept loop.
func (n *Network) accept(name string, l net.Listener) {
	defer n.goroutines.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				n.logger.Error("accept failed; listener stops", "listener", name, "err", err)
			}
			return
		}
		n.admit(name, c)
	}
}

// admit asks the gate about an accepted connection (admission.Gate:
// Kafka's connection quotas): a connection over a creation rate waits here,
// holding up the listener's next accepts as Kafka's acceptor does; one
// over a count limit is closed at once, counted, and reported in the
// refusals logged once per admission.RefusalReportIntervalMs. An admitted
// one is registered and its reader and writer start.
func (n *Network) admit(listener string, c net.Conn) {
	ip := hostOf(c.RemoteAddr())
	var admitted admission.Admitted
	for {
		n.gateMu.Lock()
		a, v := n.gate.Open(listener, ip, n.nowMs())
		n.gateMu.Unlock()
		if v.ThrottleMs > 0 {
			select {
			case <-n.stopped:
				c.Close()
				return
			case <-time.After(time.Duration(v.ThrottleMs) * time.Millisecond):
			}
			continue
		}
		if v.Refused != admission.RefusedNone {
			c.Close()
			n.logRefusals()
			return
		}
		admitted = a
		break
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.closeAdmitted(admitted)
		c.Close()
		return
	}
	id := n.nextConnID
	n.nextConnID++
	var la *auth.Listener
	var gather *recordGatherer
	if n.security != nil {
		la = n.security.Listener(listener)
		if cfg := la.ServerTLS(); cfg != nil {
			gather = newRecordGatherer(c)
			c = tls.Server(gather, cfg) // the handshake runs on the reader (authenticateTransport)
		}
	}
	sc := newServerConn(n, id, listener, c, admitted)
	sc.gather = gather
	sc.auth = newConnAuth(la)
	n.conns[id] = sc
	n.goroutines.Add(2)
	n.mu.Unlock()
	go sc.readLoop()
	go sc.writeLoop()
}

// hostOf is a connection's client address as the gate counts it: the IP
// without its port.
func hostOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// closeAdmitted gives an admitted connection back to the gate.
func (n *Network) closeAdmitted(a admission.Admitted) {
	n.gateMu.Lock()
	n.gate.Close(a)
	n.gateMu.Unlock()
}

// refusalLogIntervalMs is how often, at most, refused connections are
// logged: one line with their count per interval, however many there were
// (a variable so that tests need not wait 10 s).
var refusalLogIntervalMs int64 = admission.RefusalReportIntervalMs

// logRefusals logs the refused connections if a report is due: at most one
// line per refusalLogIntervalMs, with the count.
func (n *Network) logRefusals() {
	n.gateMu.Lock()
	report, due := n.gate.RefusalsDue(n.nowMs(), refusalLogIntervalMs)
	n.gateMu.Unlock()
	if due {
		n.logger.Warn("connections refused", "count", report.Total(), "by", report.String(),
			"last_listener", report.LastListener, "last_remote", report.LastIP,
			"over_ms", n.nowMs()-report.SinceMs)
	}
}

// reap is the Network's deadline keeper: every Deadlines.CheckEveryMs it
// advances the coarse clock, shuts down the connections that overstayed a
// deadline (connections.max.idle.ms, strand.request.read.timeout.ms — a
// tenth of it on a plane whose budget makes requests wait, so that stalled
// requests give way to those waiting — and
// strand.response.write.timeout.ms: a writer blocked on a client that does
// not read returns at once, and its Fetch regions are released), and logs
// refusals due.
func (n *Network) reap() {
	defer close(n.reaped)
	tick := time.NewTicker(time.Duration(n.tickMs) * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.stopped:
			return
		case <-tick.C:
		}
		nowMs := time.Since(n.startedAt).Milliseconds()
		n.clockMs.Store(nowMs)
		n.mu.Lock()
		conns := make([]*serverConn, 0, len(n.conns))
		for _, sc := range n.conns { // order-independent: each is checked on its own
			conns = append(conns, sc)
		}
		n.mu.Unlock()
		pressured := n.budgets.pressured()
		responsesFull := n.responses.full()
		for _, sc := range conns {
			if e := sc.expired(nowMs, pressured[sc.plane()], responsesFull); e != admission.NotExpired {
				n.logger.Info("closing connection: deadline passed", "conn", sc.id, "listener", sc.listener,
					"remote", sc.c.RemoteAddr().String(), "deadline", e.Key())
				sc.shutdown()
			}
		}
		n.logRefusals()
	}
}

// conn returns the live connection id, or nil.
func (n *Network) conn(id env.ConnID) *serverConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns[id]
}

// forget removes a finished connection and gives it back to the gate.
func (n *Network) forget(sc *serverConn) {
	n.mu.Lock()
	delete(n.conns, sc.id)
	n.mu.Unlock()
	n.closeAdmitted(sc.admitted)
}

// Reply encodes resp and queues it behind every earlier request of conn.
func (n *Network) Reply(conn env.ConnID, correlationID int32, resp kmsg.Response) {
	sc := n.conn(conn)
	if sc == nil {
		return
	}
	sc.answer(correlationID, wire.AppendResponse(nil, correlationID, resp))
}

// ReplyFrame queues a response with file regions (Fetch) behind every
// earlier request of conn; the writer sends the regions with sendfile
// (framewriter.go). On a closed connection the frame is released at once.
func (n *Network) ReplyFrame(conn env.ConnID, correlationID int32, frame env.Frame) {
	sc := n.conn(conn)
	if sc == nil {
		if frame.Release != nil {
			frame.Release()
		}
		return
	}
	frame, err := materialiseOnLoop(frame)
	if err != nil {
		n.logger.Warn("closing connection: a Fetch region cannot be read", "conn", conn, "err", err)
		if frame.Release != nil {
			frame.Release()
		}
		sc.closeAt(correlationID)
		return
	}
	read, buf, ok := readTailOnLoop(frame)
	if ok {
		// The bytes are copied: the regions need no pin any more.
		if frame.Release != nil {
			n.loop.Defer(frame.Release)
		}
		frame = read
	}
	sc.answerWith(correlationID, nil, frame, buf)
}

// Skip marks a request answered without a response (acks=0).
func (n *Network) Skip(conn env.ConnID, correlationID int32) {
	if sc := n.conn(conn); sc != nil {
		sc.answer(correlationID, nil)
	}
}

// Close closes an inbound connection in request order, in place of
// answering (conn, correlationID) (env.Network.Close): the answers to the
// requests before it are written first, then the FIN, and the requests
// read after it are not delivered (serverConn.closeAt). HandleClosed
// follows on the loop once the client has closed its end too, or
// closeLingerMs after the FIN.
func (n *Network) Close(conn env.ConnID, correlationID int32) {
	if sc := n.conn(conn); sc != nil {
		sc.closeAt(correlationID)
	}
}

// Send sends req to peer; see peerSet.send.
func (n *Network) Send(peer env.NodeID, req kmsg.Request, done func(kmsg.Response, error)) {
	n.peers.send(peer, req, done)
}

// CloseListeners stops accepting connections, and closes the client
// connections already open, for the last phase of a shutdown.
func (n *Network) CloseListeners() {
	n.mu.Lock()
	listeners := n.listeners
	n.listeners = nil
	conns := make([]*serverConn, 0, len(n.conns))
	for _, sc := range n.conns { // order-independent: every one is closed
		conns = append(conns, sc)
	}
	n.mu.Unlock()
	for _, l := range listeners {
		l.Close()
	}
	for _, sc := range conns {
		sc.shutdown()
	}
}

// Shutdown stops everything: listeners, inbound and outbound connections.
// It waits for the Network's goroutines to exit. Callbacks still pending are
// dropped; the node is going away.
func (n *Network) Shutdown() {
	n.mu.Lock()
	if !n.closed {
		close(n.stopped)
	}
	n.closed = true
	n.mu.Unlock()
	n.CloseListeners()
	n.budgets.close()
	n.responses.close()
	n.checks.buffers.close()
	n.peers.close()
	n.goroutines.Wait()
	<-n.reaped
	<-n.resumed
}
