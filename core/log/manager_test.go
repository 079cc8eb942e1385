package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/sim/memdisk"
)

func TestParseDirName(t *testing.T) {
	for name, want := range map[string]TopicPartition{
		"orders-0":              {Topic: "orders", Partition: 0},
		"my-topic-12":           {Topic: "my-topic", Partition: 12},
		"__consumer_offsets-49": {Topic: "__consumer_offsets", Partition: 49},
	} {
		got, ok := ParseDirName(name)
		if !ok || got != want || got.DirName() != name {
			t.Errorf("ParseDirName(%q) = %v, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"orders", "orders-", "-3", "orders-x", "orders-01", RecoveryPointCheckpointName} {
		if _, ok := ParseDirName(bad); ok {
			t.Errorf("ParseDirName(%q) accepted", bad)
		}
	}
}

func TestManagerCheckpointsSurviveCrash(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	configFor := func(string) Config { return testConfig() }
	m, err := OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	tps := []TopicPartition{{Topic: "my-topic", Partition: 1}, {Topic: "a", Partition: 0}}
	for _, tp := range tps {
		l, err := m.CreateLog(tp, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			appendLeader(t, l, 2, int64(1000+i), 0)
		}
		flushAll(t, l, disk)
		if err := l.AdvanceStartOffset(7); err != nil {
			t.Fatal(err)
		}
	}
	hws := map[TopicPartition]int64{tps[0]: 90, tps[1]: 80}
	done := 0
	count := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
		done++
	}
	m.WriteRecoveryPoints(count)
	m.WriteLogStartOffsets(count)
	m.WriteHighWatermarks(hws, count)
	for disk.RunPending() > 0 {
	}
	if done != 3 {
		t.Fatalf("%d of 3 checkpoint writes completed", done)
	}
	data, _ := disk.ReadFile("data/" + RecoveryPointCheckpointName)
	if want := "0\n2\na 0 100\nmy-topic 1 100\n"; string(data) != want {
		t.Fatalf("recovery-point-offset-checkpoint = %q, want %q", data, want)
	}
	disk.Crash(rand.New(rand.NewPCG(3, 4)), memdisk.CrashLoseAll)

	m, err = OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]TopicPartition{tps[1], tps[0]}, m.Partitions()); diff != "" {
		t.Fatalf("partitions after crash:\n%s", diff)
	}
	for _, tp := range tps {
		l, _ := m.Log(tp)
		if l.LogEndOffset() != 100 || l.RecoveryPoint() != 100 || l.LogStartOffset() != 7 {
			t.Fatalf("%v after crash: LEO %d, recovery point %d, start %d", tp, l.LogEndOffset(), l.RecoveryPoint(), l.LogStartOffset())
		}
		if m.HighWatermark(tp) != hws[tp] {
			t.Fatalf("%v: high watermark %d, want %d", tp, m.HighWatermark(tp), hws[tp])
		}
	}
	var deleted error = errPending
	if err := m.DeleteLog(tps[0], func(err error) { deleted = err }); err != nil {
		t.Fatal(err)
	}
	for disk.RunPending() > 0 {
	}
	if deleted != nil {
		t.Fatalf("delete: %v", deleted)
	}
	names, _ := disk.List("data")
	for _, name := range names {
		if name == tps[0].DirName() {
			t.Fatal("deleted log's directory still there")
		}
	}
}

var errPending = errorString("pending")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestTruncationWaitsForLoweredRecoveryCheckpoint: a restart trusts every
// batch below the checkpointed recovery point unverified, so after a
// truncation below it the log must not take appends there until the lowered
// checkpoint is durable (SPEC.md §3.4). Kafka rewrites the checkpoint inside
// the truncation; Strand's checkpoint writes are asynchronous.
func TestTruncationWaitsForLoweredRecoveryCheckpoint(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	configFor := func(string) Config { return testConfig() }
	m, err := OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	l, err := m.CreateLog(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		appendLeader(t, l, 1, 100, 0)
	}
	flushAll(t, l, disk)
	m.WriteRecoveryPoints(nil)
	for disk.RunPending() > 0 {
	}

	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 200, 40), 1, 200); !errors.Is(err, ErrRecoveryPointPending) {
		t.Fatalf("append below the checkpointed recovery point 3 before the lowered checkpoint is durable: %v, want ErrRecoveryPointPending", err)
	}
	for disk.RunPending() > 0 {
	}
	after := appendLeader(t, l, 1, 200, 1) // never synced

	// A process crash keeps the unsynced batch and the checkpoint; the
	// restarted log must not count the batch as durable, so that a power
	// loss after it cannot drop a batch below the recovery point.
	disk.Crash(nil, memdisk.CrashKeepAll)
	m, err = OpenManager(disk, "data", configFor, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, _ = m.Log(tp)
	if l.RecoveryPoint() > after.baseOffset {
		t.Fatalf("after a restart the unsynced batch at %d lies below the recovery point %d", after.baseOffset, l.RecoveryPoint())
	}
	if got := readAll(t, l); len(got) != 1 || !bytes.Equal(got[0], after.bytes) {
		t.Fatalf("after a process crash the log holds %d batches, want the unsynced one", len(got))
	}
}

// TestUnparsableRecoveryPointCheckpointRecoversEveryLog: a
// recovery-point-offset-checkpoint that no longer parses (a bit flipped in
// it: checkpoints carry no checksum) does not keep the directory from
// opening; as Kafka's LogManager resets the recovery points to 0, every
// log is recovered batch by batch from its first segment, so a corrupt
// batch the lost checkpoint would have trusted is cut, and the manager
// says why. Before, OpenManager failed, and a broker whose first log
// directory it was refused to start.
func TestUnparsableRecoveryPointCheckpointRecoversEveryLog(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	configFor := func(string) Config { return testConfig() }
	m, err := OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	l, err := m.CreateLog(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last appended
	for i := 0; i < 10; i++ {
		last = appendLeader(t, l, 2, int64(1000+i), 0)
	}
	flushAll(t, l, disk)
	written := false
	m.WriteRecoveryPoints(func(err error) { written = err == nil })
	for disk.RunPending() > 0 {
	}
	if !written || m.RecoveryPointsUnreadable() != nil {
		t.Fatalf("checkpoint written %v, unreadable %v", written, m.RecoveryPointsUnreadable())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// The version line's '0' becomes '1': a version no reader knows.
	if err := disk.FlipBit("data/"+RecoveryPointCheckpointName, 0, 0); err != nil {
		t.Fatal(err)
	}
	// A flipped bit in the last batch, below the lost recovery point.
	segment := "data/t-0/" + fmt.Sprintf("%020d.log", 0)
	size, _ := disk.DurableSize(segment)
	if err := disk.FlipBit(segment, size-1, 0); err != nil {
		t.Fatal(err)
	}

	m, err = OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatalf("OpenManager with an unparsable recovery-point checkpoint: %v", err)
	}
	if m.RecoveryPointsUnreadable() == nil {
		t.Fatal("RecoveryPointsUnreadable is nil: the broker cannot say why it recovered everything")
	}
	l, _ = m.Log(tp)
	if l.LogEndOffset() != last.baseOffset {
		t.Fatalf("LEO %d after recovering from 0, want %d: the corrupt last batch cut", l.LogEndOffset(), last.baseOffset)
	}
}

// TestManagerLogsShareOneReadBuffer: a Manager's logs read into one buffer
// (OpenOptions.Scratch), so a partition costs a few KiB of heap, not the 64
// KiB a buffer of its own would; their reads, interleaved, and their
// recovery on reopen still see their own batches.
func TestManagerLogsShareOneReadBuffer(t *testing.T) {
	const logs = 200
	disk := memdisk.New(memdisk.Options{})
	configFor := func(string) Config { return testConfig() }
	m, err := OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	heapBefore := liveHeapBytes()
	for i := range logs {
		if _, err := m.CreateLog(TopicPartition{Topic: "t", Partition: int32(i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	perLogBytes := (liveHeapBytes() - heapBefore) / logs
	t.Logf("%d logs hold %d bytes of heap each", logs, perLogBytes)
	if perLogBytes > scratchBytes/4 {
		t.Errorf("a log holds %d bytes of heap, want at most %d (its read buffer shared)", perLogBytes, scratchBytes/4)
	}

	logOf := func(m *Manager, partition int32) *Log {
		l, ok := m.Log(TopicPartition{Topic: "t", Partition: partition})
		if !ok {
			t.Fatalf("no log t-%d", partition)
		}
		return l
	}
	a, b := logOf(m, 0), logOf(m, 1)
	for i := range 30 {
		appendLeader(t, a, 1, int64(1000+i), 0)
		appendLeader(t, b, 3, int64(5000+i), 0)
	}
	flushAll(t, a, disk)
	flushAll(t, b, disk)
	// Reads of one log between reads of the other: each walk fills the
	// shared buffer anew.
	check := func(l *Log, firstMs int64) {
		t.Helper()
		for i := range 30 {
			got, ok, err := l.OffsetForTimestamp(firstMs+int64(i), 1<<20)
			if err != nil || !ok || got.TimestampMs < firstMs+int64(i) {
				t.Fatalf("%s: offset for timestamp %d = %+v, %v, %v", l.Dir(), firstMs+int64(i), got, ok, err)
			}
		}
	}
	batchesA, batchesB := readAll(t, a), readAll(t, b)
	check(a, 1000)
	check(b, 5000)
	if len(batchesA) != 30 || len(batchesB) != 30 {
		t.Fatalf("read %d and %d batches, want 30 each", len(batchesA), len(batchesB))
	}

	m, err = OpenManager(disk, "data", configFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b = logOf(m, 0), logOf(m, 1)
	if diff := cmp.Diff(batchesA, readAll(t, a)); diff != "" {
		t.Errorf("t-0 after reopening (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(batchesB, readAll(t, b)); diff != "" {
		t.Errorf("t-1 after reopening (-before +after):\n%s", diff)
	}
	check(a, 1000)
	check(b, 5000)
}

// liveHeapBytes is the heap's live bytes after a collection.
func liveHeapBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
