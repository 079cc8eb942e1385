package simnet

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// Client is a simulated Kafka client host: it opens connections to nodes
// and sends requests on them, as a real client does over TCP.
type Client struct {
	host *Host
}

// AddClient attaches a client, running as proc, that writes clientID in its
// request headers.
func (n *Network) AddClient(clientID string, proc *sched.Node) *Client {
	return &Client{host: n.addHost(proc, clientID)}
}

// Host returns the client's host, for faults.
func (c *Client) Host() HostID { return c.host.id }

// SetPrincipal is what the client authenticates as on secured listeners
// ("User:alice"); unset, it is env.AnonymousPrincipal.
func (c *Client) SetPrincipal(principal string) { c.host.principal = principal }

// ClientConn is one connection a Client opened.
type ClientConn struct {
	c *conn
}

// Dial opens a connection to node's first listener (its client
// listener). onClosed, if not nil, runs on the client's event loop when
// the connection ends without the client closing it (a reset, or the node
// closing it), after the outstanding callbacks have failed. A node that is
// down refuses the connection: the first Send fails.
func (c *Client) Dial(node env.NodeID, onClosed func(error)) (*ClientConn, error) {
	target := c.host.net.nodes[node]
	if target == nil {
		return nil, fmt.Errorf("dial node %d: %w", node, ErrUnknownNode)
	}
	return c.DialListener(node, target.defaultListener(), onClosed)
}

// DialListener is Dial to node's listener named listener.
func (c *Client) DialListener(node env.NodeID, listener string, onClosed func(error)) (*ClientConn, error) {
	target := c.host.net.nodes[node]
	if target == nil {
		return nil, fmt.Errorf("dial node %d: %w", node, ErrUnknownNode)
	}
	l, ok := target.listener(listener)
	if !ok {
		return nil, fmt.Errorf("dial node %d's listener %q: %w", node, listener, ErrUnknownListener)
	}
	conn := c.host.net.dial(c.host, target, l)
	conn.onClosed = onClosed
	return &ClientConn{c: conn}, nil
}

// ID returns the connection's identity, as the node sees it.
func (cc *ClientConn) ID() env.ConnID { return cc.c.id }

// Open reports whether the client can still send on the connection: it has
// neither closed it nor heard that it ended.
func (cc *ClientConn) Open() bool { return !cc.c.clientDone }

// Outstanding counts requests sent and not yet answered.
func (cc *ClientConn) Outstanding() int { return len(cc.c.outstanding) }

// Send sends req, whose version the caller has set. done runs on the
// client's event loop with the response, or with ErrConnBroken or
// ErrConnClosed if the connection ends first; for a Produce with acks=0 it
// runs with (nil, nil) once the request is sent. A black-holed connection
// never calls done: the client's own timeout must decide, and Close.
func (cc *ClientConn) Send(req kmsg.Request, done func(kmsg.Response, error)) {
	cc.c.clientSend(req, done)
}

// StopReading makes the client end read nothing more: responses stay in
// the socket, the node's writes stall once they pass sendBufferBytes, and
// the node closes the connection at strand.response.write.timeout.ms (a
// hostile client, SPEC.md §7.2). The client hears of that close at once.
func (cc *ClientConn) StopReading() {
	cc.c.readingStopped = true
}

// Close closes the connection from the client side. Requests already sent
// still reach the node; their responses are lost, and their callbacks fail
// with ErrConnClosed.
func (cc *ClientConn) Close() { cc.c.clientClose() }
