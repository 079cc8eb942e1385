package log

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/core/log/checkpoint"
	"strand/sim/memdisk"
)

type ee = checkpoint.EpochEntry

// eps builds entries from (epoch, startOffset) pairs.
func eps(pairs ...int64) []ee {
	out := []ee{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, ee{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func TestEpochCacheAssign(t *testing.T) {
	c, _ := NewEpochCache(nil)
	steps := []struct {
		epoch   int32
		start   int64
		changed bool
		want    []ee
	}{
		{1, 0, true, eps(1, 0)},
		{1, 5, false, eps(1, 0)}, // same epoch, later start: no change
		{3, 10, true, eps(1, 0, 3, 10)},
		{4, 10, true, eps(1, 0, 4, 10)}, // same start: the newer epoch replaces it
		{2, 7, true, eps(1, 0, 2, 7)},   // older epoch: later entries dropped (Kafka)
		{-1, 20, false, eps(1, 0, 2, 7)},
		{5, 3, true, eps(1, 0, 5, 3)}, // earlier start: entries starting later dropped
	}
	for i, s := range steps {
		if got := c.assign(s.epoch, s.start); got != s.changed {
			t.Fatalf("step %d: Assign(%d, %d) changed=%v", i, s.epoch, s.start, got)
		}
		if diff := cmp.Diff(s.want, c.Entries()); diff != "" {
			t.Fatalf("step %d: entries (-want +got):\n%s", i, diff)
		}
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	c, err := NewEpochCache(eps(2, 10, 4, 30, 7, 50))
	if err != nil {
		t.Fatal(err)
	}
	const leo = 80
	for _, tc := range []struct {
		requested int32
		epoch     int32
		end       int64
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{1, 1, 10}, // below every epoch: the first start offset
		{2, 2, 30},
		{3, 2, 30}, // unknown epoch between: the largest below and the next start
		{4, 4, 50},
		{6, 4, 50},
		{7, 7, leo}, // the latest epoch: the LEO
		{8, UndefinedEpoch, UndefinedEpochOffset},
	} {
		epoch, end := c.EndOffsetFor(tc.requested, leo)
		if epoch != tc.epoch || end != tc.end {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.requested, epoch, end, tc.epoch, tc.end)
		}
	}
	empty, _ := NewEpochCache(nil)
	if e, o := empty.EndOffsetFor(3, leo); e != UndefinedEpoch || o != UndefinedEpochOffset {
		t.Errorf("empty cache answered (%d, %d)", e, o)
	}
}

func TestEpochCacheTruncation(t *testing.T) {
	c, _ := NewEpochCache(eps(2, 10, 4, 30, 7, 50))
	c.truncateFromEnd(30)
	if diff := cmp.Diff(eps(2, 10), c.Entries()); diff != "" {
		t.Fatalf("TruncateFromEnd(30):\n%s", diff)
	}
	c, _ = NewEpochCache(eps(2, 10, 4, 30, 7, 50))
	c.truncateFromStart(35)
	if diff := cmp.Diff(eps(4, 35, 7, 50), c.Entries()); diff != "" {
		t.Fatalf("TruncateFromStart(35):\n%s", diff)
	}
	c.truncateFromStart(50)
	if diff := cmp.Diff(eps(7, 50), c.Entries()); diff != "" {
		t.Fatalf("TruncateFromStart(50):\n%s", diff)
	}
	c.truncateFromStart(5) // before everything: nothing changes
	if len(c.Entries()) != 1 {
		t.Fatal("TruncateFromStart below the first entry changed the cache")
	}
	if _, err := NewEpochCache(eps(2, 10, 2, 30)); err == nil {
		t.Fatal("NewEpochCache accepted a repeated epoch")
	}
}

func TestEpochCheckpointPersistedAndReloaded(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 3)
	appendLeader(t, l, 2, 100, 3)
	appendLeader(t, l, 2, 100, 6)
	flushAll(t, l, disk)
	data, err := disk.ReadFile(testDir + "/" + EpochCheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n2\n3 0\n6 4\n"; string(data) != want {
		t.Fatalf("leader-epoch-checkpoint = %q, want %q", data, want)
	}
	_ = l.Close()
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: l.RecoveryPoint()})
	if diff := cmp.Diff(eps(3, 0, 6, 4), l.Epochs().Entries()); diff != "" {
		t.Fatalf("epochs after reopen:\n%s", diff)
	}
}

// A checkpoint that survived a crash the log data did not: entries beyond
// the recovered LEO are dropped, and epochs of recovered batches re-enter.
func TestEpochCacheReconciledWithRecoveredData(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 1)
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	appendLeader(t, l, 2, 100, 2) // epoch 2 at offset 2, not synced
	_ = l.Close()
	writeEpochs := checkpoint.NewWriter(disk, testDir, EpochCheckpointName)
	writeEpochs.Write(checkpoint.EncodeEpochs(eps(1, 0, 2, 2, 9, 40)), nil)
	for disk.RunPending() > 0 {
	}
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if diff := cmp.Diff(eps(1, 0, 2, 2), l.Epochs().Entries()); diff != "" {
		t.Fatalf("epochs:\n%s", diff)
	}
}

func TestAssignEpochStartOffsetPersists(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 3, 100, 1)
	if err := l.AssignEpochStartOffset(4, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 3 {
		t.Fatalf("EndOffsetForEpoch(1) after a new leader epoch = (%d, %d), want (1, 3)", e, end)
	}
	if err := l.AssignEpochStartOffset(5, l.LogEndOffset()+1); err == nil {
		t.Fatal("assigned an epoch beyond the LEO")
	}
	for disk.RunPending() > 0 {
	}
	data, _ := disk.ReadFile(testDir + "/" + EpochCheckpointName)
	if string(data) != "0\n2\n1 0\n4 3\n" {
		t.Fatalf("leader-epoch-checkpoint = %q", data)
	}
}
