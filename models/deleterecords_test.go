package models

import (
	"strings"
	"testing"
)

// startingAt is r with its log start at start and the batches wholly
// below it gone, as a replica restarted empty at the leader's log start
// holds them.
func startingAt(r ReplicaLog, start int64) ReplicaLog {
	r = fromOffset(r, start)
	r.LogStartOffset = start
	return r
}

func deleteTo(offset int64, completed bool) DeleteRecords {
	d := DeleteRecords{TP: tp0, Offset: offset, CallNs: 5, ReturnNs: 6, Completed: completed, LowWatermark: -1}
	if completed {
		d.LowWatermark = offset
	}
	return d
}

// TestFinalWithDeleteRecords: records below the log start are deleted, not
// lost, when some DeleteRecords asked for that far, and replicas are
// compared from the log start only; a log start no DeleteRecords explains,
// a follower behind the leader's, or a completed DeleteRecords undone is a
// violation.
func TestFinalWithDeleteRecords(t *testing.T) {
	produces := []Produce{ackedAll(0, 1, 2, 0, "a"), ackedAll(0, 3, 4, 1, "b"), ackedAll(0, 3, 4, 2, "c")}
	full := replica(1, "a", "b", "c")
	// What the replicas held in the segments they deleted.
	held := &HeldRecords{}
	for i, v := range []string{"a", "b", "c"} {
		held.Add(int64(i), v)
	}
	heldOpts := FinalOptions{Held: map[TopicPartition]*HeldRecords{tp0: held}}
	final := func(leaderStart int64, replicas ...ReplicaLog) map[TopicPartition]PartitionFinal {
		return map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 3, LogStartOffset: leaderStart, Replicas: replicas}}
	}
	// The leader still stores the batches below its log start; the
	// followers restarted empty at it.
	deleted := final(2, startingAt(full, 2), startingAt(replica(2, "a", "b", "c"), 2), startingAt(replica(3, "a", "b", "c"), 2))
	deleted[tp0].Replicas[0].Batches = full.Batches // stored, below the log start
	h := History{Produces: produces, DeleteRecords: []DeleteRecords{deleteTo(2, true)}}
	if vs := CheckFinal(h, deleted, FinalOptions{}); len(vs) != 0 {
		t.Fatalf("records deleted by a completed DeleteRecords flagged: %v", vs)
	}
	timedOut := History{Produces: produces, DeleteRecords: []DeleteRecords{deleteTo(2, false)}}
	if vs := CheckFinal(timedOut, deleted, FinalOptions{}); len(vs) != 0 {
		t.Fatalf("a DeleteRecords that timed out may still have moved the log start: %v", vs)
	}
	gone := final(2, startingAt(full, 2), startingAt(replica(2, "a", "b", "c"), 2), startingAt(replica(3, "a", "b", "c"), 2))
	if vs := CheckFinal(History{Produces: produces}, gone, FinalOptions{}); !checks(vs, "log-start") ||
		!checks(vs, "acked-present") {
		t.Fatalf("a log start no DeleteRecords asked for: %v", vs)
	}
	behind := final(2, startingAt(full, 2), startingAt(replica(2, "a", "b", "c"), 0), startingAt(replica(3, "a", "b", "c"), 2))
	if vs := CheckFinal(h, behind, FinalOptions{}); !checks(vs, "log-start") {
		t.Fatalf("a follower whose log start is behind the leader's: %v", vs)
	}
	ahead := final(1, startingAt(full, 1), startingAt(replica(2, "a", "b", "c"), 2), startingAt(replica(3, "a", "b", "c"), 1))
	if vs := CheckFinal(h, ahead, FinalOptions{LogStartMayRegress: map[TopicPartition]bool{tp0: true}, Held: heldOpts.Held}); len(vs) != 0 {
		t.Fatalf("a former leader ahead of the leader's log start, as far as a DeleteRecords asked: %v", vs)
	}
	if vs := CheckFinal(h, ahead, FinalOptions{}); !checks(vs, "log-start") {
		t.Fatalf("a completed DeleteRecords to 2 undone (the leader's log start is 1): %v", vs)
	}
	diverged := final(2, startingAt(full, 2), startingAt(replica(2, "a", "b", "x"), 2), startingAt(replica(3, "a", "b", "c"), 2))
	if vs := CheckFinal(h, diverged, FinalOptions{}); !checks(vs, "replicas-identical") {
		t.Fatalf("replicas differing above the log start passed: %v", vs)
	}
	empty := final(3, ReplicaLog{Node: 1, LogStartOffset: 3}, ReplicaLog{Node: 2, LogStartOffset: 3}, ReplicaLog{Node: 3, LogStartOffset: 3})
	h3 := History{Produces: produces, DeleteRecords: []DeleteRecords{deleteTo(3, true)}}
	if vs := CheckFinal(h3, empty, heldOpts); len(vs) != 0 {
		t.Fatalf("logs emptied up to the HW by DeleteRecords end at their log start: %v", vs)
	}
}

// TestFinalDeletedAcknowledgedRecords: an acknowledged record below the
// final log start must have been held at its offset by some replica up to
// its deletion: nothing below the log start is skipped.
func TestFinalDeletedAcknowledgedRecords(t *testing.T) {
	produces := []Produce{ackedAll(0, 1, 2, 0, "a"), ackedAll(0, 3, 4, 1, "b"), ackedAll(0, 3, 4, 2, "c")}
	empty := map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 3, LogStartOffset: 3,
		Replicas: []ReplicaLog{{Node: 1, LogStartOffset: 3}, {Node: 2, LogStartOffset: 3}}}}
	h := History{Produces: produces, DeleteRecords: []DeleteRecords{deleteTo(3, true)}}
	held := &HeldRecords{}
	held.Add(0, "a")
	held.Add(1, "x") // another replica's stale record at 1
	held.Add(1, "b")
	held.Add(2, "y") // only a record that was never acknowledged there
	vs := CheckFinal(h, empty, FinalOptions{Held: map[TopicPartition]*HeldRecords{tp0: held}})
	if len(vs) != 1 || vs[0].Check != "acked-present" || !vs[0].Loss || !strings.Contains(vs[0].Detail, "offset 2") {
		t.Fatalf("want one loss at offset 2 (c, never held there), got %v", vs)
	}
	if vs := CheckFinal(h, empty, FinalOptions{}); len(vs) != 3 {
		t.Fatalf("nothing held: want 3 losses, got %v", vs)
	}
}

func TestDeleteRecordsAnswers(t *testing.T) {
	ok := History{DeleteRecords: []DeleteRecords{deleteTo(2, true), deleteTo(5, false)}}
	if vs := CheckDeleteRecords(ok); len(vs) != 0 {
		t.Fatalf("valid answers flagged: %v", vs)
	}
	early := deleteTo(4, true)
	early.LowWatermark = 3
	if vs := CheckDeleteRecords(History{DeleteRecords: []DeleteRecords{early}}); !checks(vs, "delete-records") {
		t.Fatal("a DeleteRecords answered below the offset it asked for passed")
	}
}
