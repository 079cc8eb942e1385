package simnet

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// immediateNode answers every request at once with one prebuilt response.
type immediateNode struct {
	net  *NodeNet
	resp kmsg.Response
}

func (n *immediateNode) HandleRequest(conn env.ConnID, header env.RequestHeader, _ kmsg.Request) {
	n.net.Reply(conn, header.CorrelationID, n.resp)
}

func (n *immediateNode) HandleClosed(env.ConnID) {}

// BenchmarkRoundTrip measures one request and its response through simnet,
// encoding and decoding both with core/wire, with 16 requests pipelined on
// one connection: the network's own cost per round trip.
func BenchmarkRoundTrip(b *testing.B) {
	s := sched.New(sched.Options{})
	n := New(s, sched.NewStreams(1).Get("net"), Calm())
	nn := n.AddNode(0, s.NewNode(0))
	req := metadataRequest("benchmark-topic")
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr("benchmark-topic")
	resp.Topics = append(resp.Topics, rt)
	nn.SetHandler(&immediateNode{net: nn, resp: resp})
	cc, _ := n.AddClient("bench", s.NewNode(100)).Dial(0, nil)
	remaining := b.N
	var done func(kmsg.Response, error)
	done = func(_ kmsg.Response, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if remaining > 0 {
			remaining--
			cc.Send(req, done)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < 16 && remaining > 0; i++ {
		remaining--
		cc.Send(req, done)
	}
	for s.Step() {
	}
	b.ReportMetric(float64(s.EventsRun())/b.Elapsed().Seconds(), "events/s")
}
