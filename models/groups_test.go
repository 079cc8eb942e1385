package models

import (
	"encoding/binary"
	"strings"
	"testing"
)

var tpA, tpB = TopicPartition{Topic: "t0", Partition: 0}, TopicPartition{Topic: "t0", Partition: 1}

func TestCheckAssignmentsFindsAPartitionGivenTwiceInOneGeneration(t *testing.T) {
	h := GroupHistory{Assignments: []Assignment{
		{Group: "g", Member: "m1", Generation: 3, Partitions: []TopicPartition{tpA}, AtNs: 10},
		{Group: "g", Member: "m2", Generation: 3, Partitions: []TopicPartition{tpB}, AtNs: 11},
		// The next generation moves tpA to m2: fine.
		{Group: "g", Member: "m2", Generation: 4, Partitions: []TopicPartition{tpA}, AtNs: 20},
		// Another group may own the same partition in the same generation.
		{Group: "h", Member: "m9", Generation: 3, Partitions: []TopicPartition{tpA}, AtNs: 12},
	}}
	if vs := CheckAssignments(h); len(vs) != 0 {
		t.Fatalf("a correct history is rejected: %v", vs)
	}
	// A static member restarted under a new member id keeps its
	// assignment in the same generation (KIP-345).
	static := GroupHistory{Assignments: []Assignment{
		{Group: "g", Member: "m1", Instance: "i1", Generation: 3, Partitions: []TopicPartition{tpA}, AtNs: 10},
		{Group: "g", Member: "m1b", Instance: "i1", Generation: 3, Partitions: []TopicPartition{tpA}, AtNs: 20},
	}}
	if vs := CheckAssignments(static); len(vs) != 0 {
		t.Fatalf("a static member's replacement is rejected: %v", vs)
	}
	h.Assignments = append(h.Assignments, Assignment{Group: "g", Member: "m3", Generation: 3, Partitions: []TopicPartition{tpA}, AtNs: 30})
	vs := CheckAssignments(h)
	if len(vs) != 1 || vs[0].Check != "group-assignment" || !strings.Contains(vs[0].Detail, "m1") || !strings.Contains(vs[0].Detail, "m3") {
		t.Fatalf("double assignment: got %v", vs)
	}
}

func TestCheckCommitGenerations(t *testing.T) {
	base := GroupHistory{Assignments: []Assignment{
		{Group: "g", Member: "m1", Generation: 1, Partitions: []TopicPartition{tpA}, AtNs: 10},
		{Group: "g", Member: "m2", Generation: 2, Partitions: []TopicPartition{tpA}, AtNs: 100},
	}}
	ok := base
	ok.Commits = []OffsetCommit{
		{Group: "g", Member: "m1", Generation: 1, TP: tpA, Offset: 5, CallNs: 50, ReturnNs: 60, Outcome: CommitAccepted},
		// Rejected stale commits say nothing.
		{Group: "g", Member: "m1", Generation: 1, TP: tpA, Offset: 6, CallNs: 150, ReturnNs: 160, Outcome: CommitRejected},
		{Group: "g", Member: "m2", Generation: 2, TP: tpA, Offset: 7, CallNs: 150, ReturnNs: 160, Outcome: CommitAccepted},
	}
	if vs := CheckCommitGenerations(ok); len(vs) != 0 {
		t.Fatalf("a correct history is rejected: %v", vs)
	}
	stale := base
	stale.Commits = []OffsetCommit{{Group: "g", Member: "m1", Generation: 1, TP: tpA, Offset: 6, CallNs: 150, ReturnNs: 160, Outcome: CommitAccepted}}
	if vs := CheckCommitGenerations(stale); len(vs) != 1 || !strings.Contains(vs[0].Detail, "generation 2 assignment") {
		t.Fatalf("an accepted stale-generation commit: got %v", vs)
	}
	unassigned := base
	unassigned.Commits = []OffsetCommit{{Group: "g", Member: "m1", Generation: 1, TP: tpB, Offset: 6, CallNs: 50, ReturnNs: 60, Outcome: CommitAccepted}}
	if vs := CheckCommitGenerations(unassigned); len(vs) != 1 || !strings.Contains(vs[0].Detail, "without being assigned") {
		t.Fatalf("a commit of a partition not assigned: got %v", vs)
	}
}

func TestCheckOffsets(t *testing.T) {
	commit := func(offset, call, ret int64, o CommitOutcome) OffsetCommit {
		return OffsetCommit{Group: "g", TP: tpA, Offset: offset, CallNs: call, ReturnNs: ret, Outcome: o}
	}
	fetch := func(offset, call, ret int64) OffsetFetch {
		return OffsetFetch{Group: "g", TP: tpA, Offset: offset, CallNs: call, ReturnNs: ret}
	}
	cases := []struct {
		name  string
		h     GroupHistory
		valid bool
	}{
		{"nothing committed reads -1", GroupHistory{Fetches: []OffsetFetch{fetch(-1, 0, 1)}}, true},
		{"a commit then a read", GroupHistory{Commits: []OffsetCommit{commit(5, 0, 10, CommitAccepted)},
			Fetches: []OffsetFetch{fetch(5, 20, 30)}}, true},
		{"an accepted commit lost", GroupHistory{Commits: []OffsetCommit{commit(5, 0, 10, CommitAccepted)},
			Fetches: []OffsetFetch{fetch(-1, 20, 30)}}, false},
		{"an older commit comes back", GroupHistory{Commits: []OffsetCommit{commit(5, 0, 10, CommitAccepted), commit(8, 11, 15, CommitAccepted)},
			Fetches: []OffsetFetch{fetch(5, 20, 30)}}, false},
		{"a concurrent commit may be seen or not", GroupHistory{Commits: []OffsetCommit{commit(5, 0, 10, CommitAccepted), commit(8, 11, 40, CommitAccepted)},
			Fetches: []OffsetFetch{fetch(5, 20, 30), fetch(8, 31, 35)}}, true},
		{"a rejected commit has no effect", GroupHistory{Commits: []OffsetCommit{commit(5, 0, 10, CommitRejected)},
			Fetches: []OffsetFetch{fetch(5, 20, 30)}}, false},
		{"an unknown commit may land late", GroupHistory{Commits: []OffsetCommit{commit(3, 0, 10, CommitAccepted), commit(5, 1, NeverReturnedNs, CommitUnknown)},
			Fetches: []OffsetFetch{fetch(3, 20, 30), fetch(5, 40, 50)}}, true},
		{"an unknown commit not read is dropped", GroupHistory{Commits: []OffsetCommit{commit(3, 0, 10, CommitAccepted), commit(5, 1, NeverReturnedNs, CommitUnknown)},
			Fetches: []OffsetFetch{fetch(3, 20, 30)}}, true},
		{"a read of a value nobody committed", GroupHistory{Fetches: []OffsetFetch{fetch(4, 0, 1)}}, false},
	}
	for _, c := range cases {
		vs := CheckOffsets(c.h, OffsetOptions{})
		if (len(vs) == 0) != c.valid {
			t.Errorf("%s: valid=%v, got %v", c.name, c.valid, vs)
		}
	}
}

// idempotentBatch is a replica's batch of values from producer pid/epoch
// starting at sequence seq: only the header fields CheckIdempotence reads
// are set.
func idempotentBatch(base int64, pid int64, epoch int16, seq int32, values ...string) Batch {
	b := make([]byte, batchHeaderBytes)
	binary.BigEndian.PutUint64(b[batchProducerIDAt:], uint64(pid))
	binary.BigEndian.PutUint16(b[batchProducerEpochAt:], uint16(epoch))
	binary.BigEndian.PutUint32(b[batchBaseSequenceAt:], uint32(seq))
	out := Batch{BaseOffset: base, LastOffset: base + int64(len(values)) - 1, Bytes: b}
	for i, v := range values {
		out.Records = append(out.Records, Record{Offset: base + int64(i), Value: v})
	}
	return out
}

func TestCheckIdempotence(t *testing.T) {
	sends := []IdempotentSend{
		{TP: tpA, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, Values: []string{"p1-0", "p1-1"}},
		{TP: tpA, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 2, Values: []string{"p1-2"}},
	}
	final := func(batches ...Batch) map[TopicPartition]PartitionFinal {
		return map[TopicPartition]PartitionFinal{tpA: {Replicas: []ReplicaLog{{Node: 1, Batches: batches}}}}
	}
	plain := idempotentBatch(0, -1, -1, -1, "p9-0") // a plain producer's batch is ignored
	good := final(plain, idempotentBatch(1, 7, 0, 0, "p1-0", "p1-1"), idempotentBatch(3, 7, 0, 2, "p1-2"))
	if vs := CheckIdempotence(sends, good); len(vs) != 0 {
		t.Fatalf("a correct log is rejected: %v", vs)
	}
	// A gap (a batch given up, or refused before a later one landed) is
	// allowed.
	if vs := CheckIdempotence(sends, final(idempotentBatch(0, 7, 0, 2, "p1-2"))); len(vs) != 0 {
		t.Fatalf("a log with a gap is rejected: %v", vs)
	}
	cases := map[string]map[TopicPartition]PartitionFinal{
		"duplicate": final(idempotentBatch(0, 7, 0, 0, "p1-0", "p1-1"), idempotentBatch(2, 7, 0, 0, "p1-0", "p1-1")),
		"reordered": final(idempotentBatch(0, 7, 0, 2, "p1-2"), idempotentBatch(1, 7, 0, 0, "p1-0", "p1-1")),
		"relabeled": final(idempotentBatch(0, 8, 0, 0, "p1-0", "p1-1")),
	}
	for name, f := range cases {
		if vs := CheckIdempotence(sends, f); len(vs) == 0 || vs[0].Check != "idempotence" {
			t.Errorf("%s: not caught (%v)", name, vs)
		}
	}
}

func TestCheckTopicChurn(t *testing.T) {
	id := func(b byte) [16]byte { return [16]byte{b} }
	op := func(kind AdminKind, at int64, code int16, topicID [16]byte) AdminOp {
		return AdminOp{Kind: kind, Topic: "c0", CallNs: at, ReturnNs: at + 1, ErrorCode: code, TopicID: topicID}
	}
	const exists, unknownTopic, notController = 36, 3, 41
	good := []AdminOp{
		op(AdminCreateTopic, 0, 0, id(1)),
		op(AdminCreatePartitions, 10, 0, [16]byte{}),
		op(AdminDeleteTopic, 20, 0, [16]byte{}),
		op(AdminCreateTopic, 30, 0, id(2)),
		// An ambiguous deletion may or may not have happened.
		op(AdminDeleteTopic, 40, notController, [16]byte{}),
		op(AdminCreateTopic, 50, 0, id(3)),
		op(AdminCreateTopic, 60, exists, [16]byte{}),
	}
	if vs := CheckTopicChurn(good); len(vs) != 0 {
		t.Fatalf("a correct history is rejected: %v", vs)
	}
	cases := map[string][]AdminOp{
		"topic id reused":         {op(AdminCreateTopic, 0, 0, id(1)), op(AdminDeleteTopic, 10, 0, [16]byte{}), op(AdminCreateTopic, 20, 0, id(1))},
		"created twice":           {op(AdminCreateTopic, 0, 0, id(1)), op(AdminCreateTopic, 10, 0, id(2))},
		"exists after deletion":   {op(AdminDeleteTopic, 0, 0, [16]byte{}), op(AdminCreateTopic, 10, exists, [16]byte{})},
		"deleted twice":           {op(AdminCreateTopic, 0, 0, id(1)), op(AdminDeleteTopic, 10, 0, [16]byte{}), op(AdminDeleteTopic, 20, 0, [16]byte{})},
		"unknown while it exists": {op(AdminCreateTopic, 0, 0, id(1)), op(AdminDeleteTopic, 10, unknownTopic, [16]byte{})},
	}
	for name, ops := range cases {
		if vs := CheckTopicChurn(ops); len(vs) != 1 || vs[0].Check != "topic-churn" {
			t.Errorf("%s: got %v", name, vs)
		}
	}
}
