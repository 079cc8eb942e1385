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
// (SPEC.md §3.4). Were Close to flush every log but leave the checkpoint
// as the periodic write found it, 0 for a log that never rolled, every
// restart would verify every active segment whole.
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

// TestCleanRestartKeepsTheLogStartOffset: a DeleteRecords that completed
// must survive a clean shutdown. Were Close to flush the logs and write the
// clean-shutdown marker but not log-start-offset-checkpoint (written
// otherwise only every replica.high.watermark.checkpoint.interval.ms), a
// node restarted cleanly soon after a DeleteRecords would come back with
// its old log start, and, elected from the ELR, serve the deleted records
// again.
func TestCleanRestartKeepsTheLogStartOffset(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a", "b", "c"))
	if r := c.deleteRecords(1, "t", 2, 5000); r.ErrorCode != 0 || r.LowWatermark != 2 {
		t.Fatalf("delete to 2: error %v low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	tn := c.nodes[1]
	c.shutdownCleanly(tn)
	tn.proc.Crash()
	tn.disk.Crash(c.streams.Get("disk"), memdisk.CrashLoseAll) // a clean shutdown made everything durable
	tn.proc.Restart()
	c.start(tn)
	c.waitRegistered()
	p := tn.node.parts.partitions[partitionKey{"t", 0}]
	if p == nil {
		t.Fatal("the partition is not hosted after the restart")
	}
	if got := p.log.LogStartOffset(); got != 2 {
		t.Fatalf("log start after a clean restart: %d, want 2 (the completed DeleteRecords)", got)
	}
}

// TestCleanRestartKeepsTheHighWatermark: a clean shutdown writes
// replication-offset-checkpoint, as Kafka's ReplicaManager.shutdown does,
// so a node restarted cleanly starts from the high watermark it stopped at
// rather than from the periodic checkpoint's, which may be seconds older
// (here it predates every record).
func TestCleanRestartKeepsTheHighWatermark(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	tn := c.nodes[1]
	tp := log.TopicPartition{Topic: "t", Partition: 0}
	c.waitFor("a periodic HW checkpoint of t-0", 2*hwCheckpointIntervalMs, func() bool {
		_, ok := checkpointedHighWatermarks(t, tn)[tp]
		return ok
	})
	if r := c.produce(1, "t", 0, 1, recordBatch("a", "b", "c")); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if hw := checkpointedHighWatermarks(t, tn)[tp]; hw != 0 {
		t.Fatalf("the periodic checkpoint already holds HW %d; the test needs one older than the produce", hw)
	}
	c.shutdownCleanly(tn)
	if hw := checkpointedHighWatermarks(t, tn)[tp]; hw != 3 {
		t.Fatalf("replication-offset-checkpoint after a clean shutdown holds HW %d for t-0, want 3", hw)
	}
}

// checkpointedHighWatermarks reads tn's replication-offset-checkpoint.
func checkpointedHighWatermarks(t *testing.T, tn *testNode) map[log.TopicPartition]int64 {
	t.Helper()
	data, err := tn.disk.ReadFile(log.ReplicationCheckpointName) // the node's disk is its log directory
	if err != nil {
		return nil // not written yet
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		t.Fatalf("node %d's replication-offset-checkpoint: %v", tn.id, err)
	}
	hws := map[log.TopicPartition]int64{}
	for _, e := range entries {
		hws[log.TopicPartition{Topic: e.Topic, Partition: e.Partition}] = e.Offset
	}
	return hws
}
