package models

import (
	"strings"
	"testing"
)

// TestIdempotenceReadsFromTheLogStart: simulator seed 6290 (shape groups)
// as the first replica's files held t1-0. That replica, leader of epoch 0,
// appended producer 0's batch at 10..12, lost its disk before replicating
// it, and came back as a follower; the new leader had written other
// batches from 10 on, taken the producer's retry at 30..32, and deleted
// records below 13, so it answered epoch 0 as ending at its log start, 13,
// and the follower kept its own 10..12 below the log start. Those batches
// are not in the log: no duplicate. The same batch above the log start is
// one.
func TestIdempotenceReadsFromTheLogStart(t *testing.T) {
	sends := []IdempotentSend{
		{TP: tpA, ProducerID: 0, ProducerEpoch: 0, BaseSequence: 7, Values: []string{"p3-25", "p3-26", "p3-27"}},
	}
	replica := func(logStart int64) map[TopicPartition]PartitionFinal {
		return map[TopicPartition]PartitionFinal{tpA: {Leader: 1, HighWatermark: 33, LogStartOffset: 13, Replicas: []ReplicaLog{{
			Node:           3,
			LogStartOffset: logStart,
			Batches: []Batch{
				idempotentBatch(10, 0, 0, 7, "p3-25", "p3-26", "p3-27"),
				idempotentBatch(13, -1, -1, -1, "p9-0"),
				idempotentBatch(30, 0, 0, 7, "p3-25", "p3-26", "p3-27"),
			},
		}}}}
	}
	if vs := CheckIdempotence(sends, replica(13)); len(vs) != 0 {
		t.Fatalf("a batch stored below the log start counted: %v", vs)
	}
	vs := CheckIdempotence(sends, replica(10))
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, `"p3-25" at offsets 10 and 30`) {
		t.Fatalf("a duplicate from the log start on: violations %v, want p3-25 at 10 and 30", vs)
	}
	// A batch straddling the log start: its records below it are not in
	// the log, those from it on are (sequences 8 and 9), so the batch at
	// 30 comes after them.
	vs = CheckIdempotence(sends, replica(11))
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, `"p3-25" at offset 30: producer 0 epoch 0 sequence 7 after sequence 9`) {
		t.Fatalf("records of a batch straddling the log start: violations %v, want p3-25 at 30 after sequence 9", vs)
	}
}
