package log

import (
	"testing"

	"strand/sim/memdisk"
)

func TestTruncateToInsideAndAtBatchBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		offset     int64
		wantLEO    int64
		wantEpochs int
	}{
		{"at a boundary", 9, 9, 2},      // batches [0,3) [3,6) [6,9) | [9,12) ...
		{"inside a batch", 10, 9, 2},    // the batch holding 10 goes whole
		{"at the first batch", 0, 0, 0}, // everything
		{"beyond the LEO", 1000, 60, 3}, // nothing
		{"inside the first batch", 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{})
			l := openLog(t, disk, testConfig(), OpenOptions{})
			var want []appended
			for i := 0; i < 20; i++ {
				epoch := int32(1)
				if i >= 2 {
					epoch = 2
				}
				if i >= 10 {
					epoch = 3
				}
				want = append(want, appendLeader(t, l, 3, int64(100+i), epoch))
			}
			flushAll(t, l, disk)
			if err := l.TruncateTo(tc.offset); err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != tc.wantLEO {
				t.Fatalf("LEO %d, want %d", l.LogEndOffset(), tc.wantLEO)
			}
			if n := checkPrefixOf(t, l, want); int64(n) != tc.wantLEO/3 {
				t.Fatalf("%d batches left", n)
			}
			if got := len(l.Epochs().Entries()); got != tc.wantEpochs {
				t.Fatalf("%d epochs left: %v", got, l.Epochs().Entries())
			}
			if l.RecoveryPoint() > l.LogEndOffset() {
				t.Fatalf("recovery point %d beyond LEO %d", l.RecoveryPoint(), l.LogEndOffset())
			}
			for _, base := range l.SegmentBaseOffsets() {
				if base > l.LogEndOffset() {
					t.Fatalf("segment %d survived a truncation to %d", base, l.LogEndOffset())
				}
			}
			// Appends continue at the new LEO and reopen finds the same log.
			more := appendLeader(t, l, 2, 500, 7)
			want = append(want[:tc.wantLEO/3], more)
			if more.baseOffset != tc.wantLEO {
				t.Fatalf("append after truncation at %d", more.baseOffset)
			}
			flushAll(t, l, disk)
			_ = l.Close()
			l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: l.RecoveryPoint()})
			if n := checkPrefixOf(t, l, want); n != len(want) {
				t.Fatalf("reopen after truncation kept %d of %d batches", n, len(want))
			}
			if e, end := l.EndOffsetForEpoch(7); e != 7 || end != l.LogEndOffset() {
				t.Fatalf("epoch 7 after reopen: (%d, %d)", e, end)
			}
		})
	}
}

func TestTruncatedTailNotResurrectedByOldFlush(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	for i := 0; i < 5; i++ {
		appendLeader(t, l, 2, 100, 0)
	}
	l.Flush(l.LogEndOffset(), nil) // in flight to 10
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, 6, 100, 1) // offsets 4..9 rewritten after the flush's Syncs were issued
	for disk.RunPending() > 0 {
	}
	if l.RecoveryPoint() > 4 {
		t.Fatalf("a flush issued before the truncation moved the recovery point to %d", l.RecoveryPoint())
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	for i := 0; i < 30; i++ {
		appendLeader(t, l, 2, 100, 1)
	}
	if err := l.TruncateFullyAndStartAt(500, 1); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.SegmentCount() != 1 || len(l.Epochs().Entries()) != 0 {
		t.Fatalf("after truncating fully: start %d, LEO %d, %d segments, epochs %v",
			l.LogStartOffset(), l.LogEndOffset(), l.SegmentCount(), l.Epochs().Entries())
	}
	if _, err := l.Read(499, 100, 500, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	if _, err := l.AppendAsFollower(makeStampedBatch(500, 4, 2, 10), 1); err != nil {
		t.Fatal(err)
	}
	names, _ := disk.List(testDir)
	for _, name := range names {
		if base, _, ok := parseSegmentFileName(name); ok && base != 500 {
			t.Fatalf("old segment file %s left behind", name)
		}
	}
}

// Truncating fully must not claim the new start offset as durable before a
// flush has synced the directory: a power loss in between brings back the
// removed segments and loses the new one, and a checkpointed recovery point
// above what recovery finds would have it trust a segment it never checked
// (a follower restarted at 20, the checkpoint says 20, the log comes back
// empty at 0).
func TestTruncateFullyRaisesTheRecoveryPointOnlyWhenFlushed(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	for i := 0; i < 3; i++ {
		appendLeader(t, l, 2, 100, 1)
	}
	flushAll(t, l, disk) // recovery point 6
	if err := l.TruncateFullyAndStartAt(500, 1); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp > 6 {
		t.Fatalf("recovery point %d right after truncating fully at 500, before any directory sync (was 6)", rp)
	}
	flushAll(t, l, disk)
	if rp := l.RecoveryPoint(); rp != 500 {
		t.Fatalf("recovery point %d after the flush, want 500", rp)
	}
}
