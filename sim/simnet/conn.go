package simnet

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/admission"
	"strand/core/env"
	"strand/core/wire"
	"strand/sim/sched"
)

// frame is one encoded message in flight, or the FIN that closes a
// direction.
type frame struct {
	// bytes is the whole frame, size prefix included, in its own buffer.
	bytes    []byte
	fin      bool
	arriveNs int64
	// partialClaimedBytes > 0 marks the start of a request that never
	// completes (ClientConn.SendPartial): bytes is its size prefix, which
	// claims this many bytes, and what of its body was sent.
	partialClaimedBytes int32
}

// direction is one way of a connection: a FIFO of frames, of which only the
// head has a delivery event scheduled, so a frame can never overtake the one
// before it whatever latencies were drawn.
type direction struct {
	c        *conn
	from, to *Host
	queue    []frame
	head     int
	// lastArrivalNs is when the newest frame arrives; a later frame arrives
	// no earlier.
	lastArrivalNs int64
	delivery      sched.Handle
	// blockedSinceNs is when the head frame was first found blocked by a
	// partition, or -1.
	blockedSinceNs int64
	// blackholed directions swallow every frame, silently.
	blackholed bool
	// deliverFn is d.deliver as a func value, made once per direction so
	// that scheduling a delivery allocates nothing.
	deliverFn func()
}

func (d *direction) inFlight() int { return len(d.queue) - d.head }

// drop discards every frame in flight.
func (d *direction) drop() {
	d.delivery.Cancel()
	clear(d.queue)
	d.queue = d.queue[:0]
	d.head = 0
	d.blockedSinceNs = -1
}

// pendingRequest is a request the client end sent and awaits a response to.
type pendingRequest struct {
	correlationID int32
	req           kmsg.Request
	done          func(kmsg.Response, error)
}

// awaitingReply is a request delivered to the server end, in arrival order.
// A reply waits in frame until every earlier request is answered.
type awaitingReply struct {
	correlationID int32
	answered      bool
	// frame is the encoded response; nil for a skipped request.
	frame []byte
	// closes marks the request the server closes on (closeInOrder): it is
	// answered by the close, and is the last one awaiting.
	closes bool
}

// conn is one connection. The client end sends requests and gets responses;
// the server end, a node, gets requests and replies.
type conn struct {
	net            *Network
	id             env.ConnID
	client, server *Host
	toServer       direction
	toClient       direction

	// clientDone: the client end has closed or been told the connection
	// ended; it sends nothing more and gets no more callbacks.
	clientDone      bool
	correlationNext int32
	outstanding     []pendingRequest
	// onClosed, if set, tells a workload client that the connection ended
	// under it.
	onClosed func(error)

	// serverDone: the server end has closed or been told.
	serverDone bool
	// serverSaw: a request reached the server's handler, so the handler
	// knows the connection and must hear of its end.
	serverSaw bool
	awaiting  []awaitingReply
	// closing: the server closes in request order (closeInOrder) once the
	// requests before the one it closes on are answered; requests that
	// arrive meanwhile are not delivered. closeTimer closes it anyway
	// after env.CloseAnswersWaitMs.
	closing    bool
	closeTimer sched.Handle
	// peerKey is the client node's key for this connection in its peers.
	peerKey peerKey
	// listener is the server's listener the connection was made to, and
	// principal what the client end authenticated as there: every
	// request delivered carries both.
	listener, principal string

	// What the server end holds of its node's limits (admission.go), when
	// the node has them: the plane its requests are counted in, the gate's
	// record of it, its deadlines, and the budget a partial frame holds.
	plane        admission.Plane
	admitted     admission.Admitted
	hasTicket    bool
	acct         admission.ConnAccount
	partialBytes int64
	// partialSent: the client sent a partial frame, and can send nothing
	// more.
	partialSent bool
	// readingStopped: the client end reads nothing more
	// (ClientConn.StopReading). Responses to it stay in the socket:
	// unreadBytes of them, of which those past sendBufferBytes are the
	// server's, counted in acct (heldBytes) with its write stalled.
	readingStopped bool
	unreadBytes    int64
	heldBytes      int64
}

func newConn(n *Network, id env.ConnID, client, server *Host) *conn {
	c := &conn{net: n, id: id, client: client, server: server, acct: admission.NewConnAccount(1<<62, n.nowMs())}
	if client.isNode {
		c.plane = admission.PlaneControl
	}
	c.toServer = direction{c: c, from: client, to: server, blockedSinceNs: -1}
	c.toClient = direction{c: c, from: server, to: client, blockedSinceNs: -1}
	c.toServer.deliverFn = c.toServer.deliver
	c.toClient.deliverFn = c.toClient.deliver
	return c
}

// closed reports whether both ends are done, so that the connection is
// gone from the network.
func (c *conn) closed() bool { return c.clientDone && c.serverDone }

func (c *conn) trace(kind string, node *Host, a, b int64) {
	c.net.s.Trace(sched.Record{Kind: kind, Node: node.proc.TraceID(), A: int64(c.id), B: a, C: b})
}

// transmit puts a frame on the wire in direction d.
func (c *conn) transmit(d *direction, bytes []byte, fin bool) {
	c.transmitFrame(d, frame{bytes: bytes, fin: fin})
}

// transmitPartial puts the start of a request that never completes on the
// wire to the server.
func (c *conn) transmitPartial(bytes []byte, claimedBytes int32) {
	c.transmitFrame(&c.toServer, frame{bytes: bytes, partialClaimedBytes: claimedBytes})
}

// transmitFrame puts f on the wire in direction d.
func (c *conn) transmitFrame(d *direction, f frame) {
	bytes, fin := f.bytes, f.fin
	n := c.net
	n.stats.FramesSent++
	if (d == &c.toClient && c.clientDone) || (d == &c.toServer && c.serverDone) {
		// The receiving end has closed: its kernel discards the bytes.
		c.trace("net.discarded", d.to, int64(len(bytes)), 0)
		return
	}
	if d.blackholed {
		c.trace("net.swallowed", d.to, int64(len(bytes)), 0)
		return
	}
	if !fin && n.faults.BreakOneIn > 0 && n.r.IntN(n.faults.BreakOneIn) == 0 {
		c.breakConn("fault")
		return
	}
	if !d.to.proc.Up() {
		c.breakConn("refused")
		return
	}
	arriveNs := max(n.s.NowNs()+n.latencyNs(d.from.id, d.to.id), d.lastArrivalNs)
	d.lastArrivalNs = arriveNs
	if d.inFlight() >= queuedFramesMax {
		panic(fmt.Sprintf("simnet: %d frames in flight on connection %d: runaway sender", d.inFlight(), c.id))
	}
	f.arriveNs = arriveNs
	d.queue = append(d.queue, f)
	if d.inFlight() == 1 {
		d.delivery = d.to.proc.At(arriveNs, d.deliverFn)
	}
}

// deliver hands the head frame to the receiving end, unless a partition
// blocks the link. It runs as an event of the receiving host.
func (d *direction) deliver() {
	c := d.c
	n := c.net
	if c.closed() || d.inFlight() == 0 {
		panic(fmt.Sprintf("simnet: delivery on connection %d with %d frames in flight, closed=%v",
			c.id, d.inFlight(), c.closed()))
	}
	if n.link(d.from.id, d.to.id).cut() {
		d.blocked()
		return
	}
	d.blockedSinceNs = -1
	if d == &c.toServer && !c.admitFrame(d.queue[d.head]) {
		d.retryLater() // no room in the node's budget: the bytes wait in the socket
		return
	}
	if d == &c.toClient && c.readingStopped {
		// The client never reads: the frame stays in the socket, and so
		// does every one after it.
		return
	}
	head := d.queue[d.head]
	d.queue[d.head] = frame{}
	d.head++
	if d.inFlight() == 0 {
		d.queue = d.queue[:0]
		d.head = 0
	} else {
		d.delivery = d.to.proc.At(max(d.queue[d.head].arriveNs, n.s.NowNs()), d.deliverFn)
	}
	n.stats.FramesDelivered++
	if d == &c.toServer {
		c.serverReceive(head)
	} else {
		c.clientReceive(head)
	}
}

// blocked handles a head frame that a partition stops: the sender
// retransmits until the connection times out, unless the connection turns
// into a black hole.
func (d *direction) blocked() {
	c := d.c
	n := c.net
	nowNs := n.s.NowNs()
	if d.blockedSinceNs < 0 {
		d.blockedSinceNs = nowNs
		if sched.Chance(n.r, n.faults.BlackholePerMille) {
			d.blackhole()
			return
		}
	}
	if nowNs-d.blockedSinceNs >= n.faults.ConnTimeoutNs {
		c.breakConn("timeout")
		return
	}
	n.stats.Retransmits++
	d.delivery = d.to.proc.After(n.faults.RetransmitNs, d.deliverFn)
}

// blackhole makes d swallow its frames in flight and every later one.
func (d *direction) blackhole() {
	d.c.net.stats.Blackholes++
	d.c.trace("net.blackhole", d.to, int64(d.inFlight()), 0)
	d.blackholed = true
	d.drop()
}

// clientSend sends req from the client end. done gets the response, or an
// error once the connection ends first. A Produce with acks=0 gets no
// response: done runs with (nil, nil) once the request is on the wire.
func (c *conn) clientSend(req kmsg.Request, done func(kmsg.Response, error)) {
	if c.partialSent {
		panic(fmt.Sprintf("simnet: a request sent on connection %d behind a partial frame", c.id))
	}
	if c.clientDone {
		// The caller has not yet heard that the connection ended (it was
		// refused, or the news is in flight): it hears now, one latency on.
		c.client.proc.After(c.net.latencyNs(c.client.id, c.server.id), func() { done(nil, ErrConnBroken) })
		return
	}
	correlationID := c.correlationNext
	c.correlationNext++
	header := env.RequestHeader{
		APIKey:        req.Key(),
		APIVersion:    req.GetVersion(),
		CorrelationID: correlationID,
		ClientID:      c.client.clientID,
	}
	c.net.scratch = wire.AppendRequest(c.net.scratch[:0], header, req)
	bytes := c.net.ownFrame()
	c.trace("net.send", c.client, int64(correlationID), int64(req.Key()))
	if produce, ok := req.(*kmsg.ProduceRequest); ok && produce.Acks == 0 {
		c.client.proc.Post(func() { done(nil, nil) })
	} else {
		c.outstanding = append(c.outstanding, pendingRequest{correlationID: correlationID, req: req, done: done})
	}
	c.transmit(&c.toServer, bytes, false)
}

// serverReceive decodes a request frame and hands it to the node, or ends
// the server side on a FIN.
func (c *conn) serverReceive(f frame) {
	server := c.server
	if c.serverDone {
		panic(fmt.Sprintf("simnet: frame for connection %d after its server end closed", c.id))
	}
	if f.fin {
		c.trace("net.fin", server, 0, 0)
		c.serverEnd()
		if c.serverSaw {
			server.handler.HandleClosed(c.id)
		}
		return
	}
	if c.closing {
		// Behind the request the server closes on: Kafka, reading one
		// request at a time, would never read it (env.Network.Close).
		c.trace("net.unread", server, int64(len(f.bytes)), 0)
		return
	}
	if f.partialClaimedBytes > 0 {
		// The node reads the start of a request whose rest never comes:
		// its budget is held (admitFrame) until the read deadline.
		c.trace("net.partial", server, int64(f.partialClaimedBytes), int64(len(f.bytes)))
		return
	}
	body, err := frameBody(f.bytes)
	var header env.RequestHeader
	var req kmsg.Request
	if err == nil {
		header, req, err = wire.ParseRequest(body, nil, wire.DefaultRequestLimits())
	}
	if err != nil {
		c.malformed(server, err)
		return
	}
	header.ClientHost, header.Listener, header.Principal = c.client.address(), c.listener, c.principal
	if _, produce := req.(*kmsg.ProduceRequest); produce {
		req = c.precheck(server, header, req)
	}
	c.awaiting = append(c.awaiting, awaitingReply{correlationID: header.CorrelationID})
	if !c.serverSaw {
		c.serverSaw = true
		server.inbound[c.id] = c
	}
	c.trace("net.request", server, int64(header.CorrelationID), int64(header.APIKey))
	if server.handler == nil {
		panic(fmt.Sprintf("simnet: node %d is up but has no handler", server.nodeID))
	}
	server.handler.HandleRequest(c.id, header, req)
}

// precheck takes a Produce through the node's prechecker on a draw
// (Network.PrecheckWith), as realnet's connection readers take every one.
func (c *conn) precheck(server *Host, header env.RequestHeader, req kmsg.Request) kmsg.Request {
	if server.prechecker == nil || !c.net.precheckDraw() {
		c.net.stats.ProducesLoopChecked++
		return req
	}
	c.net.stats.ProducesPrechecked++
	c.trace("net.precheck", server, int64(header.CorrelationID), 0)
	return server.prechecker.Precheck(header, req, nil)
}

// reply records the server's answer to correlationID (frame nil for Skip)
// and sends every response that is now at the front of the line. On a
// connection closing in request order, an answer to a request at or after
// the close is dropped.
func (c *conn) reply(correlationID int32, bytes []byte) {
	i := c.awaitingIndex(correlationID)
	if i == len(c.awaiting) {
		if c.closing {
			return
		}
		panic(fmt.Sprintf("simnet: node %d answered correlation id %d on connection %d, which awaits no such request",
			c.server.nodeID, correlationID, c.id))
	}
	c.awaiting[i] = awaitingReply{correlationID: correlationID, answered: true, frame: bytes}
	c.sendAnswered()
}

// awaitingIndex returns the index of the first unanswered request
// correlationID, or len(c.awaiting).
func (c *conn) awaitingIndex(correlationID int32) int {
	i := 0
	for i < len(c.awaiting) && (c.awaiting[i].correlationID != correlationID || c.awaiting[i].answered) {
		i++
	}
	return i
}

// sendAnswered sends the answered responses at the front of the line, and
// closes the connection when the front is the request it closes on.
func (c *conn) sendAnswered() {
	for len(c.awaiting) > 0 && c.awaiting[0].answered && !c.serverDone {
		next := c.awaiting[0]
		if next.closes {
			c.serverClose()
			return
		}
		c.awaiting[0] = awaitingReply{}
		c.awaiting = c.awaiting[1:]
		if next.frame != nil {
			c.trace("net.reply", c.server, int64(next.correlationID), int64(len(next.frame)))
			c.noteReply(int64(len(next.frame)))
			c.transmit(&c.toClient, next.frame, false)
		}
	}
}

// closeInOrder closes the connection from the server end in request order
// (env.Network.Close), on the first unanswered request correlationID: the
// requests after it are dropped (answers to them are ignored), no request
// arriving later is delivered, and once every earlier request is answered
// and its response sent the server closes (serverClose), or after
// env.CloseAnswersWaitMs if an answer never comes. A close naming no
// waiting request is a core bug, unless the connection is already closing
// (the request was dropped).
func (c *conn) closeInOrder(correlationID int32) {
	if c.serverDone {
		return
	}
	i := c.awaitingIndex(correlationID)
	if i == len(c.awaiting) {
		if c.closing {
			return
		}
		panic(fmt.Sprintf("simnet: node %d closed on correlation id %d on connection %d, which awaits no such request",
			c.server.nodeID, correlationID, c.id))
	}
	c.trace("net.close-in-order", c.server, int64(correlationID), int64(i))
	clear(c.awaiting[i+1:])
	c.awaiting = c.awaiting[:i+1]
	c.awaiting[i] = awaitingReply{correlationID: correlationID, answered: true, closes: true}
	if !c.closing {
		c.closing = true
		c.closeTimer = c.server.proc.After(env.CloseAnswersWaitMs*1_000_000, c.serverClose)
	}
	c.sendAnswered()
}

// clientReceive decodes a response frame and hands it to the request's
// callback, or ends the client side on a FIN.
func (c *conn) clientReceive(f frame) {
	if c.clientDone {
		panic(fmt.Sprintf("simnet: frame for connection %d after its client end closed", c.id))
	}
	if f.fin {
		c.trace("net.fin", c.client, 0, 0)
		for _, p := range c.endClient() {
			p.done(nil, ErrConnClosed)
		}
		if c.onClosed != nil {
			c.onClosed(ErrConnClosed)
		}
		return
	}
	if len(c.outstanding) == 0 {
		panic(fmt.Sprintf("simnet: response on connection %d, which has no request outstanding", c.id))
	}
	pending := c.outstanding[0]
	body, err := frameBody(f.bytes)
	var correlationID int32
	var resp kmsg.Response
	if err == nil {
		correlationID, resp, err = wire.ParseResponse(body, pending.req)
	}
	if err != nil {
		c.malformed(c.client, err)
		return
	}
	if correlationID != pending.correlationID {
		panic(fmt.Sprintf("simnet: connection %d delivered correlation id %d when %d was next: ordering broken",
			c.id, correlationID, pending.correlationID))
	}
	c.outstanding[0] = pendingRequest{}
	c.outstanding = c.outstanding[1:]
	c.trace("net.response", c.client, int64(correlationID), int64(len(f.bytes)))
	pending.done(resp, nil)
}

// frameBody checks a frame's size prefix and returns what follows it, as
// realnet's reader does before decoding.
func frameBody(bytes []byte) ([]byte, error) {
	if len(bytes) < 4 {
		return nil, fmt.Errorf("frame of %d bytes has no size prefix", len(bytes))
	}
	length, err := wire.FrameLength([4]byte(bytes[:4]), wire.FrameBytesMaxDefault)
	if err != nil {
		return nil, err
	}
	if int(length) != len(bytes)-4 {
		return nil, fmt.Errorf("size prefix says %d bytes, frame has %d", length, len(bytes)-4)
	}
	return bytes[4:], nil
}

// malformed handles a frame core/wire rejected: the receiver resets the
// connection, as a broker does on a request it cannot parse.
func (c *conn) malformed(at *Host, err error) {
	c.net.stats.MalformedFrames++
	c.net.s.Trace(sched.Record{Kind: "net.malformed", Node: at.proc.TraceID(), A: int64(c.id), Text: err.Error()})
	c.breakConn("malformed")
}

// serverEnd marks the server end done and forgets the connection if the
// client end is done too.
func (c *conn) serverEnd() {
	c.serverDone = true
	c.releaseAdmission()
	c.awaiting = nil
	c.closeTimer.Cancel()
	if c.server.inbound[c.id] == c {
		delete(c.server.inbound, c.id)
	}
	if c.closed() {
		c.net.forget(c)
	}
}

// endClient marks the client end done, forgets the connection if the
// server end is done too, and returns the requests still outstanding: the
// caller decides how they learn.
func (c *conn) endClient() []pendingRequest {
	c.clientDone = true
	outstanding := c.outstanding
	c.outstanding = nil
	if c.client.isNode && c.client.peers[c.peerKey] == c {
		delete(c.client.peers, c.peerKey)
	}
	if c.closed() {
		c.net.forget(c)
	}
	return outstanding
}

// clientClose closes the connection from the client end: requests already
// sent still reach the server, followed by the FIN; responses in flight are
// dropped, and the outstanding callbacks fail with ErrConnClosed.
func (c *conn) clientClose() {
	if c.clientDone {
		return
	}
	c.trace("net.close", c.client, 0, 0)
	c.toClient.drop()
	outstanding := c.endClient()
	if !c.serverDone {
		c.transmit(&c.toServer, nil, true)
	}
	for _, p := range outstanding {
		c.client.proc.Post(func() { p.done(nil, ErrConnClosed) })
	}
}

// serverClose closes the connection from the server end: responses already
// sent still reach the client, followed by the FIN; requests in flight are
// dropped. The node's handler hears of it like any other close.
func (c *conn) serverClose() {
	if c.serverDone {
		return
	}
	c.trace("net.close", c.server, 0, 0)
	c.toServer.drop()
	saw := c.serverSaw
	c.serverEnd()
	if c.readingStopped && !c.clientDone {
		// What the client never read is lost with the socket; it hears
		// of the close at once, so that a hostile workload can reopen.
		c.toClient.drop()
		outstanding := c.endClient()
		c.client.proc.Post(func() {
			for _, p := range outstanding {
				p.done(nil, ErrConnClosed)
			}
			if c.onClosed != nil {
				c.onClosed(ErrConnClosed)
			}
		})
	} else if !c.clientDone {
		c.transmit(&c.toClient, nil, true)
	}
	if saw {
		handler := c.server.handler
		c.server.proc.Post(func() { handler.HandleClosed(c.id) })
	}
}

// breakConn resets the connection: everything in flight is lost, and each
// end that is still open hears of it after a drawn delay, if it is up.
func (c *conn) breakConn(reason string) {
	if c.closed() {
		return
	}
	n := c.net
	n.stats.Breaks++
	n.s.Trace(sched.Record{Kind: "net.break", Node: c.server.proc.TraceID(), A: int64(c.id), Text: reason})
	c.toServer.drop()
	c.toClient.drop()
	if !c.serverDone {
		saw := c.serverSaw
		c.serverEnd()
		if saw {
			c.server.proc.After(n.notifyDelayNs(), func() {
				if h := c.server.handler; h != nil {
					h.HandleClosed(c.id)
				}
			})
		}
	}
	if !c.clientDone {
		// Mark the end done now, so no new request is sent into the dead
		// connection, but deliver the news after the delay.
		outstanding := c.endClient()
		c.client.proc.After(n.notifyDelayNs(), func() {
			for _, p := range outstanding {
				p.done(nil, ErrConnBroken)
			}
			if c.onClosed != nil {
				c.onClosed(ErrConnBroken)
			}
		})
	}
}
