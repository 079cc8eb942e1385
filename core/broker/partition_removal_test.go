package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDeletedTopicAnswersWaitingAcksAtOnce: an acks=all produce waiting
// for the HW on a partition whose topic is deleted is answered
// UNKNOWN_TOPIC_OR_PARTITION at once, as Kafka's stopPartitions completes
// the delayed produces of a partition it stops hosting (DelayedProduce
// then finds no partition: getPartitionOrError), not at its 30 s timeout.
// A fetch parked on the partition is answered at once too. It is never
// answered success: its record was not committed.
func TestDeletedTopicAnswersWaitingAcksAtOnce(t *testing.T) {
	c := threeNodes(t)
	c.nodes[3].proc.Pause() // node 3 holds r-0's HW back; the controller (node 1) runs
	req := produceReq("r", 0, -1, recordBatch("never committed"))
	req.TimeoutMillis = 30000
	produce := c.sendAlone(2, req)
	fetch := c.sendAlone(2, fetchReq("r", 0, 0, 30000))
	c.run(200)
	if produce.done || fetch.done {
		t.Fatalf("test premise: acks=all (answered %v) waits for node 3, in the ISR, and the fetch at the HW (answered %v) too",
			produce.done, fetch.done)
	}
	c.deleteTopic(1, "r")
	c.waitFor("node 2 retires r-0", 2000, func() bool { return c.nodes[2].node.parts.partitions[partitionKey{"r", 0}] == nil })
	retiredAtMs := c.s.NowNs() / 1e6
	c.run(20)
	if !produce.done || !fetch.done {
		t.Fatalf("20 ms after node 2 retired r-0: acks=all answered %v, fetch answered %v; want both answered at once",
			produce.done, fetch.done)
	}
	if code := fetchCode(t, fetch); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("fetch answered %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if code := produceCode(t, produce); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("acks=all answered %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if produce.atMs-retiredAtMs > 10 {
		t.Errorf("answered %d ms after node 2 retired r-0, want at once", produce.atMs-retiredAtMs)
	}
}
