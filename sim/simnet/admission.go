package simnet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"strand/core/admission"
	"strand/core/config"
)

// The simulated nodes' connection limits (SPEC.md §7.2), driven by the same core/admission types realnet wraps,
// in virtual time. A node has them once the harness calls SetAdmission;
// without, its connections behave as they always did, so that runs that do
// not ask for limits keep their schedules.
//
// What is modelled, for client connections, on the listener each is made
// to (a node's own connections to its peers are the control plane, with a
// budget of their own, and not counted by the gate):
//   - the gate: a connection over max.connections or
//     max.connections.per.ip is refused (reset at once), one over
//     max.connection.creation.rate is accepted later, as the node's
//     acceptor would;
//   - the plane budget: a frame reaches the node only while its plane has
//     room under queued.max.requests and queued.max.request.bytes (partial
//     requests in half of each); until then it waits in the socket,
//     retried every budgetRetryNs;
//   - partial frames (ClientConn.SendPartial): the size prefix and part of
//     a request that never completes; it holds a request and
//     admission.FrameBytes of its plane's budget until
//     strand.request.read.timeout.ms closes its connection, or a tenth of
//     it once other frames wait for room (PressuredReadMs);
//   - connections.max.idle.ms closes a connection with nothing in flight.
//
//   - clients that do not read (ClientConn.StopReading): their responses
//     fill a socket send buffer of sendBufferBytes, then the node's write
//     stalls and what does not fit counts in the connection's buffered
//     bytes; at strand.connection.buffered.bytes.max the node takes no more
//     of its requests (they wait in the socket), and
//     strand.response.write.timeout.ms after the write stalled (a tenth of
//     it while the connection's plane is under pressure) the node closes
//     the connection.
//
// Not modelled: the node-wide strand.response.buffered.bytes.max and the
// one-request-queued-per-connection rule (realnet's event loop and
// connection readers), and the decoded bytes realnet reserves beside a
// frame.

// sendBufferBytes is the socket send buffer of a simulated connection: the
// response bytes a client that does not read leaves with the kernel before
// the node's write stalls (a kernel's default, 64 KiB).
const sendBufferBytes = 64 << 10

// budgetRetryNs is how often a frame waiting for its plane's budget is
// offered again.
const budgetRetryNs = 10_000_000

// nodeAdmission is one node's accounting.
type nodeAdmission struct {
	gate      *admission.Gate
	budgets   [admission.Planes]*admission.Budget
	deadlines admission.Deadlines
	// listener is the listener a connection to the node's unnamed
	// listener counts under: its first advertised one.
	listener string
	// controllerListeners are the node's controller listeners, whose
	// connections are the control plane's.
	controllerListeners []string
	// acceptedNs is when the node's acceptor last took a connection: a
	// throttled connection is accepted later, and so are those behind it.
	acceptedNs int64
	// reaperIncarnation is the incarnation whose deadline checks run: a
	// restart arms them again.
	reaperIncarnation uint64
	reaperArmed       bool
	// connectionBufferedBytesMax is strand.connection.buffered.bytes.max.
	connectionBufferedBytesMax int64
	// waited records, per plane, that a frame waited for room since the
	// last deadline check: the plane is under pressure, and its stalled
	// reads have admission.Deadlines.PressuredReadMs.
	waited [admission.Planes]bool
}

// AdmissionStats count what the simulated nodes' limits did.
type AdmissionStats struct {
	// Refused counts connections the gates refused; Throttled those
	// accepted late for a creation rate.
	Refused, Throttled uint64
	// FramesWaited counts deliveries put off for a plane's budget.
	FramesWaited uint64
	// Expired counts connections closed for a deadline, by deadline.
	ReadTimeouts, IdleTimeouts, WriteTimeouts uint64
}

func (s AdmissionStats) String() string {
	return fmt.Sprintf("refused=%d throttled=%d frames_waited=%d read_timeouts=%d idle_timeouts=%d write_timeouts=%d",
		s.Refused, s.Throttled, s.FramesWaited, s.ReadTimeouts, s.IdleTimeouts, s.WriteTimeouts)
}

// AdmissionStats returns what the nodes' limits have done so far.
func (n *Network) AdmissionStats() AdmissionStats { return n.admissionStats }

// SetAdmission gives the node the connection limits of cfg, its
// server.properties. Call it once, before the node serves.
func (nn *NodeNet) SetAdmission(cfg config.Broker) {
	h := nn.host
	if h.admission != nil {
		panic(fmt.Sprintf("simnet: node %d given limits twice", h.nodeID))
	}
	a := &nodeAdmission{gate: admission.NewGate(cfg, nil, h.net.nowMs()), deadlines: admission.DeadlinesOf(cfg.Limits),
		controllerListeners: cfg.ControllerListenerNames, connectionBufferedBytesMax: cfg.Limits.ConnectionBufferedBytesMax}
	for p := range a.budgets {
		a.budgets[p] = admission.NewBudget(cfg.Limits.RequestsQueuedMax, cfg.Limits.RequestBytesQueuedMax)
	}
	if len(cfg.AdvertisedListeners) > 0 {
		a.listener = cfg.AdvertisedListeners[0].Name
	}
	h.admission = a
	nn.armReaper()
}

// nowMs is virtual time in milliseconds, admission's unit.
func (n *Network) nowMs() int64 { return n.s.NowNs() / 1_000_000 }

// armReaper starts the node's deadline checks for its current incarnation
// (SetAdmission, and SetHandler after a restart).
func (nn *NodeNet) armReaper() {
	a := nn.host.admission
	proc := nn.host.proc
	if a == nil || !proc.Up() || (a.reaperArmed && a.reaperIncarnation == proc.Incarnation()) {
		return
	}
	a.reaperArmed, a.reaperIncarnation = true, proc.Incarnation()
	nn.reapAfter()
}

func (nn *NodeNet) reapAfter() {
	nn.host.proc.After(nn.host.admission.deadlines.CheckEveryMs()*1_000_000, func() {
		nn.reap()
		nn.reapAfter()
	})
}

// reap closes the node's client connections that overstayed a deadline.
func (nn *NodeNet) reap() {
	h := nn.host
	n := h.net
	nowMs := n.nowMs()
	pressured := h.admission.waited
	h.admission.waited = [admission.Planes]bool{}
	for _, c := range n.connsOf(h) {
		if c.server != h || c.serverDone || c.closing || c.client.isNode {
			continue
		}
		expiry := c.acct.Expired(nowMs, len(c.awaiting) > 0 || c.heldBytes > 0, pressured[c.plane], h.admission.deadlines)
		if pressured[c.plane] && c.acct.WriteOverdue(nowMs, h.admission.deadlines.PressuredWriteMs()) {
			expiry = admission.ExpiredWrite
		}
		switch expiry {
		case admission.ExpiredWrite:
			n.admissionStats.WriteTimeouts++
			c.trace("net.write-timeout", h, c.heldBytes, 0)
			c.serverClose()
		case admission.ExpiredRead:
			n.admissionStats.ReadTimeouts++
			c.trace("net.read-timeout", h, 0, 0)
			c.serverClose()
		case admission.ExpiredIdle:
			n.admissionStats.IdleTimeouts++
			c.trace("net.idle-timeout", h, 0, 0)
			c.serverClose()
		}
	}
}

// admit asks the server's gate about a new client connection, as the
// node's acceptor does: it returns when the connection is accepted (later
// than now if a creation rate throttles it), or false if it is refused.
func (c *conn) admit() (acceptedNs int64, ok bool) {
	a := c.server.admission
	n := c.net
	listener := cmp.Or(c.listener, a.listener)
	c.plane = admission.PlaneClient
	if slices.Contains(a.controllerListeners, listener) {
		c.plane = admission.PlaneControl
	}
	acceptNs := max(n.s.NowNs(), a.acceptedNs)
	ip := strings.TrimPrefix(c.client.address(), "/")
	for {
		admitted, v := a.gate.Open(listener, ip, acceptNs/1_000_000)
		if v.ThrottleMs > 0 {
			n.admissionStats.Throttled++
			acceptNs = (acceptNs/1_000_000 + v.ThrottleMs) * 1_000_000
			continue
		}
		if v.Refused != admission.RefusedNone {
			n.admissionStats.Refused++
			c.trace("net.refused", c.server, int64(v.Refused), 0)
			return 0, false
		}
		a.acceptedNs = acceptNs
		c.admitted, c.hasTicket = admitted, true
		c.acct = admission.NewConnAccount(a.connectionBufferedBytesMax, acceptNs/1_000_000)
		return acceptNs, true
	}
}

// admitFrame reports whether the head frame f may reach the server now:
// its plane has room for its request and bytes. A whole frame's share is
// taken back as soon as the handler has it (the core takes requests at
// once); a partial one's is held by the connection until it closes.
func (c *conn) admitFrame(f frame) bool {
	a := c.server.admission
	if a == nil || f.fin {
		return true
	}
	if !c.acct.HasRoom() {
		// strand.connection.buffered.bytes.max: the node reads no more
		// of the connection until its answers are written.
		c.net.admissionStats.FramesWaited++
		return false
	}
	b := a.budgets[c.plane]
	whole := f.partialClaimedBytes == 0
	bytes := int64(len(f.bytes))
	if !whole {
		bytes = admission.FrameBytes(int64(f.partialClaimedBytes), int64(len(f.bytes)-4))
	}
	if !b.TryBeginRequest(whole) {
		c.net.admissionStats.FramesWaited++
		a.waited[c.plane] = true
		return false
	}
	if !b.TryReserve(bytes, whole, 0) {
		b.EndRequest(whole)
		c.net.admissionStats.FramesWaited++
		a.waited[c.plane] = true
		return false
	}
	if !whole {
		c.partialBytes = bytes
		c.acct.ReadStarted(c.net.nowMs())
		return true
	}
	b.EndRequest(true)
	b.Release(bytes, true)
	c.acct.ReadStarted(c.net.nowMs())
	c.acct.ReadDone(c.net.nowMs())
	return true
}

// releaseAdmission gives back what the server end holds of its node's
// limits: the gate's count and a partial frame's budget.
func (c *conn) releaseAdmission() {
	a := c.server.admission
	if a == nil {
		return
	}
	if c.partialBytes > 0 {
		a.budgets[c.plane].EndRequest(false)
		a.budgets[c.plane].Release(c.partialBytes, false)
		c.partialBytes = 0
	}
	if c.hasTicket {
		a.gate.Close(c.admitted)
		c.hasTicket = false
	}
}

// noteReply counts a response of n bytes sent as activity, for the idle
// deadline; to a client that stopped reading, it fills the socket's send
// buffer, and what does not fit is held by the node, its write stalled
// from the first such byte.
func (c *conn) noteReply(n int64) {
	if c.server.admission == nil || c.client.isNode {
		return
	}
	nowMs := c.net.nowMs()
	if !c.readingStopped {
		c.acct.WriteStarted(nowMs)
		c.acct.WriteDone(nowMs)
		return
	}
	c.unreadBytes += n
	if over := c.unreadBytes - sendBufferBytes; over > c.heldBytes {
		if c.heldBytes == 0 {
			c.acct.WriteStarted(nowMs)
		}
		c.acct.Hold(over - c.heldBytes)
		c.heldBytes = over
	}
}

// SendPartial sends the size prefix of a request of claimedBytes and
// sentBytes of its body, then nothing more can be sent on the connection:
// a client that stalls mid-request. Only Close follows.
func (cc *ClientConn) SendPartial(claimedBytes int32, sentBytes int) {
	c := cc.c
	if c.clientDone {
		return
	}
	if claimedBytes <= 0 || sentBytes < 0 || int64(sentBytes) >= int64(claimedBytes) {
		panic(fmt.Sprintf("simnet: a partial frame of %d bytes claiming %d", sentBytes, claimedBytes))
	}
	if c.partialSent {
		panic(fmt.Sprintf("simnet: a second partial frame on connection %d", c.id))
	}
	c.partialSent = true
	bytes := make([]byte, 4+sentBytes)
	bytes[0], bytes[1], bytes[2], bytes[3] = byte(claimedBytes>>24), byte(claimedBytes>>16), byte(claimedBytes>>8), byte(claimedBytes)
	c.trace("net.send-partial", c.client, int64(claimedBytes), int64(sentBytes))
	c.transmitPartial(bytes, claimedBytes)
}

// retryLater puts the head frame's delivery off by budgetRetryNs.
func (d *direction) retryLater() {
	d.delivery = d.to.proc.After(budgetRetryNs, d.deliverFn)
}
