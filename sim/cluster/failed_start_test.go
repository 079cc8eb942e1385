package cluster

import (
	"testing"

	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simnet"
)

// TestFailedStartExitsTheProcess: a broker whose start fails on damage the
// harness injected exits before the operator repairs it and starts it
// again, so that nothing the failed start scheduled runs. broker.New
// starts the controller role before it opens the log directories; left
// running, that Raft answers and fetches in the voter's name beside the
// new incarnation's, and a leader may commit on its acknowledgement
// (raft-commit). Here the failed start's timers must come due on a dead
// incarnation and be dropped.
func TestFailedStartExitsTheProcess(t *testing.T) {
	s := sched.New(sched.Options{})
	streams := sched.NewStreams(1)
	deep := &deepFaults{cfg: DeepDiskFaults{TickNs: 1e9}}
	var failures []string
	c, err := newCluster(s, streams, simnet.Calm(), deep, Shapes["small"], Bugs{}, false,
		func(check, detail string) { failures = append(failures, check+": "+detail) })
	if err != nil {
		t.Fatal(err)
	}
	s.RunFor(5e9)
	n := c.Nodes[1]
	n.nextCrash = memdisk.CrashKeepAll
	n.Proc.Crash()
	s.RunFor(5e9) // the crashed incarnation's timers come due and are dropped
	// A replication-offset-checkpoint that does not parse refuses the
	// start (the first log directory is taken offline, and it holds the
	// metadata log).
	const path = "replication-offset-checkpoint"
	n.Disk.Writeback()
	if err := n.Disk.FlipBit(path, 0, 6); err != nil { // the version, "0", becomes "p"
		t.Fatal(err)
	}
	n.damage = []damage{{kind: damageFile, path: path}}
	dropped := s.EventsDropped()
	c.restart(n)
	if deep.hits.repairs != 1 {
		t.Fatalf("test premise: the start did not fail on the damage (%d repairs)", deep.hits.repairs)
	}
	if n.Core == nil || len(failures) > 0 {
		t.Fatalf("the repaired broker did not start: %v", failures)
	}
	s.RunFor(2e9)
	if s.EventsDropped() == dropped {
		t.Fatal("nothing the failed start scheduled was dropped: its controller role is still running")
	}
	if len(failures) > 0 {
		t.Fatalf("after the restart: %v", failures)
	}
}
