package log

import (
	"bytes"
	"errors"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// regionBytes reads a region straight from its file, as realnet's sendfile
// would, failing the test if the file no longer holds it.
func regionBytes(t *testing.T, r Region) []byte {
	t.Helper()
	out := make([]byte, r.Bytes)
	if _, err := r.File.ReadAt(out, r.Position); err != nil {
		t.Fatalf("region of %s at %d (%d bytes) no longer readable: %v", r.File.Path(), r.Position, r.Bytes, err)
	}
	return out
}

func concat(batches []appended) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b.bytes...)
	}
	return out
}

// A truncation inside a pinned segment changes the log at once, keeps the
// pinned bytes in the file until release, sends later appends to a new
// segment, and cuts the file on release.
func TestPinnedRegionSurvivesTruncation(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var batches []appended
	for i := 0; i < 4; i++ {
		batches = append(batches, appendLeader(t, l, 2, 100, 0))
	}
	res, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || len(res.Regions) != 1 {
		t.Fatalf("read: %v, %d regions", err, len(res.Regions))
	}
	release := l.Pin(res.Regions)
	segments := l.SegmentCount()
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 4 || l.SegmentCount() != segments+1 {
		t.Fatalf("after truncating a pinned segment to 4: LEO %d, %d segments (was %d), want a roll", l.LogEndOffset(), l.SegmentCount(), segments)
	}
	if got := regionBytes(t, res.Regions[0]); !bytes.Equal(got, concat(batches)) {
		t.Fatal("the pinned region changed under the truncation")
	}
	next := appendLeader(t, l, 3, 200, 1)
	if l.SegmentCount() != segments+1 || next.baseOffset != 4 {
		t.Fatalf("append after a pinned cut: %d segments, base offset %d", l.SegmentCount(), next.baseOffset)
	}
	if got := regionBytes(t, res.Regions[0]); !bytes.Equal(got, concat(batches)) {
		t.Fatal("the pinned region changed under an append")
	}
	want := append(concat(batches[:2]), next.bytes...)
	if got := bytes.Join(readAll(t, l), nil); !bytes.Equal(got, want) {
		t.Fatal("the log does not read as the kept batches plus the new one")
	}
	release()
	if size, keep := res.Regions[0].File.Size(), int64(len(concat(batches[:2]))); size != keep {
		t.Fatalf("after release the cut segment's file is %d bytes, want %d", size, keep)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
}

// A process crash before the release leaves the cut segment's stale tail
// on disk, past the next segment's base offset; recovery cuts it even when
// the recovery point trusts both segments.
func TestStaleTailOfPinnedCutRecovered(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var batches []appended
	for i := 0; i < 4; i++ {
		batches = append(batches, appendLeader(t, l, 2, 100, 0))
	}
	res, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Pin(res.Regions) // never released: the process dies first
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	next := appendLeader(t, l, 3, 200, 1)
	flushAll(t, l, disk)
	reopened := openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: l.RecoveryPoint()})
	want := append(concat(batches[:2]), next.bytes...)
	if got := bytes.Join(readAll(t, reopened), nil); !bytes.Equal(got, want) {
		t.Fatalf("recovered log is %d bytes, want the kept batches plus the new one (%d bytes)", len(got), len(want))
	}
}

// Truncating a pinned segment to its base replaces it with a new file; the
// old one stays readable until release, then closes.
func TestPinnedSegmentEmptiedIsReplaced(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	first := appendLeader(t, l, 2, 100, 0)
	res, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	release := l.Pin(res.Regions)
	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	next := appendLeader(t, l, 1, 200, 1)
	if next.baseOffset != 0 {
		t.Fatalf("append after emptying: base offset %d", next.baseOffset)
	}
	if got := regionBytes(t, res.Regions[0]); !bytes.Equal(got, first.bytes) {
		t.Fatal("the pinned region changed when its segment was emptied")
	}
	if got := bytes.Join(readAll(t, l), nil); !bytes.Equal(got, next.bytes) {
		t.Fatal("the log does not read as the new batch")
	}
	release()
	if _, err := res.Regions[0].File.ReadAt(make([]byte, 1), 0); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("the replaced file after release: %v, want closed", err)
	}
}

// Deleting pinned segments (retention, full truncation, closing the log)
// leaves their bytes readable until release, which closes the files.
func TestPinnedSegmentDeletionWaits(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.RetentionBytes = 1
	l := openLog(t, disk, cfg, OpenOptions{})
	for l.SegmentCount() < 3 {
		appendLeader(t, l, 2, 100, 0)
	}
	res, err := l.Read(0, 1<<30, l.LogEndOffset(), true)
	if err != nil || len(res.Regions) != 3 {
		t.Fatalf("read: %v, %d regions", err, len(res.Regions))
	}
	var want [][]byte
	for _, r := range res.Regions {
		want = append(want, regionBytes(t, r))
	}
	release := l.Pin(res.Regions)
	deleted, err := l.ApplyRetention(100, l.LogEndOffset())
	if err != nil || deleted == 0 {
		t.Fatalf("retention deleted %d: %v", deleted, err)
	}
	if err := l.TruncateFullyAndStartAt(1000, 100); err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Regions {
		if got := regionBytes(t, r); !bytes.Equal(got, want[i]) {
			t.Fatalf("region %d changed after its segment was deleted", i)
		}
	}
	names, _ := disk.List(testDir)
	for _, name := range names {
		if base, _, ok := parseSegmentFileName(name); ok && base != 1000 {
			t.Fatalf("deleted segment file %s still listed", name)
		}
	}
	release()
	for i, r := range res.Regions {
		if _, err := r.File.ReadAt(make([]byte, 1), r.Position); !errors.Is(err, env.ErrClosed) {
			t.Fatalf("region %d's file after release: %v, want closed", i, err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
}

// A clean reopen while a cut segment is still pinned does not bring the cut
// batches back: the segment rolled at the cut, and recovery stops the old
// file at the new segment's base offset.
func TestReopenDuringPinnedCutKeepsTheCut(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var batches []appended
	for i := 0; i < 4; i++ {
		batches = append(batches, appendLeader(t, l, 2, 100, 0))
	}
	res, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	release := l.Pin(res.Regions)
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := regionBytes(t, res.Regions[0]); !bytes.Equal(got, concat(batches)) {
		t.Fatal("the pinned region changed when its log closed")
	}
	release()
	reopened := openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if got := bytes.Join(readAll(t, reopened), nil); !bytes.Equal(got, concat(batches[:2])) || reopened.LogEndOffset() != 4 {
		t.Fatalf("reopened log holds %d bytes up to %d, want the 2 kept batches up to 4", len(got), reopened.LogEndOffset())
	}
}
