package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
)

// TestFollowerRestartsAtALogStartInsideABatch (KAFKA-6975): DeleteRecords
// may move the log start into the middle of a batch. A follower whose log
// ends below that log start (here: cut off before the batch was written)
// is answered OFFSET_OUT_OF_RANGE, restarts its log empty at the leader's
// log start (1), and fetches from there; the leader answers with the batch
// holding offset 1, which starts at 0. AppendAsFollower refuses it
// ("unexpected append offset: batch ... starts at offset 0, want 1") on
// every fetch: the follower never catches up nor rejoins the ISR. Kafka
// (Partition.appendRecordsToFollowerOrFutureReplica) restarts the empty
// log at the batch's base offset and appends; the log start offset then
// comes back up to the leader's with the same answer.
func TestFollowerRestartsAtALogStartInsideABatch(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("x")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.isolate(3)
	// A fetch of node 3's parked at the leader would be answered with the
	// batch below, and that answer delivered when the network heals: let
	// it expire first, so that node 3 is cut off before the batch exists.
	c.run(replicaFetchMaxWaitMs + 10)
	if r := c.produce(2, "r", 0, 1, recordBatch("a", "b", "c")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=1: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	// Offsets 1..3 are one batch; node 3 (cut off, soon fenced) has none.
	leader := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("the HW passes the batch (node 3 out of the ISR)", 20000, func() bool { return leader.replica.HighWatermark() == 4 })
	if r := c.deleteRecords(2, "r", 2, 20000); r.ErrorCode != 0 || r.LowWatermark != 2 {
		t.Fatalf("DeleteRecords to 2: error %v low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	c.net.Heal()
	follower := c.nodes[3].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("the follower catches up past the batch", 30000, func() bool { return follower.log.LogEndOffset() == 4 })
	if got := follower.log.LogStartOffset(); got != 2 {
		t.Errorf("the follower's log start is %d, the leader's 2", got)
	}
}

// TestFollowerTakesALeaderBatchStraddlingItsEnd: a follower whose log ends
// inside one of the leader's batches (its own batch boundary is not the
// leader's: a divergence reported at a log start that DeleteRecords put
// inside the leader's batch) is answered with
// that whole batch, which starts below its end. It truncates to where the
// batch starts and takes it, instead of refusing it on every fetch.
func TestFollowerTakesALeaderBatchStraddlingItsEnd(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "s", 1, 1)
	c.produce(1, "s", 0, 1, recordBatch("a", "b")) // offsets 0-1
	c.produce(1, "s", 0, 1, recordBatch("c"))      // offset 2
	n := c.nodes[1].node
	p := n.parts.partitions[partitionKey{"s", 0}]
	leaders := batch.Build(batch.BuildSpec{BaseOffset: 2, PartitionLeaderEpoch: p.replica.LeaderEpoch(), FirstTimestamp: 1_767_225_600_000,
		Records: []batch.Record{{Value: []byte("C")}, {Value: []byte("D")}, {Value: []byte("E")}}}) // offsets 2-4
	if err := n.parts.fetchers.appendAsFollower(p, leaders); err != nil {
		t.Fatalf("appending the leader's batch 2-4 to a log ending at 3: %v", err)
	}
	res, err := p.log.Read(0, 1<<20, p.log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := copyRegions(res)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, raw); joined(got) != joined([]string{"a", "b", "C", "D", "E"}) {
		t.Fatalf("log holds %q, want a b C D E: the leader's batch replaces offset 2", got)
	}
}
