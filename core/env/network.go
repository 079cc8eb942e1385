package env

import "github.com/twmb/franz-go/pkg/kmsg"

// NodeID is a broker's or controller's node.id.
type NodeID int32

// ConnID names one inbound connection for as long as the node lives. IDs are
// never reused within a node's incarnation.
type ConnID uint64

// RequestHeader is the part of a Kafka request header the core needs.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      string
	// ClientHost is the client's address as Kafka reports it (the member
	// client host in DescribeGroups: "/" and the IP). It is not on the
	// wire: the Network sets it from the connection.
	ClientHost string
	// Listener is the name of the listener the connection was accepted on
	// (a name in listeners=NAME://host:port). The core decides from it
	// which APIs the connection may use (SPEC.md §10). It is not on the
	// wire: the Network sets it from the connection.
	Listener string
	// Principal is the connection's authenticated principal as Kafka
	// writes it, "<type>:<name>" ("User:alice"); AnonymousPrincipal on a
	// connection that has not authenticated (PLAINTEXT). The Network
	// sets it once the connection's authentication (TLS, SASL, IP) has
	// succeeded; the core only reads it as data.
	Principal string
}

// AnonymousPrincipal is the principal of a connection that did not
// authenticate, as Kafka's KafkaPrincipal.ANONYMOUS.
const AnonymousPrincipal = "User:ANONYMOUS"

// Network carries Kafka requests and responses between a node and its
// clients and peers. Client connections and node-to-node traffic use the same
// messages, encoded as on the wire (SPEC.md §2.2).
//
// Ordering: responses on one connection reach the client in the order the
// requests arrived, whatever order the core answers them in; the Network holds
// back a response until every earlier one on its connection is sent or
// skipped. This is Kafka's per-connection ordering, which clients rely on
// when they pipeline.
type Network interface {
	// Reply answers the request (conn, correlationID). Replying on a
	// connection that has closed is a no-op.
	Reply(conn ConnID, correlationID int32, resp kmsg.Response)
	// ReplyFrame answers the request (conn, correlationID) with a frame
	// the core encoded itself, file regions included (Fetch). The frame's
	// Release runs once its pieces are sent, or at once if conn has closed.
	ReplyFrame(conn ConnID, correlationID int32, frame Frame)
	// Skip marks (conn, correlationID) as answered without a response, as a
	// Produce with acks=0 is.
	Skip(conn ConnID, correlationID int32)
	// Close answers the request (conn, correlationID) by closing the
	// connection, in request order, as Kafka's closeConnection(request)
	// does. Kafka reads one request per connection at a time (the channel
	// is muted until the answer is sent), so when it closes because of
	// request N every earlier request has been answered and no later one
	// has been read. The Network keeps that, though it reads ahead:
	//   - every request that arrived on conn before this one still gets its
	//     answer (Reply, ReplyFrame or Skip, however late the core gives
	//     it), written in order; then the connection closes;
	//   - this request and every later one get no response, and an answer
	//     the core gives to one of them later is dropped;
	//   - no request that arrives after this one is delivered to
	//     HandleRequest. The core calls Close while handling the request
	//     (every caller does), so a later request is neither answered nor
	//     executed: a Produce pipelined behind it appends nothing.
	//
	// If an earlier answer has not come CloseAnswersWaitMs after Close,
	// the connection closes without it. HandleClosed follows once, as for
	// any close. A second Close on a closing connection is ignored unless
	// it names an earlier request, which then becomes the one closed on.
	Close(conn ConnID, correlationID int32)
	// Send sends req to the node peer. done runs on the node's event loop with
	// the response, or with an error if the connection failed before one
	// arrived. It runs at most once, and may never run if the caller's own
	// timeout must decide.
	Send(peer NodeID, req kmsg.Request, done func(kmsg.Response, error))
	// SetPrechecker hands the environment the node's newest Prechecker,
	// which replaces the previous one for the requests pre-checked from
	// then on. The core calls it on the loop when it starts and whenever
	// what the pre-check depends on changes; until the first call the
	// environment pre-checks nothing.
	SetPrechecker(p Prechecker)
	// SetScramCredentials hands the environment the SCRAM credentials of
	// the metadata the node has now applied, which replace the previous
	// ones for the authentications that look a user up from then on
	// (SPEC.md §10.6): a credential change is usable on a node once it has
	// applied the record. The core calls it on the loop when it starts and
	// whenever a credential changes; until the first call no user has one.
	SetScramCredentials(c ScramCredentials)
}

// Prechecker runs the checks of a request that need no state the event
// loop owns, on the environment's own goroutines before it posts the
// request to the loop, so that CPU-heavy work (decompressing and
// validating produced batches) stays off the loop (SPEC.md §1, "Where work
// happens"). It is an immutable value: the core makes a new one when what
// it depends on changes (Network.SetPrechecker). Precheck may run on any
// goroutine, in parallel with the loop and with itself; it may read the
// node's Clock.
type Prechecker interface {
	// Precheck returns the request to hand to HandleRequest in place of
	// req: req itself, or a request carrying the checks' verdicts. The
	// answer the core gives is the one it would give to req, as of when
	// Precheck ran. buffers bounds the decompression buffers Precheck
	// holds at once, over every goroutine the environment pre-checks on;
	// nil bounds nothing.
	Precheck(header RequestHeader, req kmsg.Request, buffers BufferBudget) kmsg.Request
}

// BufferBudget bounds the bytes of buffers held at once over many
// goroutines (realnet: strand.produce.decompression.buffer.bytes.max).
type BufferBudget interface {
	// Acquire waits until bytes more fit, and reports false if the budget
	// closed (the node is stopping): the caller then does without the
	// buffer. A request for more than the whole budget is granted once
	// nothing else is held.
	Acquire(bytes int64) bool
	// Release returns bytes an Acquire took.
	Release(bytes int64)
}

// CloseAnswersWaitMs bounds how long Network.Close waits for the answers
// of the requests that arrived before the one it closes on. It guards only
// against an answer that never comes (a core bug: the connection's later
// answers would be stuck behind it anyway); every answer the core holds
// back legitimately is bounded by its own request's timeout (an acks=all
// Produce's TimeoutMillis, a Fetch's MaxWaitMillis, a JoinGroup's rebalance
// timeout). Kafka has no such bound: its muted channel waits for the
// response. 10 minutes is Kafka's connections.max.idle.ms default, after
// which Kafka closes a connection nothing happens on.
const CloseAnswersWaitMs = 600_000

// Handler is what a node exposes to its Network. Every method runs on the
// node's event loop.
type Handler interface {
	// HandleRequest delivers a decoded request from connection conn.
	HandleRequest(conn ConnID, header RequestHeader, req kmsg.Request)
	// HandleClosed reports that conn has closed, from either side.
	HandleClosed(conn ConnID)
}
