package simnet

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
)

// limitsConfig is a node's server.properties with small connection limits.
func limitsConfig(t *testing.T) config.Broker {
	t.Helper()
	cfg, _, err := config.FromProperties(map[string]string{
		"node.id": "0", "process.roles": "broker,controller",
		"listeners":                 "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names": "CONTROLLER", "controller.quorum.voters": "0@127.0.0.1:9093",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", "log.dirs": "/data",
		"socket.request.max.bytes": "1048576", "queued.max.request.bytes": "1048576",
		"strand.connection.buffered.bytes.max": "1048576", "queued.max.requests": "2",
		"max.connections.per.ip": "3", "strand.request.read.timeout.ms": "1000", "connections.max.idle.ms": "5000",
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLimitsHoldOffAHostileClient: a client opens four connections to a
// node allowing three per address (the fourth is refused), starts a
// request it never finishes on two of them and leaves the third idle. The
// partial requests get half of queued.max.requests=2, so one waits; while
// it does, the one holding the place is closed at a tenth of the read
// deadline; the other at the read deadline; the idle one at
// connections.max.idle.ms. Another client's requests are answered at once
// throughout.
func TestLimitsHoldOffAHostileClient(t *testing.T) {
	c := newCluster(t, 1, 1, Calm(), nil)
	c.nets[0].SetAdmission(limitsConfig(t))
	hostile := c.net.AddClient("hostile", c.s.NewNode(100))
	var ended []int64 // when each hostile connection ended, in ms
	var conns []*ClientConn
	for range 4 {
		cc, err := hostile.Dial(0, func(error) { ended = append(ended, c.s.NowNs()/1e6) })
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cc)
	}
	conns[0].SendPartial(1<<20, 1<<18)
	conns[1].SendPartial(1<<20, 1<<18)

	honest, err := c.net.AddClient("honest", c.s.NewNode(101)).Dial(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answeredMs []int64
	for i := range 20 {
		c.s.Schedule(int64(i)*200e6, func() {
			sentMs := c.s.NowNs() / 1e6
			honest.Send(metadataRequest("t"), func(_ kmsg.Response, err error) {
				if err != nil {
					t.Errorf("honest request: %v", err)
				}
				answeredMs = append(answeredMs, c.s.NowNs()/1e6-sentMs)
			})
		})
	}
	c.s.RunFor(7e9)

	stats := c.net.AdmissionStats()
	if stats.Refused != 1 || stats.ReadTimeouts != 2 || stats.IdleTimeouts < 1 {
		t.Fatalf("stats %s: want 1 refused, 2 read timeouts, an idle timeout", stats)
	}
	if len(ended) < 4 {
		t.Fatalf("%d hostile connections ended, want 4: %v", len(ended), ended)
	}
	// Ends: the refusal at once; the first partial request at a tenth of
	// the read deadline (plus a check); the second a whole deadline after
	// it took the place; the idle one after 5 s.
	if ended[0] > 10 || ended[1] < 100 || ended[1] > 400 || ended[2] < ended[1]+1000 || ended[2] > ended[1]+1300 || ended[3] < 5000 {
		t.Fatalf("hostile connections ended at %v ms", ended)
	}
	t.Logf("hostile connections ended at %v ms; honest answers took %v ms", ended, answeredMs)
	if len(answeredMs) != 20 {
		t.Fatalf("%d of 20 honest requests answered", len(answeredMs))
	}
	for _, ms := range answeredMs {
		if ms > 50 {
			t.Fatalf("an honest request took %d ms: %v", ms, answeredMs)
		}
	}
}

// TestAClientThatDoesNotReadIsClosedAtTheWriteDeadline: a client stops
// reading and sends requests; their answers fill the socket's send buffer
// (sendBufferBytes), then the node's write stalls, what does not fit counts
// in the connection's buffered bytes, and at
// strand.connection.buffered.bytes.max the node takes no more of its
// requests. strand.response.write.timeout.ms after the write stalled, the
// node closes the connection and the client hears of it; another client
// is answered throughout.
func TestAClientThatDoesNotReadIsClosedAtTheWriteDeadline(t *testing.T) {
	cfg := limitsConfig(t)
	cfg.Limits.ConnectionBufferedBytesMax = 128 << 10
	cfg.Limits.ResponseWriteTimeoutMs = 2000
	c := newCluster(t, 1, 1, Calm(), nil)
	c.nets[0].SetAdmission(cfg)
	stalled, err := c.net.AddClient("stalled", c.s.NewNode(100)).Dial(0, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	var endedMs int64 = -1
	stalled.c.onClosed = func(error) { endedMs = c.s.NowNs() / 1e6 }
	stalled.StopReading()
	const requests = 20_000 // one every 100 µs, for the first 2 s
	for i := range requests {
		c.s.Schedule(int64(i)*100e3, func() {
			if stalled.Open() {
				stalled.Send(metadataRequest("t"), func(kmsg.Response, error) {})
			}
		})
	}
	honest, err := c.net.AddClient("honest", c.s.NewNode(101)).Dial(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	for i := range 20 {
		c.s.Schedule(int64(i)*200e6, func() {
			honest.Send(metadataRequest("t"), func(_ kmsg.Response, err error) {
				if err != nil {
					t.Errorf("honest request: %v", err)
				}
				answered++
			})
		})
	}
	var heldMax int64
	waitedFrames := 0
	for range 100 {
		c.s.RunFor(50e6)
		heldMax = max(heldMax, stalled.c.heldBytes)
		if !stalled.c.serverDone {
			waitedFrames = max(waitedFrames, stalled.c.toServer.inFlight())
		}
	}
	stats := c.net.AdmissionStats()
	t.Logf("stalled client: up to %d requests waiting in the socket, %d bytes held at most, closed at %d ms; %s", waitedFrames, heldMax, endedMs, stats)
	if stats.WriteTimeouts != 1 || endedMs < 2000 || endedMs > 3000 {
		t.Errorf("write timeouts %d, the stalled connection closed at %d ms: want one, 2 s after its write stalled", stats.WriteTimeouts, endedMs)
	}
	if heldMax <= 0 || heldMax > cfg.Limits.ConnectionBufferedBytesMax+1024 {
		t.Errorf("the node held %d bytes for the stalled client: want some, at most strand.connection.buffered.bytes.max and one answer", heldMax)
	}
	if waitedFrames < 100 {
		t.Errorf("at most %d of the stalled client's requests waited in the socket: the node kept taking them past strand.connection.buffered.bytes.max", waitedFrames)
	}
	if answered != 20 {
		t.Errorf("the honest client got %d of 20 answers", answered)
	}
}
