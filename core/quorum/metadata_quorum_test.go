package quorum

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/core/metadata"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
)

// controllerQuorum mirrors the controller's (unexported) quorum interface,
// core/controller/quorum.go, so that drift breaks this build.
type controllerQuorum interface {
	Append(records []metadata.Record) (baseOffset int64, err error)
	EndOffset() int64
	CommittedOffset() int64
	LogStartOffset() int64
	ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error)
	CommittedBatches(from int64, fn func(metadata.Batch) error) error
	LeaderID() int32
	LeaderEpochStart() (int64, bool)
	Describe() (Description, bool)
}

var _ controllerQuorum = (*MetadataQuorum)(nil)

// TestMetadataQuorumServesTheControllersInterface: a single-voter Node
// behind the adapter elects itself, commits appended records at record
// offsets after its leader-change NoOp, reports commits through onCommit
// (not from inside Append), and reads them back as metadata batches.
func TestMetadataQuorumServesTheControllersInterface(t *testing.T) {
	s := sched.New(sched.Options{})
	proc := s.NewNode(1)
	clock := simclock.New(s, proc, simclock.Options{})
	network := simnet.New(s, sched.NewStreams(1).Get("net"), simnet.Calm())
	nn := network.AddNode(1, proc)
	disk := memdisk.New(memdisk.Options{Post: proc.Post})
	var commits []int64
	q := NewMetadataQuorum()
	node, err := StartNode(DefaultConfig(1, []int32{1}, func(int64) int64 { return 0 }), clock, nn, disk, "__cluster_metadata-0", q)
	if err != nil {
		t.Fatal(err)
	}
	q.Attach(node)
	q.Listen(func() { commits = append(commits, q.CommittedOffset()) }, func() {},
		func(err error) { t.Errorf("failed: %v", err) }, func(*Snapshot) { t.Error("unexpected snapshot") })
	nn.SetHandler(&driverHost{id: 1, net: nn, node: node})
	s.Run(3e9)
	if node.Raft().Role() != Leader || q.CommittedOffset() != 1 {
		t.Fatalf("single voter: %v, committed %d", node.Raft().Role(), q.CommittedOffset())
	}
	records := []metadata.Record{
		&metadata.TopicRecord{Name: "a", ID: metadata.TopicID{1}},
		&metadata.TopicRecord{Name: "b", ID: metadata.TopicID{2}},
	}
	commitsBefore := len(commits)
	base, err := q.Append(records)
	if err != nil || base != 1 || q.EndOffset() != 3 {
		t.Fatalf("Append: base %d, end %d, err %v", base, q.EndOffset(), err)
	}
	if len(commits) != commitsBefore {
		t.Fatal("commit reported from inside Append")
	}
	s.Run(4e9)
	if q.CommittedOffset() != 3 || len(commits) == 0 || commits[len(commits)-1] != 3 {
		t.Fatalf("after the sync: committed %d, commits reported %v", q.CommittedOffset(), commits)
	}
	data, err := q.ReadCommitted(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := metadata.DecodeBatches(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []metadata.Batch{ // one batch per decision
		{BaseOffset: 0, NextOffset: 1, LeaderEpoch: 1, Records: []metadata.Record{&metadata.NoOpRecord{}}},
		{BaseOffset: 1, NextOffset: 3, LeaderEpoch: 1, Records: records},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ReadCommitted (-want +got):\n%s", diff)
	}
	var replayed []metadata.Batch
	if err := q.CommittedBatches(0, func(b metadata.Batch) error { replayed = append(replayed, b); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, replayed); diff != "" {
		t.Fatalf("CommittedBatches differs from ReadCommitted (-read +replayed):\n%s", diff)
	}
	if _, err := q.ReadCommitted(4, 1<<20); err == nil {
		t.Fatal("a read beyond the log end succeeded")
	}
}

// TestDecisionBoundaries: a decision's entries are visible only whole; one
// cut short by another epoch's entry (a new leader's leader-change entry) is
// aborted, and a tail whose head was compacted or truncated away too.
func TestDecisionBoundaries(t *testing.T) {
	rec := metadata.EncodeRecord(&metadata.NoOpRecord{})
	entry := func(epoch int32, index, count uint32) Entry {
		data := binary.BigEndian.AppendUint32(nil, index)
		data = binary.BigEndian.AppendUint32(data, count)
		return Entry{Epoch: epoch, Data: append(data, rec...)}
	}
	leaderChange := func(epoch int32) Entry { return Entry{Epoch: epoch} }
	for _, tc := range []struct {
		name    string
		entries []Entry
		n       int
		whole   bool
	}{
		{"leader change", []Entry{leaderChange(1), entry(1, 0, 1)}, 1, true},
		{"whole decision", []Entry{entry(1, 0, 3), entry(1, 1, 3), entry(1, 2, 3), leaderChange(2)}, 3, true},
		{"not yet decided", []Entry{entry(1, 0, 3), entry(1, 1, 3)}, 0, false},
		{"cut by a leader change", []Entry{entry(1, 0, 3), entry(1, 1, 3), leaderChange(2)}, 2, false},
		{"cut by another epoch", []Entry{entry(1, 0, 3), entry(2, 0, 1)}, 1, false},
		{"cut by a new decision", []Entry{entry(1, 0, 3), entry(1, 0, 1)}, 1, false},
		{"tail without its head", []Entry{entry(1, 2, 3), entry(1, 0, 1)}, 1, false},
	} {
		n, whole, err := decisionLen(tc.entries)
		if err != nil || n != tc.n || whole != tc.whole {
			t.Errorf("%s: %d entries, whole %v, err %v; want %d, %v", tc.name, n, whole, err, tc.n, tc.whole)
		}
	}
	bad := Entry{Epoch: 1, Data: []byte{0, 0, 0, 3, 0, 0, 0, 3}}
	if _, _, err := decisionLen([]Entry{bad}); err == nil {
		t.Error("an entry whose index is not below its count was accepted")
	}
}
