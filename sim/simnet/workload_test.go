package simnet

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
)

// requestTimeoutNs is the toy clients' request timeout: past it a client
// closes the connection, which is how it escapes a black hole.
const requestTimeoutNs = 500_000_000

// trackedConn checks one client connection: callbacks run in send order,
// each exactly once, and a response echoes its own request.
type trackedConn struct {
	cc       *ClientConn
	sent     int
	resolved int
}

// loadClient sends Metadata requests to random nodes, over connections it
// opens, closes at random, and closes on timeout.
type loadClient struct {
	t      testing.TB
	id     int
	client *Client
	proc   *sched.Node
	r      *rand.Rand
	s      *sched.Scheduler
	nodes  int
	// current holds the connection in use to each node.
	current []*trackedConn
	all     []*trackedConn
	sending bool
	answers int
}

func (lc *loadClient) tick() {
	if !lc.sending {
		return
	}
	node := lc.r.IntN(lc.nodes)
	tc := lc.current[node]
	if tc == nil || !tc.cc.Open() {
		cc, err := lc.client.Dial(env.NodeID(node), nil)
		if err != nil {
			lc.t.Fatal(err)
		}
		tc = &trackedConn{cc: cc}
		lc.current[node] = tc
		lc.all = append(lc.all, tc)
	}
	lc.send(tc)
	if sched.Chance(lc.r, 10) {
		tc.cc.Close()
	}
	lc.proc.After(sched.Int64Between(lc.r, 1e6, 5e6), lc.tick)
}

func (lc *loadClient) send(tc *trackedConn) {
	index := tc.sent
	tc.sent++
	topic := fmt.Sprintf("c%d-conn%d-%d", lc.id, tc.cc.ID(), index)
	tc.cc.Send(metadataRequest(topic), func(resp kmsg.Response, err error) {
		if index != tc.resolved {
			lc.t.Errorf("conn %d: callback for request %d ran when %d was next", tc.cc.ID(), index, tc.resolved)
		}
		tc.resolved++
		if err != nil {
			if !errors.Is(err, ErrConnBroken) && !errors.Is(err, ErrConnClosed) {
				lc.t.Errorf("conn %d request %d: unexpected error %v", tc.cc.ID(), index, err)
			}
			return
		}
		lc.answers++
		echoed, decodeErr := echoedTopic(resp)
		if decodeErr != nil || echoed != topic {
			lc.t.Errorf("request %s answered with %q (%v)", topic, echoed, decodeErr)
		}
	})
	lc.proc.After(requestTimeoutNs, func() {
		if tc.resolved <= index && tc.cc.Open() {
			tc.cc.Close()
		}
	})
}

// startPeerTraffic has node i's current incarnation send Metadata to a
// random peer every 10 ms, as replication will. The chain of timers dies
// with the incarnation.
func (c *cluster) startPeerTraffic(i int) {
	r := c.streams.Getf("peer/%d/%d", i, c.procs[i].Incarnation())
	var tick func()
	tick = func() {
		peer := env.NodeID(r.IntN(len(c.procs) - 1))
		if peer >= env.NodeID(i) {
			peer++
		}
		c.nets[i].Send(peer, metadataRequest(fmt.Sprintf("peer-%d", i)), func(kmsg.Response, error) {})
		c.clocks[i].SetTimer(10e6, tick)
	}
	c.clocks[i].SetTimer(10e6, tick)
}

// workloadResult is what a toy run produced.
type workloadResult struct {
	summary   string
	hash      uint64
	events    uint64
	simNs     int64
	stats     Stats
	answers   int
	unsettled int
}

// runWorkload runs three echo nodes and three clients under the seed's
// swarm faults for 3 s, heals everything, lets the clients run 0.5 s more,
// then waits for every request to settle.
func runWorkload(t testing.TB, seed uint64, trace io.Writer) workloadResult {
	return runWorkloadWith(t, seed, trace, nil)
}

// runWorkloadWith is runWorkload with the drawn faults passed through
// harsher, when not nil, before the run starts.
func runWorkloadWith(t testing.TB, seed uint64, trace io.Writer, harsher func(*Faults, *sched.ProcessFaults)) workloadResult {
	const nodeCount, clientCount = 3, 3
	streams := sched.NewStreams(seed)
	faults := DrawFaults(streams.Get("net-faults"))
	DrawPartitionKinds(streams.Get("net-partition-kinds"), &faults)
	processFaults := sched.DrawProcessFaults(streams.Get("process-faults"))
	processFaults.TickNs = 20e6 // 3 s is short: consider faults five times as often
	if harsher != nil {
		harsher(&faults, &processFaults)
	}
	c := newCluster(t, seed, nodeCount, faults, trace)
	c.s.Trace(sched.Record{Kind: "run.faults", Node: -1, Text: faults.String()})
	c.net.StartChaos(streams.Get("net-partitions"))
	c.onStart = c.startPeerTraffic
	for i := 0; i < nodeCount; i++ {
		c.startPeerTraffic(i)
	}
	var clients []*loadClient
	for i := 0; i < clientCount; i++ {
		proc := c.s.NewNode(int32(100 + i))
		lc := &loadClient{
			t: t, id: i, client: c.net.AddClient(fmt.Sprintf("client-%d", i), proc), proc: proc,
			r: streams.Getf("client/%d", i), s: c.s, nodes: nodeCount,
			current: make([]*trackedConn, nodeCount), sending: true,
		}
		clients = append(clients, lc)
		proc.After(1e6, lc.tick)
	}
	c.s.Trace(sched.Record{Kind: "run.faults", Node: -1, Text: processFaults.String()})
	pc := sched.StartProcessChaos(c.s, streams.Get("process"), c.procs, processFaults, sched.ProcessHooks{
		Restart: func(i int) { c.restart(i) },
	})

	c.s.Run(3e9)
	pc.Heal()
	c.net.Heal()
	c.s.Run(3.5e9)
	for _, lc := range clients {
		lc.sending = false
	}
	c.s.Run(6e9)

	result := workloadResult{
		summary: c.s.Summary(), hash: c.s.TraceHash(), events: c.s.EventsRun(), simNs: c.s.NowNs(), stats: c.net.Stats(),
	}
	for _, lc := range clients {
		result.answers += lc.answers
		for _, tc := range lc.all {
			result.unsettled += tc.sent - tc.resolved
		}
	}
	return result
}

// TestWorkloadDeterministic runs seeds twice: the same seed must give the
// same trace hash and counts, different seeds different hashes. Each run
// must also end with every client request settled after the heal, and with
// no frame the codec rejected.
func TestWorkloadDeterministic(t *testing.T) {
	seen := map[uint64]uint64{}
	var total Stats
	for seed := uint64(1); seed <= 12; seed++ {
		first := runWorkload(t, seed, nil)
		second := runWorkload(t, seed, nil)
		if first.summary != second.summary {
			t.Fatalf("seed %d ran twice:\n%s\n%s", seed, first.summary, second.summary)
		}
		if other, dup := seen[first.hash]; dup {
			t.Fatalf("seeds %d and %d share trace hash %016x", other, seed, first.hash)
		}
		seen[first.hash] = seed
		if first.unsettled != 0 {
			t.Errorf("seed %d: %d requests never settled after the heal", seed, first.unsettled)
		}
		if first.stats.MalformedFrames != 0 {
			t.Errorf("seed %d: %d malformed frames", seed, first.stats.MalformedFrames)
		}
		if first.answers < 1000 {
			t.Errorf("seed %d: only %d requests answered", seed, first.answers)
		}
		t.Logf("seed %d: %s answers=%d stats=%+v", seed, first.summary, first.answers, first.stats)
		total.Breaks += first.stats.Breaks
		total.Blackholes += first.stats.Blackholes
		total.Retransmits += first.stats.Retransmits
	}
	// The sweep must have exercised the faults, or it proves little.
	if total.Breaks == 0 || total.Blackholes == 0 || total.Retransmits == 0 {
		t.Fatalf("12 seeds exercised too few faults: %+v", total)
	}
}

// TestWorkloadUnderHarshFaults turns every fault up far beyond what the
// swarm draws, and checks the same properties: callbacks in send order and
// exactly once, requests reach nodes in send order (echoNode checks),
// every response echoes its request, and everything settles after Heal.
func TestWorkloadUnderHarshFaults(t *testing.T) {
	harsher := func(f *Faults, p *sched.ProcessFaults) {
		f.BreakOneIn = 50
		f.TailPerMille, f.TailNsMax = 200, 300e6
		f.BlackholePerMille = 300
		f.PartitionPerMille, f.PartitionNsMax = 300, f.PartitionNsMin+2e9
		f.ClogPerMille = 300
		f.NotifyNsMax = 200e6
		p.PausePerMille, p.CrashPerMille = 100, 50
	}
	var total Stats
	for seed := uint64(100); seed < 110; seed++ {
		result := runWorkloadWith(t, seed, nil, harsher)
		if result.unsettled != 0 {
			t.Errorf("seed %d: %d requests never settled after the heal", seed, result.unsettled)
		}
		if result.stats.MalformedFrames != 0 {
			t.Errorf("seed %d: %d malformed frames", seed, result.stats.MalformedFrames)
		}
		if result.answers == 0 {
			t.Errorf("seed %d: nothing answered", seed)
		}
		total.Breaks += result.stats.Breaks
		total.Blackholes += result.stats.Blackholes
		total.Retransmits += result.stats.Retransmits
	}
	if total.Breaks == 0 || total.Blackholes == 0 || total.Retransmits == 0 {
		t.Fatalf("harsh faults were not exercised: %+v", total)
	}
	t.Logf("10 harsh seeds: %+v", total)
}

// BenchmarkWorkload measures the toy workload: simulated seconds per wall
// second and events per second, codec included.
func BenchmarkWorkload(b *testing.B) {
	var events, simNs float64
	for i := 0; i < b.N; i++ {
		result := runWorkload(b, uint64(i), nil)
		events += float64(result.events)
		simNs += float64(result.simNs)
	}
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(simNs/1e9/b.Elapsed().Seconds(), "sim_s/s")
}
