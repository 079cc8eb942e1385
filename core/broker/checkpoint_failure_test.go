package broker

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFailedCheckpointWriteTakesTheLogDirOffline: with nothing produced, a
// full disk fails only the periodic checkpoint writes. As in Kafka (an
// IOException in a log directory takes it offline), the directory goes
// offline: its logs answer KAFKA_STORAGE_ERROR, the broker is fenced and
// leadership moves, and it stays so when the disk has room again, until the
// broker restarts. Unnoticed, the failure would leave the checkpoints
// (the log start offsets among them) never written again.
func TestFailedCheckpointWriteTakesTheLogDirOffline(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	n := c.nodes[2]
	const offline = "storage failure: the log directory is offline until the broker restarts; requests on its partitions get KAFKA_STORAGE_ERROR"
	if got := n.logs.matching(slog.LevelError, offline, nil); len(got) != 0 {
		t.Fatalf("directory offline before any fault: %v", got)
	}
	n.disk.SetFull(true)
	c.run(2 * hwCheckpointIntervalMs)
	n.disk.SetFull(false)
	lines := n.logs.matching(slog.LevelError, offline, map[string]string{"log_dir": "/data/node2"})
	if len(lines) != 1 || !strings.Contains(lines[0].attrs["err"], "checkpoint") {
		t.Fatalf("directory offline logged %d times (want once, naming the checkpoint); log:\n%s", len(lines), n.logs)
	}
	c.waitFor("leadership moves", 10000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	c.run(2 * hwCheckpointIntervalMs) // room again: still offline
	if f := c.fetch(2, "r", 0, 0); f.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from the offline directory: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(f.ErrorCode))
	}
	if b, _ := c.nodes[1].node.Image().Broker(2); !b.Fenced {
		t.Fatalf("broker 2 with an offline log directory is not fenced")
	}

	n.proc.Crash()
	n.proc.Restart()
	c.start(n)
	c.waitFor("the restarted broker rejoins the ISR", 20000, func() bool {
		s, _ := c.nodes[1].node.Image().PartitionByName("r", 0)
		return len(s.ISR) == 3
	})
	if got := joined(values(t, c.fetch(c.leaderOf("r", 0), "r", 0, 0).RecordBatches)); got != "kept" {
		t.Fatalf("after the restart the leader serves %q, want kept", got)
	}
}
