package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDeletedTopicAnswersWaitingAcksAtOnce: an acks=all produce waiting
// for the HW on a partition whose topic is deleted is answered
// UNKNOWN_TOPIC_OR_PARTITION at once, as Kafka's stopPartitions completes
// the delayed produces of a partition it stops hosting (DelayedProduce
// then finds no partition: getPartitionOrError). Before, it waited for its
// 30 s timeout. It is never answered success: its record was not committed.
func TestDeletedTopicAnswersWaitingAcksAtOnce(t *testing.T) {
	c := threeNodes(t)
	c.nodes[3].proc.Pause() // node 3 holds r-0's HW back; the controller (node 1) runs
	req := produceReq("r", 0, -1, recordBatch("never committed"))
	req.TimeoutMillis = 30000
	produce := c.sendAlone(2, req)
	c.run(200)
	if produce.done {
		t.Fatalf("test premise: acks=all waits for node 3, in the ISR; answered %+v", produce.resp)
	}
	c.deleteTopic(1, "r")
	c.waitFor("node 2 retires r-0", 2000, func() bool { return c.nodes[2].node.partitions[partitionKey{"r", 0}] == nil })
	retiredAtMs := c.s.NowNs() / 1e6
	c.run(20)
	if !produce.done {
		t.Fatalf("20 ms after node 2 retired r-0 the acks=all produce still waits; want it answered at once")
	}
	if code := produceCode(t, produce); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("acks=all answered %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if produce.atMs-retiredAtMs > 10 {
		t.Errorf("answered %d ms after node 2 retired r-0, want at once", produce.atMs-retiredAtMs)
	}
}
