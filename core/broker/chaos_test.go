package broker

import (
	"flag"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/replica"
	"strand/sim/memdisk"
	"strand/sim/sched"
)

// TestChaosAcksAllNeverLost is a smoke test of the whole node under the
// simulator's faults: a controller-only node 1 (never crashed) and brokers
// 2..4 under network chaos (partitions, clogs, breaks) and process crashes
// and pauses, each crash a power loss (unsynced writes lost, whole or torn)
// or a process kill, one broker at a time: within the fault budget. A client produces acks=all to the current
// leader of an RF-3, min.insync=2 partition. After healing, every
// acknowledged record must be readable, once, in order of acknowledgement,
// and all replicas must hold identical logs.
func TestChaosAcksAllNeverLost(t *testing.T) {
	seeds := *chaosSeeds
	if testing.Short() {
		seeds = min(seeds, 3)
	}
	for seed := *chaosFirstSeed; seed < *chaosFirstSeed+seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { chaosRun(t, uint64(seed)) })
	}
}

var (
	chaosSeeds     = flag.Int("chaos.seeds", 12, "seeds TestChaosAcksAllNeverLost runs")
	chaosFirstSeed = flag.Int("chaos.seed", 1, "first seed TestChaosAcksAllNeverLost runs")
	chaosVerbose   = flag.Bool("chaos.v", false, "log restarts and the partition's state as it changes")
	chaosBug       = flag.String("chaos.bug", "", "planted bug to run with: hw-truncation, early-ack, no-fencing, isr-min-ignored")
)

// plantedBugs parses -chaos.bug.
func plantedBugs(t *testing.T) replica.Bugs {
	var b replica.Bugs
	switch *chaosBug {
	case "":
	case "hw-truncation":
		b.HWTruncation = true
	case "early-ack":
		b.EarlyAck = true
	case "no-fencing":
		b.NoFencing = true
	case "isr-min-ignored":
		b.ISRMinIgnored = true
	default:
		t.Fatalf("unknown -chaos.bug %q", *chaosBug)
	}
	return b
}

func chaosRun(t *testing.T, seed uint64) {
	c := newSimCluster(t, 4, "controller", map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"}, seed, true)
	if bugs := plantedBugs(t); bugs != (replica.Bugs{}) {
		for id := int32(2); id <= 4; id++ {
			tn := c.nodes[id]
			tn.cfg.Bugs.Replica = bugs
			tn.proc.Crash()
			tn.proc.Restart()
			c.start(tn)
		}
	}
	c.waitRegistered()
	c.createTopic(2, "r", 1, 3)
	// A crash is a power loss or a process kill, drawn per crash: the
	// crashed broker loses some or all of its unsynced writes. One broker
	// at a time (MayCrash) is within the budget of min.insync.replicas-1.
	diskRand := c.streams.Get("disk")
	for id := int32(2); id <= 4; id++ {
		tn := c.nodes[id]
		tn.proc.OnCrash(func() {
			mode := memdisk.CrashMode(diskRand.IntN(3))
			if *chaosVerbose {
				t.Logf("t=%dms crash %d: %s", c.s.NowNs()/1e6, tn.id, mode)
			}
			tn.disk.Crash(diskRand, mode)
		})
	}

	var procs []*sched.Node
	for id := int32(2); id <= 4; id++ {
		procs = append(procs, c.nodes[id].proc)
	}
	chaos := sched.StartProcessChaos(c.s, c.streams.Get("process"), procs, sched.DrawProcessFaults(c.streams.Get("process-faults")), sched.ProcessHooks{
		// Within the fault budget: a broker may crash only while every
		// broker is up, registered in its current incarnation, unfenced,
		// and in the ISR. Every restart is an unclean shutdown (no
		// clean-shutdown marker yet), and a restarted broker cannot
		// register until its old session expires; crashing the others
		// meanwhile is KIP-966's over-budget case (every ISR member
		// restarted uncleanly), in which core/controller leaves the
		// partition without a leader.
		MayCrash: func(int) bool {
			im := c.nodes[1].node.controllerRole.ctrl.Image()
			s, _ := im.PartitionByName("r", 0)
			for id := int32(2); id <= 4; id++ {
				b, _ := im.Broker(id)
				n := c.nodes[id]
				if !n.proc.Up() || n.node.meta.brokerEpoch != b.Epoch || b.Fenced {
					return false
				}
			}
			return len(s.ISR) == 3
		},
		Restart: func(i int) {
			tn := c.nodes[int32(i+2)]
			if *chaosVerbose {
				t.Logf("t=%d restart %d", c.s.NowNs()/1e6, tn.id)
			}
			tn.proc.Restart()
			c.start(tn)
		},
	})
	c.net.StartChaos(nil)
	if *chaosVerbose {
		tracePartition(t, c)
	}

	var acked []string
	next := 0
	stopped := false
	var produce func()
	produce = func() {
		if stopped {
			return
		}
		leader := c.leaderOf("r", 0)
		if leader < 2 || !c.nodes[leader].proc.Up() {
			c.clientP.After(50e6, produce)
			return
		}
		value := fmt.Sprint("v", next)
		next++
		cc := c.conn(leader)
		req := produceReq("r", 0, -1, recordBatch(value))
		req.TimeoutMillis = 2000
		cc.Send(req, func(r kmsg.Response, err error) {
			if err == nil && r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode == 0 {
				acked = append(acked, value)
			}
			c.clientP.After(10e6, produce)
		})
	}
	c.clientP.After(0, produce)
	c.run(20000) // fault phase
	stopped = true
	chaos.Heal()
	c.net.Heal()
	c.run(30000) // liveness phase

	leader := c.leaderOf("r", 0)
	if leader < 2 {
		im := c.nodes[1].node.controllerRole.ctrl.Image()
		ps, _ := im.PartitionByName("r", 0)
		var brokers []string
		for _, id := range im.BrokerIDs() {
			b, _ := im.Broker(id)
			brokers = append(brokers, fmt.Sprintf("%d(epoch %d fenced %v shutdown %v up %v)", id, b.Epoch, b.Fenced, b.InControlledShutdown, c.nodes[id].proc.Up()))
		}
		t.Fatalf("no leader after healing (acked %d): partition %+v, brokers %v", len(acked), ps, brokers)
	}
	c.waitFor("replicas converge", 30000, func() bool {
		leo := c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset()
		for id := int32(2); id <= 4; id++ {
			p := c.nodes[id].node.parts.partitions[partitionKey{"r", 0}]
			if p == nil || p.log.LogEndOffset() != leo || p.replica.HighWatermark() != leo {
				return false
			}
		}
		return true
	})
	var logs [][]string
	for id := int32(2); id <= 4; id++ {
		p := c.nodes[id].node.parts.partitions[partitionKey{"r", 0}]
		res, err := p.log.Read(0, 1<<30, p.log.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := copyRegions(res)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, values(t, raw))
	}
	for i := 1; i < len(logs); i++ {
		if !slices.Equal(logs[0], logs[i]) {
			t.Fatalf("replicas differ:\n%v\n%v", logs[0], logs[i])
		}
	}
	position := map[string]int{}
	for i, v := range logs[0] {
		if _, dup := position[v]; !dup {
			position[v] = i
		}
	}
	last := -1
	for _, v := range acked {
		i, ok := position[v]
		if !ok {
			t.Fatalf("acknowledged %s is lost (acked %d, log %d)", v, len(acked), len(logs[0]))
		}
		if i < last {
			t.Fatalf("acknowledged %s at %d, before an earlier acknowledgement at %d", v, i, last)
		}
		last = i
	}
	t.Logf("seed %d: %d acknowledged, log of %d, leader %d", seed, len(acked), len(logs[0]), leader)
}

// tracePartition logs r-0's state and the brokers' registrations whenever
// they change (-chaos.v).
func tracePartition(t *testing.T, c *cluster) {
	last := ""
	var poll func()
	poll = func() {
		im := c.nodes[1].node.controllerRole.ctrl.Image()
		ps, _ := im.PartitionByName("r", 0)
		state := fmt.Sprintf("%+v", ps)
		for _, id := range im.BrokerIDs() {
			b, _ := im.Broker(id)
			state += fmt.Sprintf(" broker %d: epoch %d fenced %v up %v;", id, b.Epoch, b.Fenced, c.nodes[id].proc.Up())
		}
		if state != last {
			t.Logf("t=%dms %s", c.s.NowNs()/1e6, state)
			last = state
		}
		c.clientP.After(20e6, poll)
	}
	c.clientP.After(0, poll)
}
