package simnet

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/wire"
	"strand/sim/sched"
)

// NodeNet is one node's env.Network. It outlives the node's incarnations:
// after a restart, the harness gives it the new core with SetHandler.
type NodeNet struct {
	host *Host
}

var _ env.Network = (*NodeNet)(nil)

// AddNode attaches node id, running as proc, to the network. Requests reach
// it once SetHandler has given it a handler.
func (n *Network) AddNode(id env.NodeID, proc *sched.Node) *NodeNet {
	if _, dup := n.nodes[id]; dup {
		panic(fmt.Sprintf("simnet: node %d added twice", id))
	}
	h := n.addHost(proc, fmt.Sprintf("strand-node-%d", id))
	h.isNode = true
	h.nodeID = id
	n.nodes[id] = h
	return &NodeNet{host: h}
}

// SetHandler gives the node's current incarnation its handler. A node must
// have one whenever it is up. The previous incarnation's prechecker goes
// with it: the new one publishes its own.
func (nn *NodeNet) SetHandler(h env.Handler) {
	nn.host.handler = h
	nn.host.prechecker = nil
	nn.host.scramCredentials = nil
	nn.armReaper()
}

// SetPrechecker keeps the node's newest prechecker (env.Network), which a
// Produce delivered to the node takes on a draw (Network.PrecheckWith).
func (nn *NodeNet) SetPrechecker(p env.Prechecker) { nn.host.prechecker = p }

// SetScramCredentials keeps the SCRAM credentials the node's incarnation
// last published (env.Network). The simulator authenticates nobody with
// them (it assigns principals); the metadata checks read them back
// (ScramCredentials) to see that what a node publishes is what it applied.
func (nn *NodeNet) SetScramCredentials(c env.ScramCredentials) { nn.host.scramCredentials = c }

// ScramCredentials is what the node's incarnation last published, nil if
// nothing yet.
func (nn *NodeNet) ScramCredentials() env.ScramCredentials { return nn.host.scramCredentials }

// Host returns the node's host, for faults.
func (nn *NodeNet) Host() HostID { return nn.host.id }

// SetListeners gives the node its listeners; the first is where a Dial
// without a listener connects. Without any, the node has one unnamed
// listener. Set them before the first connection.
func (nn *NodeNet) SetListeners(listeners []Listener) {
	nn.host.listeners = append([]Listener(nil), listeners...)
}

// SetRoute names the listener of a peer that each of the node's own
// requests goes to (broker.PeerListener); without it they go to the
// peer's first listener.
func (nn *NodeNet) SetRoute(route func(kmsg.Request) string) { nn.host.route = route }

// SetPrincipal is what the node authenticates as on its peers' secured
// listeners ("User:broker-1"); unset, it is env.AnonymousPrincipal.
func (nn *NodeNet) SetPrincipal(principal string) { nn.host.principal = principal }

// Reply answers (conn, correlationID); the response waits until every
// earlier request on conn is answered. Replying on a closed connection does
// nothing.
func (nn *NodeNet) Reply(conn env.ConnID, correlationID int32, resp kmsg.Response) {
	c := nn.host.inbound[conn]
	if c == nil {
		return
	}
	n := nn.host.net
	n.scratch = wire.AppendResponse(n.scratch[:0], correlationID, resp)
	c.reply(correlationID, n.ownFrame())
}

// Skip marks (conn, correlationID) answered without a response (a Produce
// with acks=0).
func (nn *NodeNet) Skip(conn env.ConnID, correlationID int32) {
	c := nn.host.inbound[conn]
	if c == nil {
		return
	}
	c.reply(correlationID, nil)
}

// Close closes an inbound connection from the node's side in request
// order, in place of answering (conn, correlationID) (env.Network.Close):
// the responses to earlier requests are sent first, then the FIN; later
// requests are neither answered nor delivered.
func (nn *NodeNet) Close(conn env.ConnID, correlationID int32) {
	if c := nn.host.inbound[conn]; c != nil {
		c.closeInOrder(correlationID)
	}
}

// Send sends req to peer over this node's connection to it, opening one if
// there is none (first use, or the last one ended). Raft traffic between
// voters (VoterTraffic) has a connection of its own, as KRaft's Raft
// client has: behind a controller RPC's answer, which waits for a commit,
// a follower's Fetch answer could wait for itself.
func (nn *NodeNet) Send(peer env.NodeID, req kmsg.Request, done func(kmsg.Response, error)) {
	h := nn.host
	target := h.net.nodes[peer]
	if target == nil {
		h.proc.Post(func() {
			done(nil, fmt.Errorf("send %s to node %d: %w", kmsg.NameForKey(req.Key()), peer, ErrUnknownNode))
		})
		return
	}
	name := target.defaultListener()
	if h.route != nil {
		name = h.route(req)
	}
	l, ok := target.listener(name)
	if !ok {
		h.proc.Post(func() {
			done(nil, fmt.Errorf("send %s to node %d's listener %q: %w", kmsg.NameForKey(req.Key()), peer, name, ErrUnknownListener))
		})
		return
	}
	key := peerKey{node: peer, listener: name, voter: VoterTraffic(req)}
	c := h.peers[key]
	if c == nil {
		c = h.net.dial(h, target, l)
		c.peerKey = key
		if !c.clientDone {
			h.peers[key] = c
		}
	}
	c.clientSend(req, done)
}

// VoterTraffic reports whether req is Raft traffic between controller
// voters: Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, and a
// voter's Fetch (v15+, naming the replica in ReplicaState; brokers and
// replica fetchers use v12). It is core/quorum's IsVoterRequest, which
// simnet cannot import (core/quorum's tests import simnet); a test there
// keeps the two equal.
func VoterTraffic(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.VoteRequest, *kmsg.BeginQuorumEpochRequest, *kmsg.EndQuorumEpochRequest, *kmsg.FetchSnapshotRequest:
		return true
	case *kmsg.FetchRequest:
		return r.Version >= 15 && r.ReplicaState.ID >= 0
	}
	return false
}
