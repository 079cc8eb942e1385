package realnet

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	budget        *queueBudget
	// checks are the request limits and the core's pre-check, applied by
	// the connection readers (precheck.go).
	checks *requestChecks

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
	// goroutines counts every goroutine the Network started, for Close.
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
}

var _ env.Network = (*Network)(nil)

// newNetwork builds the network of a node whose event loop is loop.
func newNetwork(loop *Loop, cfg config.Broker, logger *slog.Logger) *Network {
	n := &Network{
		loop:          loop,
		logger:        logger,
		limits:        cfg.Limits,
		frameBytesMax: cfg.SocketRequestMaxBytes,
		budget:        newQueueBudget(cfg.Limits.RequestsQueuedMax, cfg.Limits.RequestBytesQueuedMax),
		checks:        newRequestChecks(cfg.Limits),
		conns:         map[env.ConnID]*serverConn{},
		nextConnID:    1,

		authenticationTimeout: authenticationTimeoutDefault,
	}
	n.peers = newPeerSet(n, cfg)
	return n
}

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

// admit registers an accepted connection and starts its reader and writer,
// or refuses it at max.connections.
func (n *Network) admit(listener string, c net.Conn) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		c.Close()
		return
	}
	if int64(len(n.conns)) >= int64(n.limits.ConnectionsMax) {
		n.mu.Unlock()
		n.logger.Warn("connection refused: max.connections reached", "listener", listener,
			"remote", c.RemoteAddr().String(), "max.connections", n.limits.ConnectionsMax)
		c.Close()
		return
	}
	id := n.nextConnID
	n.nextConnID++
	var la *auth.Listener
	if n.security != nil {
		la = n.security.Listener(listener)
		if cfg := la.ServerTLS(); cfg != nil {
			c = tls.Server(c, cfg) // the handshake runs on the reader (authenticateTransport)
		}
	}
	sc := newServerConn(n, id, listener, c)
	sc.auth = newConnAuth(la)
	n.conns[id] = sc
	n.goroutines.Add(2)
	n.mu.Unlock()
	go sc.readLoop()
	go sc.writeLoop()
}

// conn returns the live connection id, or nil.
func (n *Network) conn(id env.ConnID) *serverConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns[id]
}

// forget removes a finished connection.
func (n *Network) forget(id env.ConnID) {
	n.mu.Lock()
	delete(n.conns, id)
	n.mu.Unlock()
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
	n.closed = true
	n.mu.Unlock()
	n.CloseListeners()
	n.budget.close()
	n.checks.buffers.close()
	n.peers.close()
	n.goroutines.Wait()
}
