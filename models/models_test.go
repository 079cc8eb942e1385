package models

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var tp0 = TopicPartition{Topic: "t", Partition: 0}

func ackedAll(client int, callNs, returnNs, base int64, values ...string) Produce {
	return Produce{Client: client, TP: tp0, Acks: -1, Values: values, CallNs: callNs, ReturnNs: returnNs, Acked: true, BaseOffset: base}
}

func fetch(client int, callNs, returnNs, from, hw int64, values ...string) Fetch {
	f := Fetch{Client: client, TP: tp0, FetchOffset: from, CallNs: callNs, ReturnNs: returnNs, HighWatermark: hw}
	for i, v := range values {
		f.Records = append(f.Records, Record{Offset: from + int64(i), Value: v})
	}
	return f
}

func checks(vs []Violation, check string) bool {
	for _, v := range vs {
		if v.Check == check {
			return true
		}
	}
	return false
}

func TestRegistersAcceptALinearizableHistory(t *testing.T) {
	h := History{
		Produces: []Produce{
			ackedAll(0, 10, 20, 0, "a", "b"),
			// A failed produce whose record was appended anyway.
			{Client: 1, TP: tp0, Acks: -1, Values: []string{"c"}, CallNs: 15, ReturnNs: 40},
			// acks=1, acknowledged: promises nothing the model checks.
			{Client: 1, TP: tp0, Acks: 1, Values: []string{"d"}, CallNs: 50, ReturnNs: 55, Acked: true, BaseOffset: 3},
		},
		Fetches: []Fetch{
			fetch(2, 5, 12, 0, 0),
			fetch(2, 25, 30, 0, 3, "a", "b", "c"),
			fetch(3, 60, 70, 1, 4, "b", "c", "d"),
		},
	}
	if vs, _ := CheckRegisters(h, RegisterOptions{}); len(vs) != 0 {
		t.Fatalf("violations in a linearizable history: %v", vs)
	}
}

func TestRegistersCatchAMovedAcknowledgedRecord(t *testing.T) {
	dir := t.TempDir()
	h := History{
		Produces: []Produce{ackedAll(0, 10, 20, 0, "a"), {Client: 1, TP: tp0, Acks: 1, Values: []string{"x"}, CallNs: 30, ReturnNs: NeverReturnedNs}},
		// After the acknowledgement, offset 0 holds another record.
		Fetches: []Fetch{fetch(2, 40, 50, 0, 1, "x")},
	}
	vs, html := CheckRegisters(h, RegisterOptions{HTMLDir: dir})
	if !checks(vs, "linearizability") || !strings.Contains(vs[0].Detail, "offset 0") {
		t.Fatalf("want a linearizability violation at offset 0, got %v", vs)
	}
	if len(html) != 1 {
		t.Fatalf("want one visualization, got %v", html)
	}
	if b, err := os.ReadFile(html[0]); err != nil || !strings.Contains(string(b), "<html") {
		t.Fatalf("visualization %s: %v", filepath.Base(html[0]), err)
	}
}

func TestRegistersCatchDisagreeingReads(t *testing.T) {
	h := History{
		Produces: []Produce{
			{Client: 0, TP: tp0, Acks: 1, Values: []string{"a"}, CallNs: 1, ReturnNs: 5, Acked: true},
			{Client: 1, TP: tp0, Acks: 1, Values: []string{"b"}, CallNs: 1, ReturnNs: 5, Acked: true},
		},
		Fetches: []Fetch{fetch(2, 10, 20, 0, 1, "a"), fetch(2, 30, 40, 0, 1, "b")},
	}
	if vs, _ := CheckRegisters(h, RegisterOptions{}); !checks(vs, "linearizability") {
		t.Fatalf("two reads of offset 0 disagree, yet no violation: %v", vs)
	}
}

func TestRegistersCatchAReadOfAnUnproducedValue(t *testing.T) {
	h := History{Fetches: []Fetch{fetch(0, 10, 20, 0, 1, "ghost")}}
	if vs, _ := CheckRegisters(h, RegisterOptions{}); !checks(vs, "linearizability") {
		t.Fatalf("a read of a value nobody produced passed: %v", vs)
	}
}

func TestRegistersCatchAReadBeforeTheWrite(t *testing.T) {
	// The read returns before the produce is even sent.
	h := History{
		Produces: []Produce{ackedAll(0, 100, 120, 0, "a")},
		Fetches:  []Fetch{fetch(1, 10, 20, 0, 1, "a")},
	}
	if vs, _ := CheckRegisters(h, RegisterOptions{}); !checks(vs, "linearizability") {
		t.Fatalf("a read from the future passed: %v", vs)
	}
}

func TestFetchContiguity(t *testing.T) {
	good := History{Fetches: []Fetch{fetch(0, 1, 2, 5, 8, "a", "b", "c")}}
	if vs := CheckFetchContiguity(good); len(vs) != 0 {
		t.Fatalf("contiguous fetch flagged: %v", vs)
	}
	gap := fetch(0, 1, 2, 5, 9, "a", "b")
	gap.Records[1].Offset = 7
	if vs := CheckFetchContiguity(History{Fetches: []Fetch{gap}}); !checks(vs, "contiguity") {
		t.Fatal("a gap passed")
	}
	dup := fetch(0, 1, 2, 5, 9, "a", "b")
	dup.Records[1].Offset = 5
	if vs := CheckFetchContiguity(History{Fetches: []Fetch{dup}}); !checks(vs, "contiguity") {
		t.Fatal("a repeated offset passed")
	}
	late := fetch(0, 1, 2, 3, 9, "a")
	if vs := CheckFetchContiguity(History{Fetches: []Fetch{late, fetch(0, 1, 2, 5, 6, "a", "b")}}); !checks(vs, "contiguity") {
		t.Fatal("a record above the high watermark passed")
	}
}

// TestHighWatermarksAreTheModelsForLeaders: the per-follower check leaves
// leaders' answers to the HW model.
func TestHighWatermarksAreTheModelsForLeaders(t *testing.T) {
	a, b, c := fetch(0, 1, 2, 0, 5), fetch(0, 3, 4, 0, 7), fetch(0, 5, 6, 0, 6)
	h := History{Fetches: []Fetch{a, b, c}}
	if vs := CheckHighWatermarks(h, nil); len(vs) != 0 {
		t.Fatalf("the follower check flagged leaders' answers: %v", vs)
	}
	if vs, _ := CheckHighWatermarkOrder(h, HWOptions{}); !checks(vs, "hw-linearizability") {
		t.Fatal("a leader's falling HW in one epoch passed the HW model")
	}
}

// fromFollower is f answered by follower node.
func fromFollower(f Fetch, node int32) Fetch {
	f.Replica, f.Follower = node, true
	return f
}

func TestHighWatermarksFromFollowers(t *testing.T) {
	// A client alternating between the leader and a lagging follower sees
	// the HW go back and forth: no violation.
	lead, lagging, lead2 := fetch(0, 1, 2, 0, 7), fromFollower(fetch(0, 3, 4, 0, 5), 2), fetch(0, 5, 6, 0, 8)
	if vs := CheckHighWatermarks(History{Fetches: []Fetch{lead, lagging, lead2}}, nil); len(vs) != 0 {
		t.Fatalf("a follower's lagging HW flagged: %v", vs)
	}
	if vs, _ := CheckHighWatermarkOrder(History{Fetches: []Fetch{lead, lagging, lead2}}, HWOptions{}); len(vs) != 0 {
		t.Fatalf("a follower's lagging HW flagged by the HW model: %v", vs)
	}
	// The leader's own HW falling is still caught among follower answers.
	leadFalls := fetch(0, 5, 6, 0, 6)
	if vs, _ := CheckHighWatermarkOrder(History{Fetches: []Fetch{lead, lagging, leadFalls}}, HWOptions{}); !checks(vs, "hw-linearizability") {
		t.Fatal("a leader's falling HW passed among follower answers")
	}
	// One follower's HW falling within an epoch is caught, unless it
	// restarted in between.
	f1, f2 := fromFollower(fetch(0, 1, 2, 0, 6), 2), fromFollower(fetch(0, 3, 4, 0, 4), 2)
	if vs := CheckHighWatermarks(History{Fetches: []Fetch{f1, f2}}, nil); !checks(vs, "hw-monotonic") {
		t.Fatal("a follower's falling HW passed")
	}
	if vs := CheckHighWatermarks(History{Fetches: []Fetch{f1, f2}}, []Restart{{Node: 2, AtNs: 3}}); len(vs) != 0 {
		t.Fatalf("a restarted follower's lower HW flagged: %v", vs)
	}
	if vs := CheckHighWatermarks(History{Fetches: []Fetch{f1, f2}}, []Restart{{Node: 3, AtNs: 3}}); !checks(vs, "hw-monotonic") {
		t.Fatal("another node's restart excused a follower's falling HW")
	}
	other := fromFollower(f2, 3)
	if vs := CheckHighWatermarks(History{Fetches: []Fetch{f1, other}}, nil); len(vs) != 0 {
		t.Fatalf("two followers' HWs compared: %v", vs)
	}
}

func TestFinalFetchedPresent(t *testing.T) {
	ok := map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 2,
		Replicas: []ReplicaLog{replica(1, "a", "b"), replica(2, "a", "b")}}}
	read := fromFollower(fetch(0, 1, 2, 0, 2, "a", "x"), 2)
	if vs := CheckFinal(History{Fetches: []Fetch{read}}, ok, FinalOptions{}); !checks(vs, "fetched-present") || !vs[0].Loss {
		t.Fatalf("a read record missing from the final log: %v, want a loss", vs)
	}
	good := fromFollower(fetch(0, 1, 2, 0, 2, "a", "b"), 2)
	if vs := CheckFinal(History{Fetches: []Fetch{good}}, ok, FinalOptions{}); len(vs) != 0 {
		t.Fatalf("records present flagged: %v", vs)
	}
	ahead := fromFollower(fetch(0, 1, 2, 0, 3, "a", "b"), 2)
	if vs := CheckFinal(History{Fetches: []Fetch{ahead}}, ok, FinalOptions{}); !checks(vs, "hw-final") {
		t.Fatal("a high watermark above the final one passed")
	}
	list := ListOffsets{TP: tp0, Replica: 1, CallNs: 1, ReturnNs: 2, HighWatermark: 3}
	if vs := CheckFinal(History{ListOffsets: []ListOffsets{list}}, ok, FinalOptions{}); !checks(vs, "hw-final") {
		t.Fatal("a ListOffsets high watermark above the final one passed")
	}
}

func TestLeaders(t *testing.T) {
	s := []LeaderSample{
		{AtNs: 1, Node: 1, TP: tp0, LeaderEpoch: 3, Leader: 2},
		{AtNs: 2, Node: 2, TP: tp0, LeaderEpoch: 3, Leader: 2},
		{AtNs: 3, Node: 3, TP: tp0, LeaderEpoch: 4, Leader: 3},
		{AtNs: 3, Node: 3, TP: tp0, LeaderEpoch: 5, Leader: -1},
	}
	if vs := CheckLeaders(s); len(vs) != 0 {
		t.Fatalf("one leader per epoch flagged: %v", vs)
	}
	s = append(s, LeaderSample{AtNs: 4, Node: 1, TP: tp0, LeaderEpoch: 3, Leader: 1})
	if vs := CheckLeaders(s); !checks(vs, "one-leader-per-epoch") {
		t.Fatal("two leaders in epoch 3 passed")
	}
}

func replica(node int32, values ...string) ReplicaLog {
	r := ReplicaLog{Node: node}
	for i, v := range values {
		r.Batches = append(r.Batches, Batch{BaseOffset: int64(i), LastOffset: int64(i), Bytes: []byte(v),
			Records: []Record{{Offset: int64(i), Value: v}}})
	}
	return r
}

func TestFinal(t *testing.T) {
	h := History{Produces: []Produce{ackedAll(0, 1, 2, 0, "a"), ackedAll(0, 3, 4, 1, "b")}}
	ok := map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 2,
		Replicas: []ReplicaLog{replica(1, "a", "b"), replica(2, "a", "b"), replica(3, "a", "b")}}}
	if vs := CheckFinal(h, ok, FinalOptions{}); len(vs) != 0 {
		t.Fatalf("converged cluster flagged: %+v", vs)
	}

	lost := map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 2,
		Replicas: []ReplicaLog{replica(1, "a", "x"), replica(2, "a", "x"), replica(3, "a", "x")}}}
	if vs := CheckFinal(h, lost, FinalOptions{}); len(vs) != 1 || vs[0].Check != "acked-present" || !vs[0].Loss {
		t.Fatalf("a lost acknowledged record: %v, want one loss", vs)
	}

	diverged := map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: 2,
		Replicas: []ReplicaLog{replica(1, "a", "b"), replica(2, "a", "c"), replica(3, "a", "b")}}}
	if vs := CheckFinal(h, diverged, FinalOptions{}); !checks(vs, "replicas-identical") || vs[0].Loss {
		t.Fatalf("diverged replicas: %v, want a violation that is no loss", vs)
	}
	behind := map[TopicPartition]PartitionFinal{tp0: {Leader: -1, HighWatermark: 2,
		Replicas: []ReplicaLog{replica(1, "a", "b"), replica(2, "a"), replica(3, "a", "b")}}}
	vs := CheckFinal(h, behind, FinalOptions{})
	if !checks(vs, "convergence") || len(vs) < 2 {
		t.Fatalf("a leaderless partition with a lagging replica: %v", vs)
	}
}
