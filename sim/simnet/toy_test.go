package simnet

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
	"strand/sim/simclock"
)

// echoNode is a toy node: it answers Metadata by echoing the requested topic
// name, ApiVersions with a fixed table, and skips acks=0 Produce. Each reply
// waits a random delay on the node's clock, so replies are made out of
// order and the network's hold-back is what restores request order.
type echoNode struct {
	t     testing.TB
	id    env.NodeID
	net   *NodeNet
	clock *simclock.Clock
	r     *rand.Rand
	// replyDelayNsMax bounds the random wait before each reply.
	replyDelayNsMax int64
	// dead is set when the node's incarnation crashes: no callback may reach
	// it afterwards.
	dead bool

	requests []seenRequest
	closed   []env.ConnID
	// lastCorrelation holds each connection's latest correlation id, to
	// check that requests arrive in the order they were sent.
	lastCorrelation map[env.ConnID]int32
}

type seenRequest struct {
	conn          env.ConnID
	correlationID int32
	key           int16
	clientID      string
}

func (e *echoNode) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	if e.dead {
		e.t.Errorf("node %d: request after its incarnation crashed", e.id)
	}
	e.requests = append(e.requests, seenRequest{conn, header.CorrelationID, header.APIKey, header.ClientID})
	if last, ok := e.lastCorrelation[conn]; ok && header.CorrelationID <= last {
		e.t.Errorf("node %d conn %d: correlation id %d arrived after %d", e.id, conn, header.CorrelationID, last)
	}
	e.lastCorrelation[conn] = header.CorrelationID
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		m := r.ResponseKind().(*kmsg.MetadataResponse)
		for _, topic := range r.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = topic.Topic
			m.Topics = append(m.Topics, rt)
		}
		resp = m
	case *kmsg.ApiVersionsRequest:
		a := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		a.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 0, MaxVersion: 12}}
		resp = a
	case *kmsg.ProduceRequest:
		if r.Acks == 0 {
			e.net.Skip(conn, header.CorrelationID)
			return
		}
		resp = r.ResponseKind()
	default:
		e.t.Errorf("node %d: unexpected %s", e.id, kmsg.NameForKey(header.APIKey))
		return
	}
	delayNs := int64(0)
	if e.replyDelayNsMax > 0 {
		delayNs = e.r.Int64N(e.replyDelayNsMax + 1)
	}
	e.clock.SetTimer(delayNs, func() {
		if e.dead {
			e.t.Errorf("node %d: reply timer fired after its incarnation crashed", e.id)
		}
		e.net.Reply(conn, header.CorrelationID, resp)
	})
}

func (e *echoNode) HandleClosed(conn env.ConnID) {
	if e.dead {
		e.t.Errorf("node %d: close after its incarnation crashed", e.id)
	}
	e.closed = append(e.closed, conn)
}

// metadataRequest asks for one topic, named so the response can be matched.
func metadataRequest(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9) // flexible: exercises the v2 request header
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req
}

// echoedTopic returns the single topic a Metadata response echoes.
func echoedTopic(resp kmsg.Response) (string, error) {
	m, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		return "", fmt.Errorf("response is %T, not Metadata", resp)
	}
	if len(m.Topics) != 1 || m.Topics[0].Topic == nil {
		return "", fmt.Errorf("response holds %d topics", len(m.Topics))
	}
	return *m.Topics[0].Topic, nil
}

// cluster is a toy simulation: echo nodes, clients, a network, clocks.
type cluster struct {
	t       testing.TB
	s       *sched.Scheduler
	streams *sched.Streams
	net     *Network
	procs   []*sched.Node
	nets    []*NodeNet
	clocks  []*simclock.Clock
	nodes   []*echoNode // current incarnation of each node
	// onStart, if set, runs whenever node i starts a new incarnation.
	onStart func(i int)
}

func newCluster(t testing.TB, seed uint64, nodeCount int, faults Faults, trace io.Writer) *cluster {
	s := sched.New(sched.Options{TraceWriter: trace})
	streams := sched.NewStreams(seed)
	c := &cluster{t: t, s: s, streams: streams, net: New(s, streams.Get("net"), faults)}
	for i := 0; i < nodeCount; i++ {
		proc := s.NewNode(int32(i))
		c.procs = append(c.procs, proc)
		c.nets = append(c.nets, c.net.AddNode(env.NodeID(i), proc))
		c.clocks = append(c.clocks, simclock.New(s, proc, simclock.Options{MonotonicOffsetNs: int64(i) * 1e9}))
		c.nodes = append(c.nodes, nil)
		c.startNode(i)
	}
	return c
}

// startNode gives node i a fresh incarnation of its echo handler.
func (c *cluster) startNode(i int) *echoNode {
	e := &echoNode{
		t: c.t, id: env.NodeID(i), net: c.nets[i], clock: c.clocks[i],
		r: c.streams.Getf("node/%d/%d", i, c.procs[i].Incarnation()), replyDelayNsMax: 2_000_000,
		lastCorrelation: make(map[env.ConnID]int32),
	}
	c.nodes[i] = e
	c.nets[i].SetHandler(e)
	if c.onStart != nil {
		c.onStart(i)
	}
	return e
}

func (c *cluster) crash(i int) {
	c.nodes[i].dead = true
	c.procs[i].Crash()
}

func (c *cluster) restart(i int) *echoNode {
	c.procs[i].Restart()
	return c.startNode(i)
}
