package simnet

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// headerNode records the headers of the requests it gets and answers
// ApiVersions.
type headerNode struct {
	net     *NodeNet
	headers []env.RequestHeader
}

func (h *headerNode) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	h.headers = append(h.headers, header)
	h.net.Reply(conn, header.CorrelationID, req.ResponseKind())
}

func (h *headerNode) HandleClosed(env.ConnID) {}

func apiVersionsRequest() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	return req
}

// TestRequestsCarryListenerAndPrincipal: a request arrives with the name
// of the listener its connection was made to, and with the dialling
// host's principal on a secured listener, User:ANONYMOUS on an unsecured
// one or for a host without credentials. A node's own requests go to the
// listener its route names, with its own principal.
func TestRequestsCarryListenerAndPrincipal(t *testing.T) {
	s := sched.New(sched.Options{})
	streams := sched.NewStreams(1)
	n := New(s, streams.Get("net"), Calm())
	servers := map[env.NodeID]*headerNode{}
	for _, id := range []env.NodeID{1, 2} {
		nn := n.AddNode(id, s.NewNode(int32(id)))
		nn.SetListeners([]Listener{{Name: "PLAINTEXT"}, {Name: "CONTROLLER", Secured: true}})
		nn.SetPrincipal("User:broker-" + string(rune('0'+id)))
		nn.SetRoute(func(req kmsg.Request) string {
			if req.Key() == kmsg.BrokerHeartbeat.Int16() {
				return "CONTROLLER"
			}
			return "PLAINTEXT"
		})
		servers[id] = &headerNode{net: nn}
		nn.SetHandler(servers[id])
	}
	alice := n.AddClient("alice", s.NewNode(100))
	alice.SetPrincipal("User:alice")
	anonymous := n.AddClient("anonymous", s.NewNode(101))
	send := func(client *Client, listener string) {
		cc, err := client.DialListener(1, listener, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.Send(apiVersionsRequest(), func(kmsg.Response, error) {})
		s.RunFor(1e8) // one at a time: each travels on its own connection
	}
	send(alice, "PLAINTEXT")
	send(alice, "CONTROLLER")
	send(anonymous, "CONTROLLER")
	if cc, err := alice.Dial(1, nil); err != nil {
		t.Fatal(err)
	} else {
		cc.Send(apiVersionsRequest(), func(kmsg.Response, error) {})
		s.RunFor(1e8)
	}
	node2 := servers[2].net
	node2.Send(1, kmsg.NewPtrBrokerHeartbeatRequest(), func(kmsg.Response, error) {})
	s.RunFor(1e8)
	node2.Send(1, apiVersionsRequest(), func(kmsg.Response, error) {})
	s.RunFor(1e8)

	want := []struct{ listener, principal string }{
		{"PLAINTEXT", env.AnonymousPrincipal},
		{"CONTROLLER", "User:alice"},
		{"CONTROLLER", env.AnonymousPrincipal},
		{"PLAINTEXT", env.AnonymousPrincipal}, // Dial: the first listener
		{"CONTROLLER", "User:broker-2"},       // node 2's heartbeat
		{"PLAINTEXT", env.AnonymousPrincipal}, // node 2's ApiVersions
	}
	got := servers[1].headers
	if len(got) != len(want) {
		t.Fatalf("node 1 got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Listener != w.listener || got[i].Principal != w.principal {
			t.Errorf("request %d: listener %q principal %q, want %q %q", i, got[i].Listener, got[i].Principal, w.listener, w.principal)
		}
	}
	if _, err := alice.DialListener(1, "EXTERNAL", nil); !errors.Is(err, ErrUnknownListener) {
		t.Errorf("dial to a listener the node lacks: %v, want ErrUnknownListener", err)
	}
}
