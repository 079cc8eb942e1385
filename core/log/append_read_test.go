package log

import (
	"bytes"
	"testing"

	"strand/core/batch"
	"strand/sim/memdisk"
)

func TestAppendReadRoundTripAcrossRolls(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var want []appended
	for i := 0; i < 60; i++ {
		want = append(want, appendLeader(t, l, 1+i%5, int64(1000+i), 3))
	}
	if l.SegmentCount() < 3 {
		t.Fatalf("expected several segments with segment.bytes 4096, got %d", l.SegmentCount())
	}
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("read %d batches, appended %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i].bytes) {
			t.Fatalf("batch %d differs from what was appended (with offset and epoch stamped)", i)
		}
	}
	// Segment files are named by base offset and each starts at its base.
	for _, base := range l.SegmentBaseOffsets() {
		data, err := disk.ReadFile(testDir + "/" + segmentFileName(base, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && baseOffsetOf(data) != base {
			t.Fatalf("segment %d starts with offset %d", base, baseOffsetOf(data))
		}
	}
	// Every single offset reads back starting with the batch that holds it.
	for _, w := range want {
		h, _ := batch.ParseHeader(w.bytes)
		for offset := h.BaseOffset; offset <= h.LastOffset(); offset++ {
			batches, _ := readBatches(t, l, offset, 1, l.LogEndOffset(), true)
			if len(batches) != 1 || !bytes.Equal(batches[0], w.bytes) {
				t.Fatalf("read at %d did not return exactly the batch [%d, %d]", offset, h.BaseOffset, h.LastOffset())
			}
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	var batches []appended
	for i := 0; i < 5; i++ {
		batches = append(batches, appendLeader(t, l, 3, 100, 0)) // offsets 0-2, 3-5, ...
	}
	size := int32(len(batches[0].bytes))

	// maxBytes: only whole batches that fit.
	got, _ := readBatches(t, l, 0, 2*size+size/2, l.LogEndOffset(), false)
	if len(got) != 2 {
		t.Fatalf("maxBytes 2.5 batches returned %d batches", len(got))
	}
	// maxBytes smaller than one batch: nothing, unless minOneBatch.
	if got, _ := readBatches(t, l, 0, size-1, l.LogEndOffset(), false); len(got) != 0 {
		t.Fatalf("a batch larger than maxBytes was returned without minOneBatch")
	}
	if got, _ := readBatches(t, l, 0, 1, l.LogEndOffset(), true); len(got) != 1 {
		t.Fatalf("minOneBatch returned %d batches", len(got))
	}
	// maxOffset: stop before the batch whose last offset >= maxOffset.
	got, result := readBatches(t, l, 0, 1<<20, 6, false)
	if len(got) != 2 || result.NextOffset != 6 {
		t.Fatalf("maxOffset 6 returned %d batches ending at %d, want 2 ending at 6", len(got), result.NextOffset)
	}
	got, _ = readBatches(t, l, 0, 1<<20, 7, false) // HW inside the third batch
	if len(got) != 2 {
		t.Fatalf("maxOffset 7 returned %d batches, want 2", len(got))
	}
	// Alignment: a fetch inside a batch starts at that batch.
	got, result = readBatches(t, l, 4, 1<<20, l.LogEndOffset(), false)
	if len(got) != 4 || result.FirstOffset != 3 || !bytes.Equal(got[0], batches[1].bytes) {
		t.Fatalf("read at 4 started at %d with %d batches", result.FirstOffset, len(got))
	}
	// At the LEO: empty, no error. Beyond: out of range.
	if got, _ := readBatches(t, l, l.LogEndOffset(), 1<<20, l.LogEndOffset(), true); len(got) != 0 {
		t.Fatal("read at the LEO returned data")
	}
	if _, err := l.Read(l.LogEndOffset()+1, 1<<20, l.LogEndOffset(), true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read beyond the LEO: %v, want ErrOffsetOutOfRange", err)
	}
	if _, err := l.Read(-1, 1<<20, l.LogEndOffset(), true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v, want ErrOffsetOutOfRange", err)
	}
}

func TestAppendRejectsBadBatches(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	good := makeBatch(2, 10, 10)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 1
	if _, err := l.AppendAsLeader(corrupt, 0, 10); !isErr(err, ErrInvalidBatch) {
		t.Fatalf("corrupt batch: %v, want ErrInvalidBatch", err)
	}
	two := append(append([]byte(nil), good...), good...)
	if _, err := l.AppendAsLeader(two, 0, 10); !isErr(err, ErrInvalidBatch) {
		t.Fatalf("two batches to a leader append: %v, want ErrInvalidBatch", err)
	}
	if l.LogEndOffset() != 0 || l.Err() != nil {
		t.Fatalf("rejected appends changed the log: LEO %d, err %v", l.LogEndOffset(), l.Err())
	}
	big := makeBatch(1, 10, 5000)
	if _, err := l.AppendAsLeader(big, 0, 10); !isErr(err, ErrBatchTooLarge) {
		t.Fatalf("batch larger than segment.bytes: %v", err)
	}
	// AppendCheckedAsLeader trusts the caller's CRC check, and only that.
	if _, err := l.AppendCheckedAsLeader(two, 0, 10); !isErr(err, ErrInvalidBatch) {
		t.Fatalf("two batches to a checked leader append: %v, want ErrInvalidBatch", err)
	}
	if _, err := l.AppendCheckedAsLeader(big, 0, 10); !isErr(err, ErrBatchTooLarge) {
		t.Fatalf("checked append larger than segment.bytes: %v", err)
	}
	res, err := l.AppendCheckedAsLeader(append([]byte(nil), good...), 0, 10)
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 1 || l.LogEndOffset() != 2 {
		t.Fatalf("checked append of a good batch: %+v, %v, LEO %d; want offsets 0..1, LEO 2", res, err, l.LogEndOffset())
	}
}

func TestAppendAsFollower(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	var run []byte
	run = append(run, makeStampedBatch(0, 1, 2, 10)...)
	run = append(run, makeStampedBatch(2, 1, 3, 11)...)
	run = append(run, makeStampedBatch(5, 4, 1, 12)...)
	want := append([]byte(nil), run...)
	result, err := l.AppendAsFollower(run, 50)
	if err != nil {
		t.Fatal(err)
	}
	if result.BaseOffset != 0 || result.LastOffset != 5 || l.LogEndOffset() != 6 {
		t.Fatalf("follower append: %+v, LEO %d", result, l.LogEndOffset())
	}
	got, _ := readBatches(t, l, 0, 1<<20, 6, false)
	if !bytes.Equal(bytes.Join(got, nil), want) {
		t.Fatal("follower batches did not read back byte-identical")
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 5 {
		t.Fatalf("EndOffsetForEpoch(1) = (%d, %d), want (1, 5)", e, end)
	}
	// Not at the LEO, or not contiguous: rejected, nothing written.
	if _, err := l.AppendAsFollower(makeStampedBatch(7, 4, 1, 12), 50); !isErr(err, ErrUnexpectedOffset) {
		t.Fatalf("gap: %v", err)
	}
	bad := append(makeStampedBatch(6, 4, 1, 12), makeStampedBatch(8, 4, 1, 12)...)
	if _, err := l.AppendAsFollower(bad, 50); !isErr(err, ErrUnexpectedOffset) || l.LogEndOffset() != 6 {
		t.Fatalf("non-contiguous run: %v, LEO %d", err, l.LogEndOffset())
	}
	torn := makeStampedBatch(6, 4, 1, 12)
	if _, err := l.AppendAsFollower(torn[:len(torn)-3], 50); !isErr(err, ErrInvalidBatch) {
		t.Fatalf("torn batch: %v", err)
	}
}

func TestRollBySegmentMs(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	appendLeader(t, l, 1, 5000, 0)
	appendLeader(t, l, 1, 5900, 0)
	if l.SegmentCount() != 1 {
		t.Fatalf("rolled before segment.ms passed: %d segments", l.SegmentCount())
	}
	appendLeader(t, l, 1, 6001, 0) // 1001 ms after the first batch's timestamp
	if l.SegmentCount() != 2 || l.SegmentBaseOffsets()[1] != 2 {
		t.Fatalf("segment.ms roll: segments %v", l.SegmentBaseOffsets())
	}
	if err := l.Roll(7000); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(7000); err != nil { // active segment empty: no-op
		t.Fatal(err)
	}
	if got := l.SegmentBaseOffsets(); len(got) != 3 || got[2] != 3 {
		t.Fatalf("explicit roll: segments %v", got)
	}

	// A follower's append of several batches reports a roll before any of
	// them, and none when they all fit the active segment.
	follower := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	first, second := makeBatch(1, 5000, 40), makeBatch(1, 5100, 40)
	batch.SetBaseOffset(second, 1)
	res, err := follower.AppendAsFollower(append(first, second...), 5100)
	if err != nil || res.Rolled || follower.SegmentCount() != 1 {
		t.Fatalf("follower append within segment.ms: %+v, %v, %d segments", res, err, follower.SegmentCount())
	}
	third, fourth := makeBatch(1, 5200, 40), makeBatch(1, 6500, 40)
	batch.SetBaseOffset(third, 2)
	batch.SetBaseOffset(fourth, 3)
	res, err = follower.AppendAsFollower(append(third, fourth...), 6500)
	if err != nil || !res.Rolled || follower.SegmentCount() != 2 {
		t.Fatalf("follower append past segment.ms: %+v, %v, %d segments", res, err, follower.SegmentCount())
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentIndexBytes = 32 // 4 offset entries, 1 time entry plus the final slot
	cfg.IndexIntervalBytes = 0 // an entry for every batch after the first
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	for i := 0; i < 12; i++ {
		appendLeader(t, l, 1, int64(100+i), 0)
	}
	if l.SegmentCount() < 3 {
		t.Fatalf("full indexes did not roll: %d segments", l.SegmentCount())
	}
	if got := readAll(t, l); len(got) != 12 {
		t.Fatalf("read %d batches", len(got))
	}
}
