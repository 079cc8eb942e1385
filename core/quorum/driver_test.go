package quorum

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
)

// recordingApplier is the test state machine: the applied entries.
type recordingApplier struct {
	t       *testing.T
	applied []Entry
	failed  error
	// started: StartNode returned; installs counts snapshots loaded after.
	started  bool
	installs int
}

func (a *recordingApplier) LoadSnapshot(snap *Snapshot) {
	entries, err := decodeState(snap.Data)
	if err != nil {
		a.t.Errorf("snapshot: %v", err)
	}
	a.applied = entries
	if a.started {
		a.installs++
	}
}

func (a *recordingApplier) Apply(entries []Entry) {
	for _, e := range entries {
		if e.Offset != int64(len(a.applied)) {
			a.t.Errorf("applied offset %d after %d entries", e.Offset, len(a.applied))
		}
		a.applied = append(a.applied, e)
	}
}

func (a *recordingApplier) Failed(err error) { a.failed = err }

// driverHost is one simulated process running a Node.
type driverHost struct {
	id    int32
	proc  *sched.Node
	disk  *memdisk.Disk
	clock *simclock.Clock
	net   *simnet.NodeNet
	node  *Node
	app   *recordingApplier
}

func (h *driverHost) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	if IsQuorumRequest(req) {
		h.node.HandleRequest(conn, header, req, env.NodeID(h.id))
		return
	}
	h.net.Close(conn, header.CorrelationID)
}

func (h *driverHost) HandleClosed(conn env.ConnID) { h.node.HandleClosed(conn) }

// TestDriverOverSimulatedEnvironment runs three Nodes on simnet, memdisk
// and simclock: a leader is elected, proposals commit, the leader's process
// crashes and loses its unsynced data, a new leader takes over, and after
// the restart every node has applied the same entries, including through
// snapshots sent with FetchSnapshot.
func TestDriverOverSimulatedEnvironment(t *testing.T) {
	streams := sched.NewStreams(7)
	s := sched.New(sched.Options{})
	network := simnet.New(s, streams.Get("net"), simnet.Calm())
	voters := []int32{1, 2, 3}
	var hosts []*driverHost
	start := func(h *driverHost) {
		rng := streams.Getf("raft/%d/%d", h.id, h.proc.Incarnation())
		h.app = &recordingApplier{t: t}
		node, err := StartNode(DefaultConfig(h.id, voters, rng.Int64N), h.clock, h.net, h.disk, "__cluster_metadata-0", h.app)
		if err != nil {
			t.Fatalf("start node %d: %v", h.id, err)
		}
		h.node = node
		h.app.started = true
		h.net.SetHandler(h)
	}
	for _, id := range voters {
		proc := s.NewNode(id)
		h := &driverHost{id: id, proc: proc, clock: simclock.New(s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12})}
		h.disk = memdisk.New(memdisk.Options{Post: proc.Post})
		h.net = network.AddNode(env.NodeID(id), proc)
		hosts = append(hosts, h)
		start(h)
	}
	leader := func() *driverHost {
		var best *driverHost
		for _, h := range hosts {
			if h.proc.Up() && h.node.Raft().Role() == Leader && (best == nil || h.node.Raft().Epoch() > best.node.Raft().Epoch()) {
				best = h
			}
		}
		return best
	}
	proposed := 0
	var propose func()
	propose = func() {
		if l := leader(); l != nil && s.NowNs() < 20e9 {
			proposed++
			if _, err := l.node.Propose(fmt.Appendf(nil, "p%d", proposed)); err != nil {
				t.Errorf("propose: %v", err)
			}
		}
		s.After(50e6, propose)
	}
	s.After(100e6, propose)
	var snapshot func()
	snapshot = func() {
		for _, h := range hosts {
			if h.proc.Up() && int64(len(h.app.applied)) > h.node.Raft().LogStartOffset()+5 {
				_ = h.node.TakeSnapshot(int64(len(h.app.applied)), encodeState(h.app.applied))
			}
		}
		s.After(700e6, snapshot)
	}
	s.After(700e6, snapshot)

	s.Run(5e9)
	old := leader()
	if old == nil {
		t.Fatal("no leader after 5 s")
	}
	oldEpoch := old.node.Raft().Epoch()
	old.node.Stop()
	old.proc.Crash()
	old.disk.Crash(nil, memdisk.CrashLoseAll)
	s.Run(9e9)
	if l := leader(); l == nil || l == old || l.node.Raft().Epoch() <= oldEpoch {
		t.Fatalf("no new leader 4 s after the leader's crash")
	}
	old.proc.Restart()
	start(old)
	s.Run(25e9)

	want := leader().app.applied
	if len(want) < proposed/2 {
		t.Fatalf("leader applied %d entries of %d proposed", len(want), proposed)
	}
	for _, h := range hosts {
		if h.app.failed != nil {
			t.Fatalf("node %d failed: %v", h.id, h.app.failed)
		}
		got := h.app.applied
		if len(got) != len(want) {
			t.Fatalf("node %d applied %d entries, leader %d", h.id, len(got), len(want))
		}
		for i := range got {
			if got[i].Epoch != want[i].Epoch || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("node %d applied %q (epoch %d) at %d, leader %q (epoch %d)", h.id, got[i].Data, got[i].Epoch, i, want[i].Data, want[i].Epoch)
			}
		}
	}
	if old.app.installs == 0 {
		t.Fatalf("the restarted node caught up without a snapshot from the leader")
	}
	t.Logf("%d proposed, %d applied everywhere; leader epochs %d -> %d; log starts %d %d %d",
		proposed, len(want), oldEpoch, leader().node.Raft().Epoch(),
		hosts[0].node.Raft().LogStartOffset(), hosts[1].node.Raft().LogStartOffset(), hosts[2].node.Raft().LogStartOffset())
}

// TestVoterTrafficClassifiedAlike: simnet gives voters' Raft traffic its
// own connections by its own copy of IsVoterRequest (it cannot import this
// package); the two agree on every request the codec sends and on the
// Fetches brokers and replica fetchers send.
func TestVoterTrafficClassifiedAlike(t *testing.T) {
	var reqs []kmsg.Request
	for _, m := range []Message{
		{Type: MsgVote, To: 2, Epoch: 3, LeaderID: -1, PreVote: true},
		{Type: MsgVote, To: 2, Epoch: 3, LeaderID: -1},
		{Type: MsgBeginEpoch, To: 2, Epoch: 3, LeaderID: 1},
		{Type: MsgEndEpoch, To: 2, Epoch: 3, LeaderID: 1, PreferredSuccessors: []int32{2}},
		{Type: MsgFetch, From: 1, To: 2, Epoch: 3, LeaderID: 2, FetchOffset: 5, LastFetchedEpoch: 2},
		{Type: MsgFetchSnapshot, From: 1, To: 2, Epoch: 3, LeaderID: 2, SnapshotEndOffset: 5, SnapshotEpoch: 2},
	} {
		req, err := EncodeRequest(m)
		if err != nil {
			t.Fatalf("encode %v: %v", m.Type, err)
		}
		if !IsVoterRequest(req) {
			t.Errorf("%v is not voter traffic", m.Type)
		}
		reqs = append(reqs, req)
	}
	brokerFetch := kmsg.NewPtrFetchRequest() // a broker following the log
	brokerFetch.SetVersion(12)
	brokerFetch.ReplicaID = -1
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = MetadataTopic
	brokerFetch.Topics = append(brokerFetch.Topics, topic)
	replicaFetch := kmsg.NewPtrFetchRequest() // a partition's follower
	replicaFetch.SetVersion(12)
	replicaFetch.ReplicaID = 3
	for _, req := range []kmsg.Request{brokerFetch, replicaFetch} {
		if IsVoterRequest(req) {
			t.Errorf("a v%d Fetch with ReplicaID %d is voter traffic", req.GetVersion(), req.(*kmsg.FetchRequest).ReplicaID)
		}
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		if got, want := simnet.VoterTraffic(req), IsVoterRequest(req); got != want {
			t.Errorf("%s v%d: simnet.VoterTraffic %v, IsVoterRequest %v", kmsg.NameForKey(req.Key()), req.GetVersion(), got, want)
		}
	}
}

// countingClock counts the timers a Node arms, stops and sees fire.
type countingClock struct {
	env.Clock
	armed, stopped, fired int
}

func (c *countingClock) SetTimer(delayNs int64, fire func()) env.Timer {
	c.armed++
	return countingTimer{c.Clock.SetTimer(delayNs, func() { c.fired++; fire() }), c}
}

type countingTimer struct {
	env.Timer
	c *countingClock
}

func (t countingTimer) Stop() bool {
	t.c.stopped++
	return t.Timer.Stop()
}

// TestIdleDriverWakesAtDeadlinesOnly: three Nodes with nothing to
// replicate wake only for Raft's deadlines (the leader to answer the
// parked Fetches when their max wait ends, the followers when a fetch
// timeout they have since pushed back comes due), not on a fixed tick,
// and arm a timer not for every Fetch answer but only for a deadline
// earlier than the one armed: a follower once per wake-up, the leader at
// most twice (after answering the parked Fetches it arms for check-quorum,
// then for the max wait of the next parked Fetch). A 10 ms tick would fire
// 100 times a second.
func TestIdleDriverWakesAtDeadlinesOnly(t *testing.T) {
	streams := sched.NewStreams(3)
	s := sched.New(sched.Options{})
	network := simnet.New(s, streams.Get("net"), simnet.Calm())
	voters := []int32{1, 2, 3}
	var hosts []*driverHost
	var clocks []*countingClock
	for _, id := range voters {
		proc := s.NewNode(id)
		h := &driverHost{id: id, proc: proc, clock: simclock.New(s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12})}
		h.disk = memdisk.New(memdisk.Options{Post: proc.Post})
		h.net = network.AddNode(env.NodeID(id), proc)
		h.app = &recordingApplier{t: t}
		clock := &countingClock{Clock: h.clock}
		node, err := StartNode(DefaultConfig(id, voters, streams.Getf("raft/%d", id).Int64N), clock, h.net, h.disk, "__cluster_metadata-0", h.app)
		if err != nil {
			t.Fatalf("start node %d: %v", id, err)
		}
		h.node = node
		h.net.SetHandler(h)
		hosts, clocks = append(hosts, h), append(clocks, clock)
	}
	s.Run(5e9) // elected and settled
	before := make([]countingClock, len(clocks))
	for i, c := range clocks {
		before[i] = *c
	}
	const idleS = 20
	s.Run((5 + idleS) * 1e9)
	leaders := 0
	for i, h := range hosts {
		c := clocks[i]
		fired, armed, stopped := c.fired-before[i].fired, c.armed-before[i].armed, c.stopped-before[i].stopped
		role := h.node.Raft().Role()
		t.Logf("node %d (%v): %d timers fired, %d armed, %d stopped in %d s idle", h.id, role, fired, armed, stopped, idleS)
		// The leader answers each follower's parked Fetch once per max wait;
		// a follower wakes about once per fetch timeout.
		wakesPerSMax := 2*1000/DefaultFetchMaxWaitMs + 1
		if role != Leader {
			wakesPerSMax = 1
		} else {
			leaders++
		}
		armsPerWakeMax := 1
		if role == Leader {
			armsPerWakeMax = 2
		}
		if fired > wakesPerSMax*idleS || armed > armsPerWakeMax*fired+2 {
			t.Errorf("node %d (%v) woke %d times and armed %d timers in %d s idle; want at most %d wake-ups a second, and at most %d timers armed per wake-up",
				h.id, role, fired, armed, idleS, wakesPerSMax, armsPerWakeMax)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders after %d s", leaders, 5+idleS)
	}
}
