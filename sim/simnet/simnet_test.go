package simnet

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// outcome is what a request's callback received.
type outcome struct {
	topic string
	err   error
}

// sendMetadata sends a Metadata request for topic on cc and appends what
// comes back to *got.
func sendMetadata(t *testing.T, cc *ClientConn, topic string, got *[]outcome) {
	cc.Send(metadataRequest(topic), func(resp kmsg.Response, err error) {
		if err != nil {
			*got = append(*got, outcome{err: err})
			return
		}
		echoed, decodeErr := echoedTopic(resp)
		if decodeErr != nil {
			t.Errorf("request %s: %v", topic, decodeErr)
		}
		*got = append(*got, outcome{topic: echoed})
	})
}

func topics(outcomes []outcome) []string {
	var out []string
	for _, o := range outcomes {
		out = append(out, o.topic)
	}
	return out
}

// TestResponsesInRequestOrderUnderDelay pipelines many requests through a
// network with heavy jitter and a long tail while the node answers each
// after a random delay: the responses must come back complete, decoded, and
// in request order.
func TestResponsesInRequestOrderUnderDelay(t *testing.T) {
	f := Calm()
	f.LatencyJitterNs = 5_000_000
	f.TailPerMille = 300
	f.TailNsMax = 50_000_000
	c := newCluster(t, 1, 1, f, nil)
	c.nodes[0].replyDelayNsMax = 20_000_000
	client := c.net.AddClient("orderly", c.s.NewNode(100))
	cc, err := client.Dial(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var got []outcome
	for i := 0; i < 200; i++ {
		topic := fmt.Sprintf("t%03d", i)
		want = append(want, topic)
		c.s.Schedule(int64(i)*100_000, func() { sendMetadata(t, cc, topic, &got) })
	}
	c.s.RunFor(2e9)
	if !slices.Equal(topics(got), want) {
		t.Fatalf("responses %v\nwant %v", topics(got), want)
	}
	// The node did answer out of order: otherwise the test proves nothing.
	if c.net.Stats().FramesDelivered != 400 {
		t.Fatalf("delivered %d frames, want 400", c.net.Stats().FramesDelivered)
	}
	seen := c.nodes[0].requests
	if len(seen) != 200 || seen[0].clientID != "orderly" || seen[0].key != 3 {
		t.Fatalf("node saw %d requests, first %+v", len(seen), seen[0])
	}
}

// TestAPIVersionsAndAcksZero checks the two header special cases (an
// ApiVersions response has no tag section at any version) and a Produce with
// acks=0: no response, its callback runs at once, and the response to the
// request after it is not held back by it.
func TestAPIVersionsAndAcksZero(t *testing.T) {
	c := newCluster(t, 2, 1, Calm(), nil)
	cc, _ := c.net.AddClient("c", c.s.NewNode(100)).Dial(0, nil)
	var log []string
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = 0
	cc.Send(produce, func(resp kmsg.Response, err error) {
		log = append(log, fmt.Sprintf("produce resp=%v err=%v", resp != nil, err))
	})
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(3)
	versions.ClientSoftwareName = "sim"
	versions.ClientSoftwareVersion = "1"
	cc.Send(versions, func(resp kmsg.Response, err error) {
		if err != nil {
			log = append(log, "versions err "+err.Error())
			return
		}
		keys := resp.(*kmsg.ApiVersionsResponse).ApiKeys
		log = append(log, fmt.Sprintf("versions keys=%d max=%d", len(keys), keys[0].MaxVersion))
	})
	c.s.RunFor(1e9)
	want := []string{"produce resp=false err=<nil>", "versions keys=1 max=12"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %q, want %q", log, want)
	}
	if n := len(c.nodes[0].requests); n != 2 {
		t.Fatalf("node saw %d requests, want 2", n)
	}
}

// TestPartitionBlocksAndHealRestores partitions a client from its node:
// nothing gets through while the partition lasts (shorter than the
// connection timeout), and everything arrives, in order, after Heal.
func TestPartitionBlocksAndHealRestores(t *testing.T) {
	c := newCluster(t, 3, 2, Calm(), nil)
	client := c.net.AddClient("c", c.s.NewNode(100))
	cc, _ := client.Dial(0, nil)
	c.net.Partition([]HostID{client.Host()}, []HostID{c.nets[0].Host()}, true)
	var got []outcome
	sendMetadata(t, cc, "a", &got)
	sendMetadata(t, cc, "b", &got)
	c.s.RunFor(5e9) // half the 10 s connection timeout
	if len(got) != 0 || len(c.nodes[0].requests) != 0 {
		t.Fatalf("through a partition: %d responses, %d requests", len(got), len(c.nodes[0].requests))
	}
	if c.net.Stats().Retransmits == 0 {
		t.Fatal("a blocked frame was never retransmitted")
	}
	c.net.Heal()
	c.s.RunFor(1e9)
	if !slices.Equal(topics(got), []string{"a", "b"}) {
		t.Fatalf("after heal got %+v", got)
	}
}

// TestAsymmetricPartition blocks only the node-to-client direction:
// requests arrive and are handled, responses wait for the heal.
func TestAsymmetricPartition(t *testing.T) {
	c := newCluster(t, 4, 1, Calm(), nil)
	client := c.net.AddClient("c", c.s.NewNode(100))
	cc, _ := client.Dial(0, nil)
	c.net.Block(c.nets[0].Host(), client.Host())
	var got []outcome
	sendMetadata(t, cc, "a", &got)
	c.s.RunFor(1e9)
	if len(c.nodes[0].requests) != 1 || len(got) != 0 {
		t.Fatalf("one-way partition: node saw %d requests, client %d responses; want 1 and 0",
			len(c.nodes[0].requests), len(got))
	}
	c.net.Unblock(c.nets[0].Host(), client.Host())
	c.s.RunFor(1e9)
	if !slices.Equal(topics(got), []string{"a"}) {
		t.Fatalf("after unblocking got %+v", got)
	}
}

// TestPartitionOutlastingTimeoutBreaks keeps a partition past the
// connection timeout: the connection breaks, the client's callbacks and
// onClosed get ErrConnBroken, and the node (which saw an earlier request)
// hears the close.
func TestPartitionOutlastingTimeoutBreaks(t *testing.T) {
	f := Calm()
	f.ConnTimeoutNs = 1e9
	c := newCluster(t, 5, 1, f, nil)
	client := c.net.AddClient("c", c.s.NewNode(100))
	var closedErr error
	cc, _ := client.Dial(0, func(err error) { closedErr = err })
	var got []outcome
	sendMetadata(t, cc, "before", &got)
	c.s.RunFor(1e8)
	c.net.Isolate(c.nets[0].Host())
	sendMetadata(t, cc, "during", &got)
	c.s.RunFor(3e9)
	if len(got) != 2 || got[0].topic != "before" || !errors.Is(got[1].err, ErrConnBroken) {
		t.Fatalf("got %+v, want the first answered and the second broken", got)
	}
	if !errors.Is(closedErr, ErrConnBroken) || cc.Open() {
		t.Fatalf("onClosed got %v, open=%v", closedErr, cc.Open())
	}
	if !slices.Equal(c.nodes[0].closed, []env.ConnID{cc.ID()}) {
		t.Fatalf("node heard closes %v, want [%d]", c.nodes[0].closed, cc.ID())
	}
	var late []outcome
	sendMetadata(t, cc, "after", &late)
	c.s.RunFor(1e9)
	if len(late) != 1 || !errors.Is(late[0].err, ErrConnBroken) {
		t.Fatalf("send on a broken connection got %+v", late)
	}
}

// TestBlackholeSwallowsUntilHeal makes every blocked connection a black
// hole: requests vanish silently, even after the partition ends, until
// Heal breaks the connection and both ends hear of it.
func TestBlackholeSwallowsUntilHeal(t *testing.T) {
	f := Calm()
	f.BlackholePerMille = 1000
	c := newCluster(t, 6, 1, f, nil)
	client := c.net.AddClient("c", c.s.NewNode(100))
	cc, _ := client.Dial(0, nil)
	var got []outcome
	sendMetadata(t, cc, "seen", &got)
	c.s.RunFor(1e8)
	c.net.Block(client.Host(), c.nets[0].Host())
	sendMetadata(t, cc, "lost", &got)
	c.s.RunFor(1e8)
	c.net.Unblock(client.Host(), c.nets[0].Host())
	sendMetadata(t, cc, "also-lost", &got)
	c.s.RunFor(20e9) // far past the connection timeout: nobody is told
	if len(got) != 1 || len(c.nodes[0].requests) != 1 || c.net.Stats().Blackholes != 1 {
		t.Fatalf("got %+v, node saw %d requests, %d blackholes", got, len(c.nodes[0].requests), c.net.Stats().Blackholes)
	}
	c.net.Heal()
	c.s.RunFor(1e9)
	if len(got) != 3 || !errors.Is(got[1].err, ErrConnBroken) || !errors.Is(got[2].err, ErrConnBroken) {
		t.Fatalf("after heal got %+v", got)
	}
	if len(c.nodes[0].closed) != 1 {
		t.Fatalf("node heard %d closes, want 1", len(c.nodes[0].closed))
	}
}

// TestPausedNodeDefersDelivery pauses the node: requests wait until it
// resumes, then are handled in order.
func TestPausedNodeDefersDelivery(t *testing.T) {
	c := newCluster(t, 7, 1, Calm(), nil)
	cc, _ := c.net.AddClient("c", c.s.NewNode(100)).Dial(0, nil)
	c.procs[0].PauseFor(2e9)
	var got []outcome
	sendMetadata(t, cc, "x", &got)
	sendMetadata(t, cc, "y", &got)
	c.s.RunFor(1e9)
	if len(c.nodes[0].requests) != 0 {
		t.Fatalf("paused node handled %d requests", len(c.nodes[0].requests))
	}
	c.s.RunFor(2e9)
	if !slices.Equal(topics(got), []string{"x", "y"}) {
		t.Fatalf("after resume got %+v", got)
	}
}

// TestCrashBreaksConnectionsAndStaleCallbacksNeverRun crashes a node with
// requests in flight and reply timers pending: the client hears
// ErrConnBroken, the dead incarnation's handler and timers are never
// called (echoNode fails the test if they are), and after a restart a new
// connection works.
func TestCrashBreaksConnectionsAndStaleCallbacksNeverRun(t *testing.T) {
	c := newCluster(t, 8, 1, Calm(), nil)
	c.nodes[0].replyDelayNsMax = 1e9
	client := c.net.AddClient("c", c.s.NewNode(100))
	cc, _ := client.Dial(0, nil)
	var got []outcome
	for i := 0; i < 5; i++ {
		sendMetadata(t, cc, fmt.Sprint(i), &got)
	}
	c.s.RunFor(1e6) // delivered, replies pending on 1 s timers
	old := c.nodes[0]
	if len(old.requests) != 5 {
		t.Fatalf("node saw %d requests before the crash", len(old.requests))
	}
	c.crash(0)
	c.s.RunFor(5e9)
	if len(got) != 5 {
		t.Fatalf("%d of 5 callbacks ran after the crash", len(got))
	}
	for _, o := range got {
		if !errors.Is(o.err, ErrConnBroken) {
			t.Fatalf("callback after crash got %+v", o)
		}
	}
	// Dialing a node that is down is refused.
	refused, _ := client.Dial(0, nil)
	var refusedGot []outcome
	sendMetadata(t, refused, "refused", &refusedGot)
	c.s.RunFor(1e9)
	if len(refusedGot) != 1 || !errors.Is(refusedGot[0].err, ErrConnBroken) {
		t.Fatalf("send to a down node got %+v", refusedGot)
	}
	fresh := c.restart(0)
	cc2, _ := client.Dial(0, nil)
	var after []outcome
	sendMetadata(t, cc2, "reborn", &after)
	c.s.RunFor(2e9)
	if !slices.Equal(topics(after), []string{"reborn"}) || len(fresh.requests) != 1 {
		t.Fatalf("after restart got %+v, new incarnation saw %d", after, len(fresh.requests))
	}
	if len(old.closed) != 0 {
		t.Fatalf("dead incarnation heard closes %v", old.closed)
	}
}

// TestClientCloseDeliversWhatWasSent: a client that closes its connection
// has its callbacks failed at once, yet the requests it already sent still
// reach the node, followed by the close; the node's replies go nowhere. A
// retry on a new connection can then overtake them.
func TestClientCloseDeliversWhatWasSent(t *testing.T) {
	f := Calm()
	c := newCluster(t, 9, 1, f, nil)
	client := c.net.AddClient("c", c.s.NewNode(100))
	oldConn, _ := client.Dial(0, nil)
	c.net.Clog(client.Host(), c.nets[0].Host(), 1e8, 50e6) // the old connection's frames take 50 ms
	var got []outcome
	sendMetadata(t, oldConn, "first-try", &got)
	oldConn.Close()
	c.net.Clog(client.Host(), c.nets[0].Host(), 0, 0)
	c.s.RunFor(1e6)
	if len(got) != 1 || !errors.Is(got[0].err, ErrConnClosed) {
		t.Fatalf("after Close got %+v", got)
	}
	retry, _ := client.Dial(0, nil)
	sendMetadata(t, retry, "retry", &got)
	c.s.RunFor(1e9)
	seen := c.nodes[0].requests
	if len(seen) != 2 || seen[0].conn != retry.ID() || seen[1].conn != oldConn.ID() {
		t.Fatalf("node saw %+v, want the retry first, then the closed connection's request", seen)
	}
	if !slices.Equal(c.nodes[0].closed, []env.ConnID{oldConn.ID()}) {
		t.Fatalf("node heard closes %v", c.nodes[0].closed)
	}
	if len(got) != 2 || got[1].topic != "retry" {
		t.Fatalf("got %+v", got)
	}
}

// closingNode answers the first request on a connection, then closes it on
// the second.
type closingNode struct {
	net    *NodeNet
	closed []env.ConnID
}

func (n *closingNode) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = req.(*kmsg.MetadataRequest).Topics[0].Topic
	resp.Topics = append(resp.Topics, rt)
	switch header.CorrelationID {
	case 0:
		n.net.Reply(conn, 0, resp)
	case 1:
		n.net.Close(conn, 1)
		n.net.Reply(conn, 1, resp) // after Close: a no-op
	}
}

func (n *closingNode) HandleClosed(conn env.ConnID) { n.closed = append(n.closed, conn) }

// TestServerCloseAfterReply: the node replies and closes; the reply still
// arrives, then the client's other request fails with ErrConnClosed and
// onClosed runs; the node hears of its own close.
func TestServerCloseAfterReply(t *testing.T) {
	s := sched.New(sched.Options{})
	n := New(s, sched.NewStreams(10).Get("net"), Calm())
	nn := n.AddNode(0, s.NewNode(0))
	node := &closingNode{net: nn}
	nn.SetHandler(node)
	var closedErr error
	cc, _ := n.AddClient("c", s.NewNode(100)).Dial(0, func(err error) { closedErr = err })
	var got []outcome
	sendMetadata(t, cc, "answered", &got)
	sendMetadata(t, cc, "unanswered", &got)
	s.RunFor(1e9)
	if len(got) != 2 || got[0].topic != "answered" || !errors.Is(got[1].err, ErrConnClosed) {
		t.Fatalf("got %+v", got)
	}
	if !errors.Is(closedErr, ErrConnClosed) || !slices.Equal(node.closed, []env.ConnID{cc.ID()}) {
		t.Fatalf("onClosed got %v, node heard %v", closedErr, node.closed)
	}
	if len(n.conns) != 0 {
		t.Fatalf("%d connections still open", len(n.conns))
	}
}

// TestNodeSend sends node to node: the peer sees the request with the
// sender's client id, the response returns; when the peer crashes the
// sender hears ErrConnBroken, and after the restart the next Send opens a
// new connection.
func TestNodeSend(t *testing.T) {
	c := newCluster(t, 11, 2, Calm(), nil)
	var got []outcome
	send := func(topic string) {
		c.nets[0].Send(1, metadataRequest(topic), func(resp kmsg.Response, err error) {
			if err != nil {
				got = append(got, outcome{err: err})
				return
			}
			echoed, _ := echoedTopic(resp)
			got = append(got, outcome{topic: echoed})
		})
	}
	send("hello")
	c.s.RunFor(1e8)
	if !slices.Equal(topics(got), []string{"hello"}) || c.nodes[1].requests[0].clientID != "strand-node-0" {
		t.Fatalf("got %+v, peer saw %+v", got, c.nodes[1].requests)
	}
	c.nodes[1].replyDelayNsMax = 1e9
	send("pending")
	c.s.RunFor(1e6)
	c.crash(1)
	c.s.RunFor(1e8)
	if len(got) != 2 || !errors.Is(got[1].err, ErrConnBroken) {
		t.Fatalf("after peer crash got %+v", got)
	}
	firstConn := c.nodes[1].requests[0].conn
	reborn := c.restart(1)
	send("again")
	c.s.RunFor(1e8)
	if len(got) != 3 || got[2].topic != "again" || reborn.requests[0].conn == firstConn {
		t.Fatalf("after restart got %+v, new conn %d old %d", got, reborn.requests[0].conn, firstConn)
	}
	var unknown []outcome
	c.nets[0].Send(9, metadataRequest("x"), func(_ kmsg.Response, err error) { unknown = append(unknown, outcome{err: err}) })
	c.s.RunFor(1e6)
	if len(unknown) != 1 || !errors.Is(unknown[0].err, ErrUnknownNode) {
		t.Fatalf("send to unknown node got %+v", unknown)
	}
}

// TestMalformedFrameBreaksConnection feeds the node a frame core/wire
// rejects: it is counted, and the connection is reset.
func TestMalformedFrameBreaksConnection(t *testing.T) {
	c := newCluster(t, 12, 1, Calm(), nil)
	c.nodes[0].replyDelayNsMax = 1e8 // the break comes before any reply
	cc, _ := c.net.AddClient("c", c.s.NewNode(100)).Dial(0, nil)
	var got []outcome
	sendMetadata(t, cc, "doomed", &got)
	cc.c.transmit(&cc.c.toServer, []byte{0, 0, 0, 2, 0, 3}, false) // a header cut short
	c.s.RunFor(1e9)
	if c.net.Stats().MalformedFrames != 1 || cc.Open() {
		t.Fatalf("malformed=%d open=%v", c.net.Stats().MalformedFrames, cc.Open())
	}
	if len(got) != 1 || !errors.Is(got[0].err, ErrConnBroken) {
		t.Fatalf("got %+v", got)
	}
}

// orderedClosingNode holds its answer to the first request on a connection
// for holdNs (forever if negative), closes the connection on the second
// (env.Network.Close, in request order), and records what it was given.
type orderedClosingNode struct {
	net       *NodeNet
	proc      *sched.Node
	holdNs    int64
	delivered []int32
	closed    []env.ConnID
}

func (n *orderedClosingNode) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	n.delivered = append(n.delivered, header.CorrelationID)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = req.(*kmsg.MetadataRequest).Topics[0].Topic
	resp.Topics = append(resp.Topics, rt)
	switch header.CorrelationID {
	case 0:
		if n.holdNs >= 0 {
			n.proc.After(n.holdNs, func() { n.net.Reply(conn, 0, resp) })
		}
	case 1:
		n.net.Close(conn, 1)
	default:
		n.net.Reply(conn, header.CorrelationID, resp)
	}
}

func (n *orderedClosingNode) HandleClosed(conn env.ConnID) { n.closed = append(n.closed, conn) }

// TestServerCloseInRequestOrder: three pipelined requests; the node holds
// its answer to the first (as an acks=all produce waits for the ISR),
// closes on the second, and would answer the third. The first's answer
// still arrives, after the close was asked for; the second and third fail
// with ErrConnClosed; the third never reaches the node; the node hears of
// the close once. If the first answer never comes, the connection closes
// env.CloseAnswersWaitMs after the close.
func TestServerCloseInRequestOrder(t *testing.T) {
	run := func(t *testing.T, holdNs int64) (*Network, *sched.Scheduler, *orderedClosingNode, *ClientConn, *[]outcome, *error) {
		s := sched.New(sched.Options{})
		n := New(s, sched.NewStreams(11).Get("net"), Calm())
		proc := s.NewNode(0)
		nn := n.AddNode(0, proc)
		node := &orderedClosingNode{net: nn, proc: proc, holdNs: holdNs}
		nn.SetHandler(node)
		closedErr := new(error)
		cc, _ := n.AddClient("c", s.NewNode(100)).Dial(0, func(err error) { *closedErr = err })
		got := new([]outcome)
		sendMetadata(t, cc, "held", got)
		sendMetadata(t, cc, "closes", got)
		sendMetadata(t, cc, "behind", got)
		return n, s, node, cc, got, closedErr
	}

	t.Run("held answer arrives first", func(t *testing.T) {
		n, s, node, cc, got, closedErr := run(t, 200e6)
		s.RunFor(100e6)
		if len(*got) != 0 || !cc.Open() {
			t.Fatalf("before the held answer: got %+v, open %v; the close must wait for it", *got, cc.Open())
		}
		s.RunFor(1e9)
		if len(*got) != 3 || (*got)[0].topic != "held" || (*got)[0].err != nil ||
			!errors.Is((*got)[1].err, ErrConnClosed) || !errors.Is((*got)[2].err, ErrConnClosed) {
			t.Fatalf("got %+v, want the held answer, then two ErrConnClosed", *got)
		}
		if !slices.Equal(node.delivered, []int32{0, 1}) {
			t.Fatalf("node was given %v, want [0 1]: nothing after the request it closed on", node.delivered)
		}
		if !errors.Is(*closedErr, ErrConnClosed) || !slices.Equal(node.closed, []env.ConnID{cc.ID()}) {
			t.Fatalf("onClosed got %v, node heard %v", *closedErr, node.closed)
		}
		if len(n.conns) != 0 {
			t.Fatalf("%d connections still open", len(n.conns))
		}
	})

	t.Run("answer never comes", func(t *testing.T) {
		n, s, node, cc, got, _ := run(t, -1)
		s.RunFor(env.CloseAnswersWaitMs*1_000_000 - 1e9)
		if len(*got) != 0 || !cc.Open() {
			t.Fatalf("got %+v, open %v before the bound", *got, cc.Open())
		}
		s.RunFor(2e9)
		if len(*got) != 3 || !errors.Is((*got)[0].err, ErrConnClosed) {
			t.Fatalf("got %+v, want three ErrConnClosed once the bound passed", *got)
		}
		if !slices.Equal(node.closed, []env.ConnID{cc.ID()}) || len(n.conns) != 0 {
			t.Fatalf("node heard %v, %d connections open", node.closed, len(n.conns))
		}
	})
}
