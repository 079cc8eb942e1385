package simnet

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// Errors a sender's callback receives when its request gets no response.
var (
	// ErrConnBroken: the connection was reset (a network fault, or the other
	// end crashed) before the response arrived.
	ErrConnBroken = errors.New("connection broken")
	// ErrConnClosed: the connection was closed, by this end or the other,
	// before the response arrived.
	ErrConnClosed = errors.New("connection closed")
	// ErrUnknownNode: the destination node does not exist.
	ErrUnknownNode = errors.New("unknown node")
	// ErrUnknownListener: the destination node has no listener of that
	// name.
	ErrUnknownListener = errors.New("unknown listener")
)

// HostID names a host (a node or a client) on the network, for faults. Hosts
// are numbered in the order they were added.
type HostID int32

// queuedFramesMax bounds the frames in flight in one direction of one
// connection. The core bounds in-flight requests per connection far below
// it; reaching it means a runaway sender.
const queuedFramesMax = 1 << 16

// Stats count what the network did, for the run's report and for tests.
type Stats struct {
	// FramesSent counts frames handed to the network, FramesDelivered those
	// that reached the other end.
	FramesSent, FramesDelivered uint64
	// Breaks counts connections reset by faults or crashes.
	Breaks uint64
	// Blackholes counts connection directions that went silent.
	Blackholes uint64
	// Retransmits counts deliveries postponed by a partition.
	Retransmits uint64
	// ProducesPrechecked and ProducesLoopChecked count the Produce
	// requests delivered to nodes, by the branch the pre-check draw took
	// (PrecheckWith): pre-checked as realnet does, or left to the loop.
	ProducesPrechecked  uint64
	ProducesLoopChecked uint64
	// MalformedFrames counts frames core/wire could not decode. Every frame
	// simnet carries was encoded by core/wire, so any count here is a codec
	// bug; the harness treats it as a violation.
	MalformedFrames uint64
	// Partitions counts the partitions chaos made, Bridges those that
	// were bridges, and PartitionsConcurrentMax the most in force at once.
	Partitions, Bridges     uint64
	PartitionsConcurrentMax int
}

// Network connects the simulated hosts. It owns the link state that faults
// change and the "net" PRNG stream every latency and fault is drawn from.
type Network struct {
	s      *sched.Scheduler
	r      *rand.Rand
	faults Faults

	hosts []*Host
	// nodes finds a node's host by node.id; it is only looked up.
	nodes map[env.NodeID]*Host
	// links holds the state of each ordered pair of hosts, at
	// from*len(hosts)+to.
	links []link

	connIDLast uint64
	// conns holds every connection not yet fully closed, in the order they
	// were opened, so that Heal and crashes visit them deterministically.
	conns []*conn

	chaos *chaos
	// precheck is the stream the pre-check draw takes from
	// (PrecheckWith); nil: no request is pre-checked.
	precheck *rand.Rand
	stats    Stats
	// admissionStats count what the nodes' limits did (admission.go).
	admissionStats AdmissionStats
	// scratch is where frames are encoded before ownFrame copies them out.
	scratch []byte
}

// ownFrame copies the frame just encoded in scratch into a buffer of its
// own. Decoded messages alias their frame, so a frame's buffer is never
// reused; encoding into the reused scratch first costs one exact-size
// allocation per frame instead of a chain of growing ones.
func (n *Network) ownFrame() []byte {
	return append(make([]byte, 0, len(n.scratch)), n.scratch...)
}

// link is the state of the path from one host to another.
type link struct {
	// blocked is Block's; chaosBlocks counts the chaos partitions that
	// cut the link (several may at once).
	blocked     bool
	chaosBlocks int
	clogUntilNs int64
	clogDelayNs int64
}

// cut reports whether frames on the link wait.
func (l *link) cut() bool { return l.blocked || l.chaosBlocks > 0 }

// New returns an empty network whose faults are f, drawing from r (the
// "net" stream).
func New(s *sched.Scheduler, r *rand.Rand, f Faults) *Network {
	f.check()
	return &Network{s: s, r: r, faults: f, nodes: make(map[env.NodeID]*Host)}
}

// PrecheckWith makes the network pre-check, from now on, one in two
// Produce requests delivered to a node that has published a prechecker
// (env.Network.SetPrechecker), on a draw from r, a stream of its own so that
// the draws reshuffle nothing else: realnet pre-checks every Produce on its
// connection goroutines, so the branch production takes for every produce
// runs in simulation as well as the loop's own checks, which requests that
// skip the pre-check take.
func (n *Network) PrecheckWith(r *rand.Rand) { n.precheck = r }

// precheckDraw reports whether the next Produce is pre-checked.
func (n *Network) precheckDraw() bool { return n.precheck != nil && n.precheck.IntN(2) == 0 }

// Stats returns what the network has done so far.
func (n *Network) Stats() Stats { return n.stats }

// Faults returns the settings the network runs with.
func (n *Network) Faults() Faults { return n.faults }

// Host is one endpoint of the network: a node, which accepts connections,
// or a client, which only opens them.
type Host struct {
	net  *Network
	id   HostID
	proc *sched.Node
	// clientID is what the host writes in request headers.
	clientID string
	// handler receives the inbound requests of a node; nil for a client
	// and for a node between a crash and its restart.
	handler env.Handler
	// prechecker is the node incarnation's newest one, nil before it
	// publishes one.
	prechecker env.Prechecker
	// scramCredentials are the node incarnation's last published, nil
	// before it publishes any.
	scramCredentials env.ScramCredentials
	isNode           bool
	nodeID           env.NodeID
	// inbound finds an accepted connection by id, for Reply; only looked up.
	inbound map[env.ConnID]*conn
	// peers holds a node's outbound connections to each peer; only looked
	// up.
	peers map[peerKey]*conn
	// listeners are a node's listeners (SetListeners); none means one
	// unnamed listener, for handlers that do not look at the listener.
	listeners []Listener
	// route names the peer listener each of a node's own requests goes to
	// (SetRoute); nil sends them to the peer's first listener.
	route func(kmsg.Request) string
	// principal is what the host authenticates as on a secured listener
	// (SetPrincipal); "" is env.AnonymousPrincipal.
	principal string
	// admission is a node's connection limits; nil for a client, and for a
	// node the harness gave none (admission.go).
	admission *nodeAdmission
}

// Listener is one of a node's listeners (listeners=NAME://host:port).
// A request arriving on it carries its name in env.RequestHeader.Listener.
type Listener struct {
	Name string
	// Secured: the listener authenticates its connections, as an SSL or
	// SASL listener does in production; a connection to it has the
	// principal of the host that dialled it (SetPrincipal), where on an
	// unsecured one every connection is env.AnonymousPrincipal. simnet
	// does no handshake: authentication is the environment's (realnet's),
	// and the core sees only its outcome, the principal.
	Secured bool
}

// peerKey names a node's outbound connection: one per peer, listener and
// kind of traffic (Raft traffic between voters has its own).
type peerKey struct {
	node     env.NodeID
	listener string
	voter    bool
}

// ID returns the host's number, which fault calls take.
func (h *Host) ID() HostID { return h.id }

// address is the host's address as a node sees it in env.RequestHeader's
// ClientHost: a made-up IP per host, "/10.<high>.<low>.1".
func (h *Host) address() string {
	return fmt.Sprintf("/10.%d.%d.1", uint32(h.id)>>8&0xff, uint32(h.id)&0xff)
}

func (n *Network) addHost(proc *sched.Node, clientID string) *Host {
	h := &Host{
		net:      n,
		id:       HostID(len(n.hosts)),
		proc:     proc,
		clientID: clientID,
		inbound:  make(map[env.ConnID]*conn),
		peers:    make(map[peerKey]*conn),
	}
	old := len(n.hosts)
	n.hosts = append(n.hosts, h)
	grown := make([]link, len(n.hosts)*len(n.hosts))
	for from := 0; from < old; from++ {
		copy(grown[from*len(n.hosts):from*len(n.hosts)+old], n.links[from*old:(from+1)*old])
	}
	n.links = grown
	proc.OnCrash(func() { n.hostCrashed(h) })
	return h
}

func (n *Network) link(from, to HostID) *link {
	return &n.links[int(from)*len(n.hosts)+int(to)]
}

// latencyNs draws how long a frame sent now from one host to another takes.
func (n *Network) latencyNs(from, to HostID) int64 {
	f := &n.faults
	delayNs := f.LatencyNsMin
	if f.LatencyJitterNs > 0 {
		delayNs += n.r.Int64N(f.LatencyJitterNs + 1)
	}
	if f.TailNsMax > 0 && sched.Chance(n.r, f.TailPerMille) {
		delayNs += n.r.Int64N(f.TailNsMax + 1)
	}
	if l := n.link(from, to); l.clogUntilNs > n.s.NowNs() {
		delayNs += l.clogDelayNs
	}
	return delayNs
}

// notifyDelayNs draws how long an end takes to learn of a broken connection.
func (n *Network) notifyDelayNs() int64 {
	if n.faults.NotifyNsMax == 0 {
		return 0
	}
	return n.r.Int64N(n.faults.NotifyNsMax + 1)
}

// hostCrashed breaks every connection of a crashed host. The host learns
// nothing (it is dead); the other ends are told after a delay.
func (n *Network) hostCrashed(h *Host) {
	h.handler = nil
	for _, c := range n.connsOf(h) {
		c.breakConn("crash")
	}
	clear(h.inbound)
	clear(h.peers)
}

// connsOf returns h's open connections in the order they were opened.
func (n *Network) connsOf(h *Host) []*conn {
	var out []*conn
	for _, c := range n.conns {
		if c.client == h || c.server == h {
			out = append(out, c)
		}
	}
	return out
}

// forget removes a connection that both ends are done with.
func (n *Network) forget(c *conn) {
	for i, other := range n.conns {
		if other == c {
			n.conns = append(n.conns[:i], n.conns[i+1:]...)
			return
		}
	}
	panic(fmt.Sprintf("simnet: forgetting connection %d, which is not open", c.id))
}

// listener finds the listener of h named name. A host without listeners
// has one unnamed listener.
func (h *Host) listener(name string) (Listener, bool) {
	if len(h.listeners) == 0 {
		return Listener{}, name == ""
	}
	for _, l := range h.listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// defaultListener is the listener a Dial without one connects to: the
// node's first (its client listener, a bootstrap address).
func (h *Host) defaultListener() string {
	if len(h.listeners) == 0 {
		return ""
	}
	return h.listeners[0].Name
}

// principalOn is the principal of a connection h opens to l.
func (h *Host) principalOn(l Listener) string {
	if !l.Secured || h.principal == "" {
		return env.AnonymousPrincipal
	}
	return h.principal
}

// dial opens a connection from client to server's listener l.
func (n *Network) dial(client, server *Host, l Listener) *conn {
	if !server.isNode {
		panic(fmt.Sprintf("simnet: dialing host %d, which is a client", server.id))
	}
	n.connIDLast++
	c := newConn(n, env.ConnID(n.connIDLast), client, server)
	c.listener, c.principal = l.Name, client.principalOn(l)
	n.conns = append(n.conns, c)
	n.s.Trace(sched.Record{Kind: "net.dial", Node: server.proc.TraceID(), A: int64(c.id), B: int64(client.proc.TraceID())})
	switch {
	case !server.proc.Up():
		// Connection refused: the client learns at once-ish.
		c.breakConn("refused")
	case server.admission != nil && !client.isNode:
		acceptedNs, ok := c.admit()
		if !ok {
			c.breakConn("refused: over a connection limit")
		} else {
			// Nothing arrives before the node's acceptor takes it.
			c.toServer.lastArrivalNs = acceptedNs
		}
	}
	return c
}
