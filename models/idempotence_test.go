package models

import (
	"strings"
	"testing"
)

// TestIdempotenceReadsTheLeadersLog: a simulated run's partition t1-0.
// Node 3, leader of epoch 0, appended producer 0's batch at 10..12,
// lost its disk before replicating it, and came back as a follower. Node
// 1 had led epoch 1 from 10 with other batches, taken the producer's
// retry at 30..32, and deleted records below 13, so it answered epoch 0 as
// ending at its log start, 13, and node 3 kept its own 10..12 below the
// log start, still stored. Node 3 is the first replica; the leader's log
// holds no duplicate. The same batch in the leader's log is one, below its
// log start or not.
func TestIdempotenceReadsTheLeadersLog(t *testing.T) {
	sends := []IdempotentSend{
		{TP: tpA, ProducerID: 0, ProducerEpoch: 0, BaseSequence: 7, Values: []string{"p3-25", "p3-26", "p3-27"}},
		{TP: tpA, ProducerID: 1000, ProducerEpoch: 0, BaseSequence: 3, Values: []string{"p2-53", "p2-54", "p2-55"}},
	}
	retry := idempotentBatch(30, 0, 0, 7, "p3-25", "p3-26", "p3-27")
	follower := ReplicaLog{Node: 3, LogStartOffset: 13, Batches: []Batch{
		idempotentBatch(10, 0, 0, 7, "p3-25", "p3-26", "p3-27"),
		idempotentBatch(13, -1, -1, -1, "p9-0"),
		retry,
	}}
	final := func(leaderBatchAt10 Batch) map[TopicPartition]PartitionFinal {
		leader := ReplicaLog{Node: 1, LogStartOffset: 13, Batches: []Batch{
			leaderBatchAt10,
			idempotentBatch(13, -1, -1, -1, "p9-0"),
			retry,
		}}
		return map[TopicPartition]PartitionFinal{tpA: {Leader: 1, HighWatermark: 33, LogStartOffset: 13,
			Replicas: []ReplicaLog{follower, leader}}}
	}
	if vs := CheckIdempotence(sends, final(idempotentBatch(10, 1000, 0, 3, "p2-53", "p2-54", "p2-55"))); len(vs) != 0 {
		t.Fatalf("a follower's batch below the log start, which the leader never had, counted: %v", vs)
	}
	vs := CheckIdempotence(sends, final(idempotentBatch(10, 0, 0, 7, "p3-25", "p3-26", "p3-27")))
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, `"p3-25" at offsets 10 and 30`) {
		t.Fatalf("a duplicate in the leader's log below its log start: violations %v, want p3-25 at 10 and 30", vs)
	}
}
