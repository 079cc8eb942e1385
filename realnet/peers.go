package realnet

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
	"strand/core/quorum"
	"strand/core/wire"
)

// Outbound connection settings.
const (
	// peerDialTimeout bounds one connection attempt to a peer.
	peerDialTimeout = 5 * time.Second
	// peerBackoffMin and peerBackoffMax bound the wait between failed
	// connection attempts (Kafka's reconnect.backoff.ms and .max.ms).
	peerBackoffMin = 50 * time.Millisecond
	peerBackoffMax = 1 * time.Second
	// peerResponseBytesMax bounds a response frame from a peer: a replica
	// fetch response is at most replica.fetch.response.max.bytes (10 MiB)
	// plus framing; anything far larger is a corrupt stream.
	peerResponseBytesMax = 256 << 20
	// peerClientID is the client_id of the node's own requests.
	peerClientID = "strand-node"
)

// ErrNoPeerAddress is the error a Send fails with when the peer's address is
// not known: not a voter for controller requests, and not registered with an
// endpoint on the inter-broker listener in the node's metadata image.
var ErrNoPeerAddress = errors.New("no address known for peer")

// ErrPeerConnection is the cause when a Send fails because its connection
// could not be made or broke before the response arrived.
var ErrPeerConnection = errors.New("peer connection failed")

// BrokerAddressFunc resolves a broker's inter-broker address on the event
// loop, from the node's metadata image.
type BrokerAddressFunc func(id env.NodeID) (address string, ok bool)

// plane separates controller traffic from broker traffic: they go to
// different listeners, so to different connections.
type plane uint8

const (
	planeController plane = iota + 1
	planeBroker
	// planeQuorum is Raft traffic between voters (quorum.IsVoterRequest),
	// on a connection of its own to the voter's controller listener, as
	// KRaft's Raft client has: queued behind a controller RPC's answer,
	// which waits for a commit, a follower's Fetch answer could wait for
	// itself.
	planeQuorum
)

func (p plane) String() string {
	switch p {
	case planeController:
		return "controller"
	case planeQuorum:
		return "quorum"
	}
	return "broker"
}

// peerKey names one outbound connection. The address is part of it, so a
// broker that re-registers elsewhere gets a fresh connection.
type peerKey struct {
	id      env.NodeID
	plane   plane
	address string
}

// peerSet is the node's outbound connections, one per peer and plane.
type peerSet struct {
	net *Network
	// voters are the controller listener addresses of
	// controller.quorum.voters.
	voters map[env.NodeID]string
	// brokerAddress is set once the core exists; it runs on the loop.
	brokerAddress BrokerAddressFunc
	// security authenticates each new connection (peerauth.go); nil
	// dials plaintext.
	security *peerSecurity

	mu     sync.Mutex
	conns  map[peerKey]*peerConn
	closed bool
}

func newPeerSet(n *Network, cfg config.Broker) *peerSet {
	voters := map[env.NodeID]string{}
	for _, v := range cfg.QuorumVoters {
		voters[v.ID] = v.Address()
	}
	return &peerSet{net: n, voters: voters, conns: map[peerKey]*peerConn{}}
}

// send routes req: controller RPCs (controller.Handles) to a voter's
// controller listener, everything else to the peer's inter-broker listener.
// It runs on the loop; done runs on the loop later, never inside send.
func (ps *peerSet) send(peer env.NodeID, req kmsg.Request, done func(kmsg.Response, error)) {
	key, ok := ps.route(peer, req)
	if !ok {
		ps.net.loop.Defer(func() {
			done(nil, fmt.Errorf("send %s to node %d: %w", kmsg.NameForKey(req.Key()), peer, ErrNoPeerAddress))
		})
		return
	}
	pc := ps.connFor(key)
	if pc == nil {
		return // shutting down: done may never run
	}
	pc.enqueue(req, done)
}

// route picks the listener address for req to peer: a voter's controller
// listener for controller RPCs and the metadata quorum's own (Vote,
// BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, Fetch of the metadata
// log), which must reach the voters before any broker is registered.
func (ps *peerSet) route(peer env.NodeID, req kmsg.Request) (peerKey, bool) {
	if controller.Handles(req) || quorum.IsQuorumRequest(req) {
		if address, ok := ps.voters[peer]; ok {
			p := planeController
			if quorum.IsVoterRequest(req) {
				p = planeQuorum
			}
			return peerKey{id: peer, plane: p, address: address}, true
		}
	}
	if ps.brokerAddress == nil {
		return peerKey{}, false
	}
	address, ok := ps.brokerAddress(peer)
	return peerKey{id: peer, plane: planeBroker, address: address}, ok
}

// connFor returns the connection for key, starting it if needed; nil once
// the set is closed.
func (ps *peerSet) connFor(key peerKey) *peerConn {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	pc := ps.conns[key]
	if pc == nil {
		pc = newPeerConn(ps.net, key)
		ps.conns[key] = pc
		ps.net.goroutines.Add(1)
		go pc.run()
	}
	return pc
}

// close stops every outbound connection; pending callbacks are dropped.
func (ps *peerSet) close() {
	ps.mu.Lock()
	ps.closed = true
	conns := make([]*peerConn, 0, len(ps.conns))
	for _, pc := range ps.conns { // order-independent: every one is closed
		conns = append(conns, pc)
	}
	ps.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
}

// outRequest is one request to a peer: encoded on the loop (so the core's
// request struct is never read by another goroutine), decoded against a
// fresh request of the same key and version.
type outRequest struct {
	correlationID int32
	key, version  int16
	frame         []byte
	done          func(kmsg.Response, error)
	// replicaFetch is a partition replica's Fetch (not one of the metadata
	// log's): its answer may be read into a recycled frame (frameFor).
	replicaFetch bool
}

// peerConn is one outbound connection with pipelining: a writer goroutine
// (run) that dials, writes queued requests and reconnects with backoff, and
// per connection a reader that matches responses by correlation id.
type peerConn struct {
	net *Network
	key peerKey

	mu   sync.Mutex
	cond sync.Cond
	// queue holds requests not yet written.
	queue []*outRequest
	// inFlight holds written requests awaiting a response.
	inFlight        map[int32]*outRequest
	correlationNext int32
	closed          bool
	conn            net.Conn
	// raw is conn's descriptor, for the loop's non-blocking writes; nil
	// when conn is not TCP.
	raw syscall.RawConn
	// writing is set while a goroutine writes to conn outside mu: the
	// writer, or the loop in writeDirect. unwritten is what the socket did
	// not take of the loop's last direct write (its request is in
	// inFlight already); the writer writes it before anything queued.
	writing   bool
	unwritten net.Buffers
	// draining is set when the connection's SASL session nears its end
	// (KIP-368's SessionLifetimeMillis; drainBefore): no new request is
	// written on it, and once every request in flight is answered the
	// writer ends it and run dials a new connection, which authenticates
	// afresh. Queued requests wait for it; none fails.
	draining bool
}

func newPeerConn(n *Network, key peerKey) *peerConn {
	pc := &peerConn{net: n, key: key, inFlight: map[int32]*outRequest{}}
	pc.cond.L = &pc.mu
	return pc
}

// enqueue encodes req and queues it, or writes it at once when nothing is
// queued or being written (writeDirect). Runs on the loop.
func (pc *peerConn) enqueue(req kmsg.Request, done func(kmsg.Response, error)) {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	id := pc.correlationNext
	pc.correlationNext++
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: id, ClientID: peerClientID}
	r := &outRequest{
		correlationID: id, key: req.Key(), version: req.GetVersion(),
		frame: wire.AppendRequest(nil, hdr, req), done: done,
		replicaFetch: req.Key() == kmsg.Fetch.Int16() && !quorum.IsQuorumRequest(req),
	}
	if pc.conn != nil && pc.raw != nil && !pc.writing && !pc.draining && len(pc.queue) == 0 && len(pc.unwritten) == 0 {
		pc.writeDirect(r)
		return
	}
	pc.queue = append(pc.queue, r)
	pc.mu.Unlock()
	pc.cond.Broadcast()
}

// writeDirect writes r on the loop, with one non-blocking write, so that a
// request does not wait for the writer goroutine to be woken and scheduled
// (a replica fetcher sends one request per round trip). Called with mu
// held; returns with it released. What the socket did not take is left to
// the writer (unwritten); a failed write closes the connection, whose
// reader then ends it and run fails the requests in flight.
func (pc *peerConn) writeDirect(r *outRequest) {
	c, raw, frame := pc.conn, pc.raw, r.frame
	r.frame = nil
	pc.inFlight[r.correlationID] = r
	pc.writing = true
	pc.mu.Unlock()
	rest, err := writeNonBlocking(raw, net.Buffers{frame})
	pc.mu.Lock()
	pc.writing = false
	wake := false
	switch {
	case err != nil:
		c.Close()
	case len(rest) > 0 && pc.conn == c:
		pc.unwritten = rest
		wake = true
	default:
		wake = len(pc.queue) > 0 || pc.draining // a draining writer waits for writing to end
	}
	pc.mu.Unlock()
	if wake {
		pc.cond.Broadcast()
	}
}

// run connects and writes until the connection set closes.
func (pc *peerConn) run() {
	defer pc.net.goroutines.Done()
	backoff := peerBackoffMin
	for {
		if !pc.waitForWork() {
			return
		}
		c, err := net.DialTimeout("tcp", pc.key.address, peerDialTimeout)
		if err != nil {
			pc.failAll(fmt.Errorf("%w: dial node %d (%s) at %s: %w", ErrPeerConnection, pc.key.id, pc.key.plane, pc.key.address, err))
			if !pc.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, peerBackoffMax)
			continue
		}
		var session peerSession
		c, session, err = pc.net.peers.security.handshake(pc.key, c)
		if err != nil {
			pc.net.logger.Warn("authentication to peer failed", "peer", pc.key.id, "plane", pc.key.plane.String(), "address", pc.key.address, "err", err)
			pc.failAll(fmt.Errorf("%w: authenticate to node %d (%s) at %s: %w", ErrPeerConnection, pc.key.id, pc.key.plane, pc.key.address, err))
			if !pc.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, peerBackoffMax)
			continue
		}
		backoff = peerBackoffMin
		if !pc.attach(c) {
			c.Close()
			return
		}
		stopDrain := pc.drainBefore(c, session.lifetime)
		readerDone := make(chan error, 1)
		go func() { readerDone <- pc.readLoop(c) }()
		writeErr := pc.writeLoop(c)
		stopDrain()
		c.Close()
		readErr := <-readerDone
		pc.mu.Lock()
		pc.conn, pc.raw, pc.unwritten, pc.draining = nil, nil, nil, false // unwritten's request is in inFlight, failed below
		pc.mu.Unlock()
		if errors.Is(writeErr, errSessionRenewal) {
			// Drained: nothing in flight to fail; queued requests go on
			// the next connection.
			continue
		}
		cause := errors.Join(writeErr, readErr)
		pc.mu.Lock()
		closing := pc.closed
		pc.mu.Unlock()
		if closing {
			return // the node is stopping: nobody waits for the callbacks
		}
		pc.net.logger.Info("peer connection ended", "peer", pc.key.id, "plane", pc.key.plane.String(), "address", pc.key.address, "err", cause)
		pc.failAll(fmt.Errorf("%w: node %d (%s) at %s: %w", ErrPeerConnection, pc.key.id, pc.key.plane, pc.key.address, cause))
	}
}

// waitForWork blocks until a request is queued; false once closed.
func (pc *peerConn) waitForWork() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for !pc.closed && len(pc.queue) == 0 {
		pc.cond.Wait()
	}
	return !pc.closed
}

// sleep waits d unless the connection closes first (false).
func (pc *peerConn) sleep(d time.Duration) bool {
	timer := time.AfterFunc(d, func() { pc.cond.Broadcast() })
	defer timer.Stop()
	deadline := time.Now().Add(d)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for !pc.closed && time.Now().Before(deadline) {
		pc.cond.Wait()
	}
	return !pc.closed
}

// attach records the live connection, so close can break it.
func (pc *peerConn) attach(c net.Conn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return false
	}
	pc.conn = c
	pc.raw = nil
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			pc.raw = raw
		}
	}
	return true
}

// writeLoop writes queued requests, moving each to inFlight first, until a
// write fails or the set closes. It returns the write error, or nil when
// the reader broke the connection.
func (pc *peerConn) writeLoop(c net.Conn) error {
	var frames net.Buffers
	for {
		pc.mu.Lock()
		for !pc.closed && pc.conn == c && !pc.drainedLocked() &&
			(pc.writing || (len(pc.unwritten) == 0 && (pc.draining || len(pc.queue) == 0))) {
			pc.cond.Wait()
		}
		if pc.closed || pc.conn != c {
			pc.mu.Unlock()
			return nil
		}
		if pc.drainedLocked() {
			pc.mu.Unlock()
			return errSessionRenewal
		}
		frames = append(frames[:0], pc.unwritten...)
		pc.unwritten = nil
		for _, r := range pc.queue {
			if pc.draining {
				break
			}
			pc.inFlight[r.correlationID] = r
			frames = append(frames, r.frame)
			r.frame = nil
		}
		if !pc.draining {
			clear(pc.queue)
			pc.queue = pc.queue[:0]
		}
		pc.writing = true
		pc.mu.Unlock()
		toWrite := frames
		_, err := toWrite.WriteTo(c)
		pc.mu.Lock()
		pc.writing = false
		pc.mu.Unlock()
		if err != nil {
			return err
		}
		clear(frames)
	}
}

// readLoop reads responses and hands each to its request's callback on the
// loop. On error it detaches the connection so the writer stops too.
func (pc *peerConn) readLoop(c net.Conn) error {
	err := pc.readResponses(c)
	pc.mu.Lock()
	if pc.conn == c {
		pc.conn, pc.raw = nil, nil
	}
	pc.mu.Unlock()
	pc.cond.Broadcast()
	c.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (pc *peerConn) readResponses(c net.Conn) error {
	r := bufio.NewReaderSize(c, readBufferBytes)
	var prefix [4]byte
	for {
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return err
		}
		length, err := wire.FrameLength(prefix, peerResponseBytesMax)
		if err != nil {
			return err
		}
		if length < 4 {
			return fmt.Errorf("response frame of %d bytes has no correlation id", length)
		}
		idBytes, err := r.Peek(4)
		if err != nil {
			return err
		}
		id := int32(binary.BigEndian.Uint32(idBytes))
		pc.mu.Lock()
		out := pc.inFlight[id]
		pc.mu.Unlock()
		if out == nil {
			return fmt.Errorf("response with correlation id %d, which no request awaits", id)
		}
		fb := pc.frameFor(out, int(length)) // the response aliases it
		if _, err := io.ReadFull(r, fb.buf); err != nil {
			return err // out stays in flight: run fails it
		}
		pc.mu.Lock()
		delete(pc.inFlight, id)
		drained := pc.draining && len(pc.inFlight) == 0
		pc.mu.Unlock()
		if drained {
			pc.cond.Broadcast()
		}
		proto := kmsg.RequestForKey(out.key)
		proto.SetVersion(out.version)
		_, resp, err := wire.ParseResponse(fb.buf, proto)
		if err != nil {
			pc.net.loop.Post(func() { out.done(nil, err) })
			return err
		}
		pc.net.loop.Post(func() {
			out.done(resp, nil)
			if fb.pooled {
				replicaFetchFrames.release(fb)
			}
		})
	}
}

// replicaFetchFrames is the process's pool of replica Fetch response frames
// (framepool.go). A follower appends the record batches of each answer to
// its logs straight from the frame, and under a replication load a fresh
// frame per answer (about 100 KiB each at half the 3-node peak) was the
// follower's main allocation: the runtime zeroed it, and the kernel faulted
// its pages in again after the scavenger returned them.
var replicaFetchFrames framePool

// frameFor returns the buffer to read out's response of length bytes into.
// A replica Fetch answer (a Fetch on the broker plane that is not the
// metadata log's, which route sends there only to a peer missing from
// controller.quorum.voters; only core/broker's replica fetcher sends those)
// gets a pooled one, recycled once the core has handled the answer and
// diskio has written the batches it appended from it, as Produce frames
// are: the fetcher keeps nothing of an answer after its
// callback returns but those appends (log.AppendAsFollower queues the very
// slices; producer-state catch-up and the replica state machine take
// values). Any other response gets a fresh buffer, as its handler may keep
// referring to it (a metadata-log answer's records, for one).
func (pc *peerConn) frameFor(out *outRequest, length int) *frameBuf {
	if pc.key.plane != planeBroker || !out.replicaFetch {
		return &frameBuf{buf: make([]byte, length)}
	}
	return replicaFetchFrames.get(length)
}

// failAll fails every queued and in-flight request with err, on the loop.
func (pc *peerConn) failAll(err error) {
	pc.mu.Lock()
	failed := make([]*outRequest, 0, len(pc.queue)+len(pc.inFlight))
	failed = append(failed, pc.queue...)
	clear(pc.queue)
	pc.queue = pc.queue[:0]
	for _, r := range pc.inFlight { // order-independent: sorted below
		failed = append(failed, r)
	}
	clear(pc.inFlight)
	pc.mu.Unlock()
	sortByCorrelation(failed)
	for _, r := range failed {
		pc.net.loop.Post(func() { r.done(nil, err) })
	}
}

// close stops the connection; pending callbacks are dropped.
func (pc *peerConn) close() {
	pc.mu.Lock()
	pc.closed = true
	c := pc.conn
	pc.mu.Unlock()
	pc.cond.Broadcast()
	if c != nil {
		c.Close()
	}
}

// sortByCorrelation orders failed requests as they were sent, so that the
// core hears of failures in its own order.
func sortByCorrelation(rs []*outRequest) {
	slices.SortFunc(rs, func(a, b *outRequest) int { return cmp.Compare(a.correlationID, b.correlationID) })
}
