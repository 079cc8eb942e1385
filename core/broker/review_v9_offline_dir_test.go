package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// TestOfflineDirWritesNoCleanShutdownMarker: a log directory taken offline
// by a failed write of a file other than the HW and log-start-offset
// checkpoints (here the sync of its parent at open) must not let a
// controlled shutdown write the clean-shutdown marker: its logs are not
// flushed at shutdown (they failed), so the marker's "every log is
// durable" would be false, and SPEC §3.5 says an offline directory's
// clean shutdown writes no marker. Before the fix the directory's other
// checkpoint writers were still healthy, went on writing the offline
// directory every interval, and Close succeeded with the marker written.
func TestOfflineDirWritesNoCleanShutdownMarker(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	n := c.nodes[2]
	c.restartWithFailedOpenSync(n)
	c.run(2 * hwCheckpointIntervalMs)
	if err := n.node.parts.managers[0].Err(); err == nil {
		t.Fatal("test premise: the failed sync at open did not take the directory offline")
	}
	if b, _ := c.nodes[1].node.Image().Broker(2); !b.Fenced {
		t.Fatal("broker 2 with an offline log directory is not fenced")
	}

	stopped := false
	n.node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown of the broker with an offline directory", 20000, func() bool { return stopped })
	var closeErr error
	closed := false
	n.node.Close(func(err error) { closeErr, closed = err, true })
	c.waitFor("closed", 5000, func() bool { return closed })
	f, err := n.disk.Open(cleanShutdownFile, env.OpenOptions{})
	if err == nil {
		_ = f.Close()
		t.Fatalf("the clean-shutdown marker was written though the log directory is offline (Close: %v)", closeErr)
	}
	if !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("open %s: %v", cleanShutdownFile, err)
	}
	if closeErr == nil {
		t.Fatal("Close of a broker with an offline log directory reported no error")
	}
}

// TestFailedLogWritesNoCleanShutdownMarker: a broker one of whose logs
// failed (here a Sync of its segment: the records on it may not be
// durable, and the log never syncs again) must not write the
// clean-shutdown marker at a controlled shutdown. Close flushes every log
// before the marker ("every log is durable"); a failed log cannot be
// flushed, and Kafka, whose LogDirFailureChannel takes the log's whole
// directory offline on its IOException, writes no marker in an offline
// directory and reads none at start (LogManager
// .readBrokerEpochFromCleanShutdownFiles: any offline directory, no
// broker epoch). Before, Close skipped the failed log's flush and wrote
// the marker: the restarted broker registered as clean and kept its ELR
// eligibility with a log whose tail was never synced.
func TestFailedLogWritesNoCleanShutdownMarker(t *testing.T) {
	c := threeNodes(t)
	for range 3 {
		if r := c.produce(2, "r", 0, -1, recordBatch("unsynced")); r.ErrorCode != 0 {
			t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	n := c.nodes[3]
	p := n.node.parts.partitions[partitionKey{"r", 0}]
	if p == nil || p.log.LogEndOffset() != 3 || p.log.RecoveryPoint() != 0 {
		t.Fatalf("test premise: node 3's r-0 holds 3 unsynced records")
	}
	if err := n.disk.FailNextSync(p.log.Dir() + "/00000000000000000000.log"); err != nil {
		t.Fatal(err)
	}
	flushed := false
	p.log.Flush(p.log.LogEndOffset(), func(error) { flushed = true }) // as log.flush.interval.ms would
	c.waitFor("the failed flush", 1000, func() bool { return flushed })
	if p.log.Err() == nil {
		t.Fatal("test premise: the failed Sync did not fail the log")
	}

	stopped := false
	n.node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown of the broker with a failed log", 20000, func() bool { return stopped })
	var closeErr error
	closed := false
	n.node.Close(func(err error) { closeErr, closed = err, true })
	c.waitFor("closed", 5000, func() bool { return closed })
	if f, err := n.disk.Open(cleanShutdownFile, env.OpenOptions{}); err == nil {
		_ = f.Close()
		t.Fatalf("the clean-shutdown marker was written though r-0's log failed unsynced (Close: %v)", closeErr)
	}
	if closeErr == nil {
		t.Fatal("Close of a broker with a failed log reported no error")
	}
}

// TestOfflineEmptyDirFencesTheBroker: a log directory that goes offline
// while it holds no log (here a new broker's directory, whose sync at
// open fails) refuses every new log, so the broker cannot host any
// partition: it must ask to be fenced like one with failed logs, and the
// controller then places no replica, and no leadership, on it. Before,
// the broker asked to be fenced only when a hosted log had failed: it
// stayed unfenced, took its share of a new topic's partitions and led
// some of them, and those partitions could not be produced to.
func TestOfflineEmptyDirFencesTheBroker(t *testing.T) {
	c := newCluster(t, 4, map[string]string{"default.replication.factor": "1"})
	c.waitRegistered()
	n := c.nodes[4]
	c.restartWithFailedOpenSync(n)
	c.run(3000)
	if n.node.parts.managers[0].Err() == nil {
		t.Fatal("test premise: the failed sync at open did not take the directory offline")
	}
	if len(n.node.parts.managers[0].Partitions()) != 0 {
		t.Fatal("test premise: the offline directory holds logs")
	}
	if b, ok := c.nodes[1].node.controllerRole.ctrl.Image().Broker(4); !ok || !b.Fenced {
		t.Fatal("broker 4, whose only log directory is offline, is not fenced")
	}

	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fresh", 8, 1
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create fresh: %v", kerr.ErrorForCode(code))
	}
	c.run(3000)
	for p := range int32(8) {
		leader := c.leaderOf("fresh", p)
		if leader < 0 {
			t.Fatalf("fresh-%d has no leader", p)
		}
		if r := c.produce(leader, "fresh", p, -1, recordBatch("x")); r.ErrorCode != 0 {
			t.Errorf("produce to fresh-%d on its leader %d: %v", p, leader, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// restartWithFailedOpenSync crashes and restarts n with the first sync of
// its disk's root failing: that sync is the Manager's (OpenManager syncs
// the parent of its directory), so the directory starts offline. It
// returns once n has registered.
func (c *cluster) restartWithFailedOpenSync(n *testNode) {
	c.t.Helper()
	n.proc.Crash()
	n.proc.Restart()
	if err := n.disk.FailNextSync("."); err != nil {
		c.t.Fatal(err)
	}
	c.start(n)
	c.waitFor("the restarted broker registers", 20000, func() bool { return n.node.meta.brokerEpoch >= 0 })
}
