package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/quorum"
	"strand/core/wire"
	"strand/sim/sched"
	"strand/sim/simnet"
)

// newVoterCluster starts three nodes that are each broker and controller,
// all three voters of controller.quorum.voters, with Kafka's default quorum
// timeouts. Ids, and so election jitter, come from the seed.
func newVoterCluster(t *testing.T, seed uint64) *cluster {
	t.Helper()
	return newVoterClusterOf(t, seed, 0)
}

// newVoterClusterOf is newVoterCluster with nodes 1-3 controllers only when
// brokers > 0, and that many broker-only nodes (4, 5, ...) beside them.
func newVoterClusterOf(t *testing.T, seed uint64, brokers int32) *cluster {
	t.Helper()
	s := sched.New(sched.Options{})
	streams := sched.NewStreams(seed)
	c := &cluster{t: t, s: s, streams: streams, net: simnet.New(s, streams.Get("net"), simnet.Calm()),
		nodes: map[int32]*testNode{}, conns: map[int32]*simnet.ClientConn{}, idRand: streams.Get("ids")}
	voters := "1@127.0.0.1:9003,2@127.0.0.1:9005,3@127.0.0.1:9007"
	for id := int32(1); id <= 3+brokers; id++ {
		roles, listeners := "broker,controller", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", 9000+2*id, 9001+2*id)
		if brokers > 0 && id <= 3 {
			roles, listeners = "controller", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", 9001+2*id)
		} else if brokers > 0 {
			roles, listeners = "broker", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", 9000+2*id)
		}
		c.addNode(id, map[string]string{
			"node.id":                        fmt.Sprint(id),
			"process.roles":                  roles,
			"listeners":                      listeners,
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"controller.listener.names":      "CONTROLLER",
			"controller.quorum.voters":       voters,
			"log.dirs":                       fmt.Sprintf("/data/node%d", id),
		})
	}
	c.clientP = s.NewNode(100)
	c.client = c.net.AddClient("test-client", c.clientP)
	return c
}

// activeController is the node whose controller is active, -1 if none.
// Two active at once is a failure: a leader of an old epoch resigns before
// its successor's epoch can commit, in this calm network.
func (c *cluster) activeController() int32 {
	c.t.Helper()
	active := int32(-1)
	for _, id := range slices.Sorted(mapKeys(c.nodes)) {
		tn := c.nodes[id]
		if tn.proc.Up() && tn.node.controllerRole.ctrl != nil && tn.node.controllerRole.ctrl.Active() {
			if active >= 0 {
				c.t.Fatalf("nodes %d and %d are both the active controller", active, id)
			}
			active = id
		}
	}
	return active
}

func mapKeys(m map[int32]*testNode) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m { // order-independent: callers sort
			if !yield(k) {
				return
			}
		}
	}
}

// waitVoterClusterReady waits for an active controller that sees every up
// broker registered and unfenced, and returns it.
func (c *cluster) waitVoterClusterReady() int32 {
	c.t.Helper()
	c.waitFor("an active controller with every broker unfenced", 30000, func() bool {
		active := c.activeController()
		if active < 0 {
			return false
		}
		im := c.nodes[active].node.controllerRole.ctrl.Image()
		for id, tn := range c.nodes {
			if b, ok := im.Broker(id); tn.proc.Up() && tn.cfg.Broker.Roles.Broker && (!ok || b.Fenced) {
				return false
			}
		}
		return true
	})
	return c.activeController()
}

// TestControllerFailoverKeepsTheClusterWorking: three voters; the node of
// the active controller, which also leads a data partition, crashes. Another
// voter becomes the active controller, the topic created before the crash
// survives, the brokers find the new controller (they keep heartbeating:
// none is fenced but the crashed one), the data partition gets a new leader
// from the ISR with every acknowledged record, new topics can be created,
// and the crashed node rejoins after a restart.
func TestControllerFailoverKeepsTheClusterWorking(t *testing.T) {
	c := newVoterCluster(t, 1)
	old := c.waitVoterClusterReady()
	var other int32 = 1
	if other == old {
		other = 2
	}
	c.createTopic(other, "before", 3, 3)
	var p int32 = -1
	for i := range int32(3) {
		if s, _ := c.nodes[old].node.controllerRole.ctrl.Image().PartitionByName("before", i); s.Leader == old {
			p = i
		}
	}
	if p < 0 {
		t.Fatalf("the controller's node %d leads no partition of before", old)
	}
	c.waitFor("ISR of 3", 10000, func() bool {
		s, _ := c.nodes[old].node.controllerRole.ctrl.Image().PartitionByName("before", p)
		return len(s.ISR) == 3
	})
	if r := c.produce(old, "before", p, -1, recordBatch("acked")); r.ErrorCode != 0 {
		t.Fatalf("produce before the crash: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	c.nodes[old].proc.Crash()
	crashNs := c.s.NowNs()
	c.waitFor("a new active controller", 20000, func() bool { return c.activeController() >= 0 })
	active := c.activeController()
	t.Logf("controller %d → %d after %d ms", old, active, (c.s.NowNs()-crashNs)/1e6)
	if _, ok := c.nodes[active].node.controllerRole.ctrl.Image().TopicByName("before"); !ok {
		t.Fatal("topic created before the crash is gone")
	}

	c.waitFor("a new leader for the crashed node's partition", 30000, func() bool {
		s, _ := c.nodes[active].node.controllerRole.ctrl.Image().PartitionByName("before", p)
		if s.Leader < 0 || s.Leader == old {
			return false
		}
		ln := c.nodes[s.Leader].node
		part := ln.parts.partitions[partitionKey{"before", p}]
		return part != nil && part.appliedLeaderEpoch == s.LeaderEpoch
	})
	s, _ := c.nodes[active].node.controllerRole.ctrl.Image().PartitionByName("before", p)
	for id, tn := range c.nodes {
		b, _ := c.nodes[active].node.controllerRole.ctrl.Image().Broker(id)
		if tn.proc.Up() && b.Fenced {
			t.Fatalf("broker %d was fenced: it did not find the new controller", id)
		}
	}
	if r := c.produce(s.Leader, "before", p, -1, recordBatch("after")); r.ErrorCode != 0 {
		t.Fatalf("produce to the new leader %d: %v", s.Leader, kerr.ErrorForCode(r.ErrorCode))
	}
	if got := joined(values(t, c.fetch(s.Leader, "before", p, 0).RecordBatches)); got != "acked,after" {
		t.Fatalf("partition after the failover holds %q, want acked,after", got)
	}
	c.createTopic(other, "after", 1, 2)

	tn := c.nodes[old]
	tn.proc.Restart()
	c.start(tn)
	c.waitFor("the crashed node registered again and unfenced", 30000, func() bool {
		b, ok := c.nodes[c.activeController()].node.controllerRole.ctrl.Image().Broker(old)
		return ok && !b.Fenced && b.IncarnationID == tn.node.incarnation
	})
	if _, ok := tn.node.Image().TopicByName("after"); !ok {
		t.Fatal("the restarted node did not catch up with the metadata log")
	}
}

// TestControllerFailoverTime measures, over a seed sweep with Kafka's
// default quorum timeouts, the simulated time from the crash of the active
// controller's node to a new active controller, and to every surviving
// broker having applied the new controller's first committed entry (its
// metadata fetches found the new controller). Issue 5's goal
// is ≤ 2 s; KRaft's own detection alone is controller.quorum.fetch.timeout.ms
// (2 s), so the bound asserted is that plus two election timeouts, and the
// distribution is logged.
func TestControllerFailoverTime(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 3
	}
	var electedMs, foundMs []int64
	for seed := 1; seed <= seeds; seed++ {
		c := newVoterCluster(t, uint64(seed))
		old := c.waitVoterClusterReady()
		c.run(3000) // steady state: the brokers heartbeat the controller
		c.nodes[old].proc.Crash()
		crashNs := c.s.NowNs()
		c.waitFor("a new active controller", 20000, func() bool { return c.activeController() >= 0 })
		electedMs = append(electedMs, (c.s.NowNs()-crashNs)/1e6)
		activated := c.nodes[c.activeController()].node.controllerRole.ctrl.CommittedOffset()
		c.waitFor("every surviving broker following the new controller's log", 20000, func() bool {
			for _, tn := range c.nodes {
				if tn.proc.Up() && tn.node.Image().Offset()+1 < activated {
					return false
				}
			}
			return true
		})
		foundMs = append(foundMs, (c.s.NowNs()-crashNs)/1e6)
	}
	slices.Sort(electedMs)
	slices.Sort(foundMs)
	pct := func(v []int64, q float64) int64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	t.Logf("controller failover over %d seeds: new active controller p50 %d ms p99 %d ms; brokers following it p50 %d ms p99 %d ms",
		seeds, pct(electedMs, 0.5), pct(electedMs, 0.99), pct(foundMs, 0.5), pct(foundMs, 0.99))
	boundMs := int64(2000 + 2*2*1000)
	if worst := electedMs[len(electedMs)-1]; worst > boundMs {
		t.Fatalf("controller failover took %d ms, above %d ms", worst, boundMs)
	}
}

// TestControllerOnlyVotersFailover: three controller-only voters and two
// broker-only nodes. The brokers register with whichever voter is active,
// and when its node crashes they find the new one: they stay unfenced, and a
// topic created before the crash survives while a new one can be created
// through a broker.
func TestControllerOnlyVotersFailover(t *testing.T) {
	c := newVoterClusterOf(t, 7, 2)
	old := c.waitVoterClusterReady()
	c.createTopic(4, "before", 2, 2)
	c.nodes[old].proc.Crash()
	c.waitFor("a new active controller", 20000, func() bool { return c.activeController() >= 0 })
	active := c.activeController()
	c.run(15000) // beyond a broker session: a broker that lost the controller would be fenced
	im := c.nodes[active].node.controllerRole.ctrl.Image()
	for _, id := range []int32{4, 5} {
		if b, ok := im.Broker(id); !ok || b.Fenced {
			t.Fatalf("broker %d fenced or unknown after the controller moved from %d to %d", id, old, active)
		}
	}
	if _, ok := im.TopicByName("before"); !ok {
		t.Fatal("topic created before the crash is gone")
	}
	c.createTopic(5, "after", 1, 2)
	s, _ := c.nodes[active].node.controllerRole.ctrl.Image().PartitionByName("after", 0)
	if r := c.produce(s.Leader, "after", 0, -1, recordBatch("x")); r.ErrorCode != 0 {
		t.Fatalf("produce to a topic created after the failover: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestBrokerBehindTheLogStartLoadsTheSnapshot: the controller snapshots
// every few records and drops the log behind; a broker restarted after that
// fetches from offset 0, is told the snapshot's id, reads it with
// FetchSnapshot, and then follows the log: it knows every topic and serves
// its partitions again.
func TestBrokerBehindTheLogStartLoadsTheSnapshot(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctl := c.nodes[1]
	ctl.proc.Crash()
	ctl.proc.Restart()
	ctl.cfg.ControllerSnapshotIntervalRecords = 5
	c.start(ctl)
	c.waitRegistered()
	for i := range 4 {
		c.createTopic(2, fmt.Sprint("t", i), 2, 2)
	}
	c.waitFor("a snapshot truncating the metadata log", 10000, func() bool {
		return ctl.node.controllerRole.quorumNode.Raft().LogStartOffset() > 0
	})
	start := ctl.node.controllerRole.quorumNode.Raft().LogStartOffset()
	tn := c.nodes[3]
	tn.proc.Crash()
	tn.proc.Restart()
	c.start(tn)
	c.waitFor("the restarted broker caught up through the snapshot", 30000, func() bool {
		return tn.node.Image().Offset() >= start && tn.node.meta.caughtUpWithRegistration()
	})
	for i := range 4 {
		if _, ok := tn.node.Image().TopicByName(fmt.Sprint("t", i)); !ok {
			t.Fatalf("topic t%d missing from the image loaded from the snapshot", i)
		}
	}
	c.createTopic(2, "after", 1, 3)
	if r := c.produce(c.leaderOf("after", 0), "after", 0, -1, recordBatch("x")); r.ErrorCode != 0 {
		t.Fatalf("acks=all with the restarted broker in the ISR: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestControlledShutdownHandsOverTheController: the node of the active
// controller shuts down in a controlled way. Its voter resigns
// (EndQuorumEpoch) and Close waits for the successor, so another voter is
// the active controller before the process exits, well within the fetch
// timeout that a crash would cost (KRaft's graceful shutdown); the
// brokers keep their registrations and a topic can be created at once.
func TestControlledShutdownHandsOverTheController(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		c := newVoterCluster(t, seed)
		old := c.waitVoterClusterReady()
		c.run(3000)
		stopped := false
		c.nodes[old].node.BeginShutdown(func() { stopped = true })
		c.waitFor("shutdown allowed", 10000, func() bool { return stopped })
		closeNs := c.s.NowNs()
		closed := false
		c.nodes[old].node.Close(func(err error) {
			if err != nil {
				t.Error(err)
			}
			closed = true
		})
		c.waitFor("closed", 5000, func() bool { return closed })
		c.nodes[old].proc.Crash() // the process exits
		if leader := c.nodes[old].node.QuorumRaft().LeaderID(); leader < 0 || leader == old {
			t.Fatalf("seed %d: node %d closed without a successor (it follows %d)", seed, old, leader)
		}
		c.waitFor("a new active controller", 5000, func() bool { return c.activeController() >= 0 })
		tookMs := (c.s.NowNs() - closeNs) / 1e6
		t.Logf("seed %d: controller %d → %d %d ms after Close", seed, old, c.activeController(), tookMs)
		if tookMs >= quorum.DefaultFetchTimeoutMs {
			t.Fatalf("seed %d: the hand-over took %d ms, not less than the fetch timeout %d ms a crash costs", seed, tookMs, quorum.DefaultFetchTimeoutMs)
		}
		other := int32(1)
		if other == old {
			other = 2
		}
		c.createTopic(other, "after", 1, 2)
	}
}

// TestControllerAdvertisesRaftRPCs: a controller listener's ApiVersions
// table names the Raft RPCs voters send each other (Vote,
// BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, Fetch up to the voters'
// version) and the controller RPCs brokers send; a broker listener's names
// none of them but Fetch (up to v16 for clients) and ApiVersions. The
// transport's acceptance test built from a node's accepted table lets
// every Raft RPC through in the version the quorum's codec speaks exactly
// when the node is a controller.
func TestControllerAdvertisesRaftRPCs(t *testing.T) {
	find := func(table []kmsg.ApiVersionsResponseApiKey, key int16) (kmsg.ApiVersionsResponseApiKey, bool) {
		for _, k := range table {
			if k.ApiKey == key {
				return k, true
			}
		}
		return kmsg.ApiVersionsResponseApiKey{}, false
	}
	controllerKeys := []kmsg.Key{kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.FetchSnapshot, kmsg.Fetch,
		kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AlterPartition, kmsg.AllocateProducerIDs, kmsg.ApiVersions}
	for _, kind := range []listenerKind{brokerListener, controllerListener} {
		table := versionsTable(kind)
		for _, key := range controllerKeys {
			_, got := find(table, key.Int16())
			want := kind == controllerListener || key == kmsg.Fetch || key == kmsg.ApiVersions
			if got != want {
				t.Errorf("%s listener: key %v advertised: %v, want %v", kind, key, got, want)
			}
		}
		if f, _ := find(table, kmsg.Fetch.Int16()); f.MaxVersion != 16 {
			t.Errorf("%s listener: Fetch advertised up to v%d, want v16", kind, f.MaxVersion)
		}
	}
	for _, tc := range []struct {
		name               string
		broker, controller bool
	}{
		{"controller only", false, true},
		{"broker and controller", true, true},
		{"broker only", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			supported := wire.VersionsSupported(versionsTable(listenerKindsOf(tc.broker, tc.controller)...))
			for _, v := range quorum.Versions() {
				// The voters' Fetch version is a client version too.
				want := tc.controller || (tc.broker && v.Key == kmsg.Fetch.Int16() && v.Max <= fetchEncodedVersionMax)
				if got := supported(v.Key, v.Max); got != want {
					t.Errorf("transport accepts key %d v%d: %v, want %v", v.Key, v.Max, got, want)
				}
			}
		})
	}
}

// TestCrashedBrokerIsFencedWithinItsSession: three combined voters with
// Kafka's default session timeout; a node that is not the active
// controller crashes. Within the session timeout plus a second the active
// controller has fenced it and given each of its partitions a new leader,
// over a sweep of seeds (election jitter and crash instants differ).
func TestCrashedBrokerIsFencedWithinItsSession(t *testing.T) {
	seeds := uint64(20)
	if testing.Short() {
		seeds = 6
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		c := newVoterCluster(t, seed)
		active := c.waitVoterClusterReady()
		c.createTopic(active, "t", 6, 3)
		c.run(3000 + int64(seed*137%2000))
		victim := active%3 + 1
		c.nodes[victim].proc.Crash()
		crashNs := c.s.NowNs()
		c.waitFor("the crashed broker fenced and its partitions led elsewhere", 9000+1000, func() bool {
			ctl := c.activeController()
			if ctl < 0 {
				return false
			}
			im := c.nodes[ctl].node.controllerRole.ctrl.Image()
			if b, ok := im.Broker(victim); !ok || !b.Fenced {
				return false
			}
			for p := range int32(6) {
				if s, _ := im.PartitionByName("t", p); s.Leader == victim || s.Leader < 0 {
					return false
				}
			}
			return true
		})
		t.Logf("seed %d: broker %d fenced and replaced %d ms after its crash", seed, victim, (c.s.NowNs()-crashNs)/1e6)
	}
}
