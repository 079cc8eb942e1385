package log

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// checkPrefixOf checks that the log holds exactly a prefix of want: the same
// batches, byte for byte, from want[0] on.
func checkPrefixOf(t *testing.T, l *Log, want []appended) int {
	t.Helper()
	got := readAll(t, l)
	if len(got) > len(want) {
		t.Fatalf("log holds %d batches, only %d were appended", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i].bytes) {
			t.Fatalf("batch %d (offset %d) differs from the one appended", i, want[i].baseOffset)
		}
	}
	return len(got)
}

func TestReopenAfterCleanClose(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{NowMs: 1})
	var want []appended
	for i := 0; i < 40; i++ {
		want = append(want, appendLeader(t, l, 2, int64(100+i), int32(i/10)))
	}
	flushAll(t, l, disk)
	segments, epochs := l.SegmentBaseOffsets(), l.Epochs().Entries()
	maxBefore, _, _ := l.MaxTimestamp(testDecompressedBytesMax)
	indexes := readIndexFiles(t, disk, segments)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: l.RecoveryPoint(), NowMs: 2})
	if n := checkPrefixOf(t, l, want); n != len(want) {
		t.Fatalf("reopen kept %d of %d batches", n, len(want))
	}
	if got := l.SegmentBaseOffsets(); !equalInts(got, segments) {
		t.Fatalf("segments %v, were %v", got, segments)
	}
	if got := l.Epochs().Entries(); len(got) != len(epochs) || got[len(got)-1] != epochs[len(epochs)-1] {
		t.Fatalf("epochs %v, were %v", got, epochs)
	}
	if got, _, _ := l.MaxTimestamp(testDecompressedBytesMax); got != maxBefore {
		t.Fatalf("max timestamp %+v, was %+v", got, maxBefore)
	}
	if got := readIndexFiles(t, disk, segments); !bytes.Equal(got, indexes) {
		t.Fatal("indexes changed across a clean reopen")
	}
}

func TestIndexesRebuiltWhenMissingOrCorrupt(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var want []appended
	for i := 0; i < 100; i++ {
		want = append(want, appendLeader(t, l, 2, int64(100+i), 0))
	}
	flushAll(t, l, disk)
	segments := l.SegmentBaseOffsets()
	if len(segments) < 4 {
		t.Fatalf("want at least 4 segments, have %d", len(segments))
	}
	original := readIndexFiles(t, disk, segments)
	if len(original) == 0 {
		t.Fatal("no index entries were written")
	}
	rp := l.RecoveryPoint()
	_ = l.Close()
	// A trusted (below the recovery point) segment loses its offset index,
	// another gets a corrupt one, a third a torn time index.
	mustRemove(t, disk, testDir+"/"+segmentFileName(segments[0], indexSuffix))
	if err := disk.FlipBit(testDir+"/"+segmentFileName(segments[1], indexSuffix), 2, 7); err != nil {
		t.Fatal(err)
	}
	tiPath := testDir + "/" + segmentFileName(segments[2], timeIndexSuffix)
	data, _ := disk.ReadFile(tiPath)
	if err := disk.TruncateFile(tiPath, int64(len(data)-5)); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if n := checkPrefixOf(t, l, want); n != len(want) {
		t.Fatalf("kept %d of %d batches", n, len(want))
	}
	if got := readIndexFiles(t, disk, segments); !bytes.Equal(got, original) {
		t.Fatal("rebuilt indexes differ from the ones written on append")
	}
}

func TestCrashLoseAllKeepsFlushedBatches(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var want []appended
	for i := 0; i < 30; i++ {
		want = append(want, appendLeader(t, l, 2, int64(100+i), 1))
	}
	flushAll(t, l, disk)
	flushed := len(want)
	for i := 0; i < 20; i++ {
		want = append(want, appendLeader(t, l, 2, int64(200+i), 2))
	}
	rp := l.RecoveryPoint()
	disk.Crash(rand.New(rand.NewPCG(1, 2)), memdisk.CrashLoseAll)
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if n := checkPrefixOf(t, l, want); n != flushed {
		t.Fatalf("after losing unsynced writes the log has %d batches, %d were flushed", n, flushed)
	}
	if l.LogEndOffset() != rp || l.Epochs().LatestEpoch() != 1 {
		t.Fatalf("LEO %d (recovery point %d), latest epoch %d", l.LogEndOffset(), rp, l.Epochs().LatestEpoch())
	}
	// The log goes on from there.
	more := appendLeader(t, l, 1, 300, 5)
	if more.baseOffset != rp {
		t.Fatalf("append after recovery at %d, want %d", more.baseOffset, rp)
	}
}

// TestCrashTornKeepsSyncedAndOnlyWholeBatches crashes with torn writeback at
// many seeds, flushing at random points, and checks after each recovery that
// every batch below the recovery point survived byte-identical and that the
// log is exactly a prefix of what was appended: whole, verified batches.
func TestCrashTornKeepsSyncedAndOnlyWholeBatches(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		disk := memdisk.New(memdisk.Options{})
		l := openLog(t, disk, testConfig(), OpenOptions{})
		var want []appended
		for i := 0; i < 10+rng.IntN(60); i++ {
			want = append(want, appendLeader(t, l, 1+rng.IntN(4), int64(100+i), int32(i/15)))
			if rng.IntN(10) == 0 {
				l.Flush(l.LogEndOffset(), nil)
			}
			if rng.IntN(4) == 0 {
				disk.RunPending()
			}
		}
		rp := l.RecoveryPoint()
		flushedBatches := 0
		for flushedBatches < len(want) && want[flushedBatches].baseOffset < rp {
			flushedBatches++
		}
		disk.Crash(rng, memdisk.CrashTorn)
		l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
		n := checkPrefixOf(t, l, want)
		if n < flushedBatches {
			t.Fatalf("seed %d: recovery kept %d batches, %d were below the recovery point %d", seed, n, flushedBatches, rp)
		}
		if l.RecoveryPoint() > l.LogEndOffset() {
			t.Fatalf("seed %d: recovery point %d beyond LEO %d", seed, l.RecoveryPoint(), l.LogEndOffset())
		}
		for _, e := range l.Epochs().Entries() {
			if e.StartOffset >= l.LogEndOffset() {
				t.Fatalf("seed %d: epoch %v starts beyond the LEO %d", seed, e, l.LogEndOffset())
			}
		}
	}
}

func TestRecoveryTruncatesAtCorruptOrZeroFilledTail(t *testing.T) {
	for _, damage := range []string{"bitflip", "zeros", "torn"} {
		t.Run(damage, func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{})
			cfg := testConfig()
			cfg.SegmentBytes = 1 << 20
			l := openLog(t, disk, cfg, OpenOptions{})
			var want []appended
			for i := 0; i < 10; i++ {
				want = append(want, appendLeader(t, l, 2, int64(100+i), 0))
			}
			flushAll(t, l, disk)
			rp := l.RecoveryPoint()
			for i := 0; i < 5; i++ {
				want = append(want, appendLeader(t, l, 2, int64(200+i), 0))
			}
			// Damage the third unflushed batch.
			path := testDir + "/" + segmentFileName(0, logSuffix)
			position := int64(0)
			for _, w := range want[:12] {
				position += int64(len(w.bytes))
			}
			switch damage {
			case "bitflip":
				if err := disk.FlipBit(path, position+40, 3); err != nil {
					t.Fatal(err)
				}
			case "zeros":
				if err := disk.TruncateFile(path, position); err != nil {
					t.Fatal(err)
				}
				if err := disk.TruncateFile(path, position+4096); err != nil { // a preallocated, zero-filled tail
					t.Fatal(err)
				}
			case "torn":
				if err := disk.TruncateFile(path, position+30); err != nil {
					t.Fatal(err)
				}
			}
			_ = l.Close()
			l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: rp})
			if n := checkPrefixOf(t, l, want); n != 12 {
				t.Fatalf("kept %d batches, want the 12 before the damage", n)
			}
			if data, _ := disk.ReadFile(path); int64(len(data)) != position {
				t.Fatalf("segment is %d bytes after recovery, want %d", len(data), position)
			}
		})
	}
}

func TestRecoveryRemovesLeftoversAndLaterSegments(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var want []appended
	for i := 0; i < 40; i++ {
		want = append(want, appendLeader(t, l, 2, int64(100+i), 0))
	}
	segments := l.SegmentBaseOffsets()
	_ = l.Close()
	// Corrupt the second segment's first batch: everything from there goes.
	if err := disk.FlipBit(testDir+"/"+segmentFileName(segments[1], logSuffix), 30, 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, disk, testDir+"/"+EpochCheckpointName+".tmp", []byte("garbage"))
	writeFile(t, disk, testDir+"/"+segmentFileName(99999, indexSuffix), []byte("orphan"))
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: 0})
	n := checkPrefixOf(t, l, want)
	for disk.RunPending() > 0 { // let the epoch checkpoint write finish
	}
	if l.LogEndOffset() != segments[1] || l.SegmentCount() != 2 {
		t.Fatalf("after corrupting segment %d: LEO %d, %d segments (%d batches)", segments[1], l.LogEndOffset(), l.SegmentCount(), n)
	}
	names, _ := disk.List(testDir)
	for _, name := range names {
		if name == EpochCheckpointName+".tmp" || name == segmentFileName(99999, indexSuffix) {
			t.Fatalf("leftover %s not removed", name)
		}
		if base, _, ok := parseSegmentFileName(name); ok && base > segments[1] {
			t.Fatalf("segment file %s after the truncation point not removed", name)
		}
	}
}

func TestFailedSyncFailsTheLog(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 0)
	if err := disk.FailNextSync(testDir + "/" + segmentFileName(0, logSuffix)); err != nil {
		t.Fatal(err)
	}
	var flushErr error
	l.Flush(l.LogEndOffset(), func(err error) { flushErr = err })
	for disk.RunPending() > 0 {
	}
	if !isErr(flushErr, env.ErrIO) || l.RecoveryPoint() != 0 {
		t.Fatalf("flush with a failed sync: err %v, recovery point %d", flushErr, l.RecoveryPoint())
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1); !isErr(err, env.ErrIO) {
		t.Fatalf("append after a failed sync: %v, want env.ErrIO", err)
	}
	if _, err := l.Read(0, 1000, 10, true); !isErr(err, env.ErrIO) {
		t.Fatalf("read after a failed sync: %v, want env.ErrIO", err)
	}
	if err := l.TruncateTo(0); !isErr(err, env.ErrIO) {
		t.Fatalf("truncate after a failed sync: %v", err)
	}
}

func TestDiskFullFailsTheLog(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 0)
	disk.SetFull(true)
	_, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1)
	if !isErr(err, env.ErrIO) || !isErr(err, env.ErrNoSpace) {
		t.Fatalf("append on a full disk: %v, want env.ErrIO wrapping env.ErrNoSpace", err)
	}
	disk.SetFull(false)
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1); !isErr(err, env.ErrIO) {
		t.Fatalf("the log recovered by itself after a failed write: %v", err)
	}
}

func readIndexFiles(t *testing.T, disk *memdisk.Disk, segments []int64) []byte {
	t.Helper()
	var all []byte
	for _, base := range segments {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			data, err := disk.ReadFile(testDir + "/" + segmentFileName(base, suffix))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, data...)
		}
	}
	return all
}

func writeFile(t *testing.T, disk env.Disk, path string, data []byte) {
	t.Helper()
	f, err := disk.Open(path, env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Append(data); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

func mustRemove(t *testing.T, disk env.Disk, path string) {
	t.Helper()
	if err := disk.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCorruptEpochCheckpointRebuiltFromBatches(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	for i := 0; i < 60; i++ {
		appendLeader(t, l, 2, 100, int32(i/20*3))
	}
	flushAll(t, l, disk)
	want := l.Epochs().Entries()
	rp := l.RecoveryPoint()
	_ = l.Close()
	if err := disk.FlipBit(testDir+"/"+EpochCheckpointName, 0, 3); err != nil { // version line "0" -> "8"
		t.Fatal(err)
	}
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if got := l.Epochs().Entries(); len(got) != 3 || got[0] != want[0] || got[2] != want[2] {
		t.Fatalf("epochs rebuilt as %v, want %v", got, want)
	}
}

// A trusted segment whose time index lost its entries (here: emptied) must
// not report a max timestamp from its tail alone.
func TestLostTimeIndexEntriesRebuilt(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0
	l := openLog(t, disk, cfg, OpenOptions{})
	appendLeader(t, l, 1, 9000, 0) // the segment's max, at its start
	for l.SegmentCount() < 3 {
		appendLeader(t, l, 1, 100, 0)
	}
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	_ = l.Close()
	if err := disk.TruncateFile(testDir+"/"+segmentFileName(0, timeIndexSuffix), 0); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: rp})
	if got, found, err := l.OffsetForTimestamp(9000, testDecompressedBytesMax); err != nil || !found || got.Offset != 0 || got.TimestampMs != 9000 {
		t.Fatalf("OffsetForTimestamp(9000) = (%+v, %v, %v), want offset 0 at 9000", got, found, err)
	}
	if got, _, err := l.MaxTimestamp(testDecompressedBytesMax); err != nil || got.Offset != 0 || got.TimestampMs != 9000 {
		t.Fatalf("MaxTimestamp = (%+v, %v)", got, err)
	}
}

// A process crash keeps a rolled segment whose directory entry was never
// synced; a flush after the restart must make that entry durable before the
// recovery point covers the segment.
func TestFlushAfterRestartSyncsUnsyncedSegmentEntries(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	var want []appended
	for l.SegmentCount() < 2 {
		want = append(want, appendLeader(t, l, 2, 100, 0))
	}
	flushAll(t, l, disk) // the epoch checkpoint is durable: reopening will not rewrite it
	firstRP := l.RecoveryPoint()
	for l.SegmentCount() < 4 {
		want = append(want, appendLeader(t, l, 2, 100, 0)) // rolls whose flushes never complete
	}
	disk.Crash(rand.New(rand.NewPCG(5, 5)), memdisk.CrashKeepAll)
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: firstRP})
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	disk.Crash(rand.New(rand.NewPCG(5, 6)), memdisk.CrashLoseAll)
	l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: rp})
	if n := checkPrefixOf(t, l, want); n != len(want) || l.LogEndOffset() != rp {
		t.Fatalf("kept %d of %d flushed batches, LEO %d, recovery point was %d", n, len(want), l.LogEndOffset(), rp)
	}
}
