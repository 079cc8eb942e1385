package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/log"
	"strand/core/log/checkpoint"
	"strand/sim/memdisk"
)

// TestCleanShutdownCheckpointsRecoveryPoints: a clean shutdown writes
// recovery-point-offset-checkpoint after its final flush, as Kafka's
// LogManager.shutdown does, so the restart trusts every batch it holds
// (SPEC.md §3.4). Before, Close flushed every log but left the checkpoint
// as the periodic write found it, 0 for a log that never rolled, and
// every restart verified every active segment whole (1.25 GB in the
// hardening issue's run).
func TestCleanShutdownCheckpointsRecoveryPoints(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 2, 1)
	tn := c.nodes[1]
	c.waitFor("a periodic recovery-point checkpoint of t", 2*hwCheckpointIntervalMs, func() bool {
		_, ok := checkpointedRecoveryPoints(t, tn)[log.TopicPartition{Topic: "t", Partition: 1}]
		return ok
	})
	for p := range int32(2) {
		for range 3 + p {
			if r := c.produce(1, "t", p, 1, recordBatch("a", "b")); r.ErrorCode != 0 {
				t.Fatalf("produce to t-%d: %v", p, kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	c.run(2 * hwCheckpointIntervalMs)
	want := map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: 6, {Topic: "t", Partition: 1}: 8}
	for tp := range want {
		if rp := checkpointedRecoveryPoints(t, tn)[tp]; rp != 0 {
			t.Fatalf("test premise: the periodic checkpoint holds recovery point %d for %v; the log must not have been flushed", rp, tp)
		}
	}

	c.shutdownCleanly(tn)
	got := checkpointedRecoveryPoints(t, tn)
	for tp, leo := range want {
		if got[tp] != leo {
			t.Errorf("recovery-point-offset-checkpoint after a clean shutdown holds %d for %v, want its log end offset %d", got[tp], tp, leo)
		}
	}

	tn.proc.Crash()
	tn.disk.Crash(c.streams.Get("disk"), memdisk.CrashLoseAll) // a clean shutdown made everything durable
	tn.proc.Restart()
	c.start(tn)
	c.waitRegistered()
	for tp, leo := range want {
		p := tn.node.parts.partitions[partitionKey{tp.Topic, tp.Partition}]
		if p == nil {
			t.Fatalf("%v is not hosted after the restart", tp)
		}
		if p.log.LogEndOffset() != leo || p.log.RecoveryPoint() != leo {
			t.Errorf("%v after a clean restart: LEO %d, recovery point %d; want both %d", tp, p.log.LogEndOffset(), p.log.RecoveryPoint(), leo)
		}
	}
}

// checkpointedRecoveryPoints reads tn's recovery-point-offset-checkpoint.
func checkpointedRecoveryPoints(t *testing.T, tn *testNode) map[log.TopicPartition]int64 {
	t.Helper()
	data, err := tn.disk.ReadFile(log.RecoveryPointCheckpointName) // the node's disk is its log directory
	if err != nil {
		return nil // not written yet
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		t.Fatalf("node %d's recovery-point-offset-checkpoint: %v", tn.id, err)
	}
	rps := map[log.TopicPartition]int64{}
	for _, e := range entries {
		rps[log.TopicPartition{Topic: e.Topic, Partition: e.Partition}] = e.Offset
	}
	return rps
}
