package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

// readCountingDisk counts the bytes read from .log files, the segment
// bytes recovery reads.
type readCountingDisk struct {
	env.Disk
	logBytesRead *int64
}

func (d readCountingDisk) Open(path string, opts env.OpenOptions) (env.File, error) {
	f, err := d.Disk.Open(path, opts)
	if err != nil || !strings.HasSuffix(path, logSuffix) {
		return f, err
	}
	return readCountingFile{File: f, logBytesRead: d.logBytesRead}, nil
}

type readCountingFile struct {
	env.File
	logBytesRead *int64
}

func (f readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	*f.logBytesRead += int64(n)
	return n, err
}

// syncedActiveConfig gives a log several segments and an active one of
// many indexed batches.
func syncedActiveConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 32 << 10
	cfg.IndexIntervalBytes = 256
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// TestReopenAtTheRecoveryPointReadsNoSegmentBytes: a log flushed to its end
// and reopened with that recovery point, what a clean shutdown leaves,
// reads only the headers after each segment's last index entry (and after
// the batch holding its max timestamp), not the active segment's batches
// (SPEC.md §3.4), and then behaves exactly as a twin that was never
// closed: same max timestamp and its offset, same files, byte for byte,
// after more appends, rolls and a flush; with timestamps that grow, and
// (reading the headers after the batch holding the max timestamp, most of
// them then) that never grow or fall. The restart does not verify the
// whole active segment.
func TestReopenAtTheRecoveryPointReadsNoSegmentBytes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timestamp func(i int) int64
		// readsFewHeaders: the max timestamp is in the last batches.
		readsFewHeaders bool
	}{
		{"growing", func(i int) int64 { return int64(1000 + i) }, true},
		{"constant", func(int) int64 { return 1000 }, false},
		{"falling", func(i int) int64 { return int64(5000 - i) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reopenedLikeTwin(t, tc.timestamp, tc.readsFewHeaders)
		})
	}
}

func reopenedLikeTwin(t *testing.T, timestamp func(i int) int64, readsFewHeaders bool) {
	cfg := syncedActiveConfig()
	reopened, twin := memdisk.New(memdisk.Options{}), memdisk.New(memdisk.Options{})
	a := openLog(t, reopened, cfg, OpenOptions{NowMs: 1})
	b := openLog(t, twin, cfg, OpenOptions{NowMs: 1})
	appendBoth := func(from, to int) {
		for i := from; i < to; i++ {
			appendLeader(t, a, 3, timestamp(i), int32(i/40))
			appendLeader(t, b, 3, timestamp(i), int32(i/40))
		}
	}
	appendBoth(0, 400)
	flushAll(t, a, reopened)
	flushAll(t, b, twin)
	bases := a.SegmentBaseOffsets()
	activeBytes := a.active().bytes
	if len(bases) < 3 || activeBytes < 8<<10 {
		t.Fatalf("setup: %d segments, active one %d bytes", len(bases), activeBytes)
	}
	leo := a.LogEndOffset()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	var logBytesRead int64
	a = openLog(t, readCountingDisk{Disk: reopened, logBytesRead: &logBytesRead}, cfg,
		OpenOptions{RecoveryPoint: leo, NowMs: 2})
	// Each segment's first header and the headers after its last index
	// entry: well under two index intervals of headers per segment. (With
	// the max timestamp in an early batch, the headers from there on.)
	if limit := int64(len(bases)) * 2 * cfg.IndexIntervalBytes; readsFewHeaders && logBytesRead > limit {
		t.Fatalf("reopen read %d bytes of segments (active segment %d bytes), want at most %d", logBytesRead, activeBytes, limit)
	}
	got, want := a.active(), b.active()
	if a.LogEndOffset() != leo || a.RecoveryPoint() != leo {
		t.Fatalf("reopened: LEO %d, recovery point %d; want both %d", a.LogEndOffset(), a.RecoveryPoint(), leo)
	}
	if got.maxTimestamp != want.maxTimestamp || got.offsetOfMaxTimestamp != want.offsetOfMaxTimestamp {
		t.Fatalf("reopened: max timestamp %d at offset %d, twin %d at %d",
			got.maxTimestamp, got.offsetOfMaxTimestamp, want.maxTimestamp, want.offsetOfMaxTimestamp)
	}
	if got, want := a.Epochs().Entries(), b.Epochs().Entries(); len(got) != len(want) || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("epochs %v, twin %v", got, want)
	}

	appendBoth(400, 550)
	flushAll(t, a, reopened)
	flushAll(t, b, twin)
	if got, want := a.SegmentBaseOffsets(), b.SegmentBaseOffsets(); !equalInts(got, want) {
		t.Fatalf("segments %v, twin %v", got, want)
	}
	names, err := twin.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, _, ok := parseSegmentFileName(name); !ok {
			continue
		}
		got, _ := reopened.ReadFile(testDir + "/" + name)
		want, _ := twin.ReadFile(testDir + "/" + name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the twin's (%d bytes, twin %d)", name, len(got), len(want))
		}
	}
}

// TestBytesPastTheRecoveryPointAreVerified: an active segment holding more
// than the recovery point (appends after the last flush) is verified batch
// by batch, and a damaged batch there is cut, as after any crash.
func TestBytesPastTheRecoveryPointAreVerified(t *testing.T) {
	cfg := syncedActiveConfig()
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, cfg, OpenOptions{})
	var want []appended
	for i := 0; i < 30; i++ {
		want = append(want, appendLeader(t, l, 2, int64(100+i), 0))
	}
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	kept := len(want)
	for i := 0; i < 10; i++ {
		want = append(want, appendLeader(t, l, 2, int64(200+i), 0))
	}
	active := l.SegmentBaseOffsets()[len(l.SegmentBaseOffsets())-1]
	logPath := testDir + "/" + segmentFileName(active, logSuffix)
	disk.Crash(rand.New(rand.NewPCG(1, 1)), memdisk.CrashKeepAll)
	data, err := disk.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a bit in the CRC of the first batch past the recovery point.
	at := positionOfOffset(data, rp) + batch.LogOverheadBytes + 5
	if err := disk.FlipBit(logPath, at, 3); err != nil {
		t.Fatal(err)
	}
	var logBytesRead int64
	l = openLog(t, readCountingDisk{Disk: disk, logBytesRead: &logBytesRead}, cfg, OpenOptions{RecoveryPoint: rp})
	if n := checkPrefixOf(t, l, want); n != kept {
		t.Fatalf("recovery kept %d batches, want the %d below the recovery point", n, kept)
	}
	if logBytesRead < int64(len(data))-positionOfOffset(data, active) {
		t.Fatalf("recovery read %d bytes: it did not verify the active segment (%d bytes)", logBytesRead, len(data))
	}
}

// TestLogRestartedAtItsStartOffsetIsRecoveredUntilFlushed: a log found
// wholly below its log start offset restarts empty there, but its
// recovery point stays at the checkpoint's until a flush has synced the
// directory: a crash before that brings back the removed segment, which
// must be verified, not trusted as ending at the recovery point: open must
// not raise the recovery point to the new segment's base at once.
func TestLogRestartedAtItsStartOffsetIsRecoveredUntilFlushed(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 1, 100, 0)
	disk.Writeback() // on the medium, never synced
	disk.Crash(rand.New(rand.NewPCG(2, 2)), memdisk.CrashLoseAll)
	logPath := testDir + "/" + segmentFileName(0, logSuffix)
	// Damage in unsynced bytes: the batch's magic.
	if err := disk.FlipBit(logPath, batch.LogOverheadBytes+4, 0); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, testConfig(), OpenOptions{LogStartOffset: 1})
	if l.LogStartOffset() != 1 || l.LogEndOffset() != 1 {
		t.Fatalf("log spans [%d, %d), want [1, 1)", l.LogStartOffset(), l.LogEndOffset())
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d before any flush, want the checkpoint's 0", l.RecoveryPoint())
	}
	disk.Crash(rand.New(rand.NewPCG(3, 3)), memdisk.CrashLoseAll)
	l = openLog(t, disk, testConfig(), OpenOptions{LogStartOffset: 1, RecoveryPoint: l.RecoveryPoint()})
	if l.LogStartOffset() != 1 || l.LogEndOffset() != 1 {
		t.Fatalf("after the second crash the log spans [%d, %d), want [1, 1)", l.LogStartOffset(), l.LogEndOffset())
	}
	names, _ := disk.List(testDir)
	for _, name := range names {
		if base, suffix, ok := parseSegmentFileName(name); ok && suffix == logSuffix {
			data, _ := disk.ReadFile(testDir + "/" + name)
			if base < 1 || len(data) > 0 {
				t.Fatalf("segment %s (%d bytes) kept below the log start offset", name, len(data))
			}
		}
	}
	flushAll(t, l, disk)
	if l.RecoveryPoint() != 1 {
		t.Fatalf("recovery point %d after a flush, want 1", l.RecoveryPoint())
	}
}

// TestReopenAtTheRecoveryPointChecksTheTimeIndexEntry: the active
// segment's last time index entry, with a bit flipped that keeps it in
// order, no longer names a batch with its timestamp; the reopen sends the
// segment to recovery, which rebuilds the index, instead of taking the
// flipped timestamp for the segment's max, which MaxTimestamp would then
// answer.
func TestReopenAtTheRecoveryPointChecksTheTimeIndexEntry(t *testing.T) {
	cfg := syncedActiveConfig()
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	for i := 0; i < 60; i++ {
		appendLeader(t, l, 3, int64(1000+i), 0)
	}
	flushAll(t, l, disk)
	leo, want := l.LogEndOffset(), l.active().maxTimestamp
	base := l.active().baseOffset
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := joinPath(testDir, fmt.Sprintf("%020d.timeindex", base))
	f, err := disk.Open(path, env.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries := f.Size() / timeIndexEntryBytes
	if entries < 2 {
		t.Fatalf("setup: the active segment's time index has %d entries", entries)
	}
	last := make([]byte, 1)
	at := (entries - 1) * timeIndexEntryBytes // the timestamp's most significant byte
	if _, err := f.ReadAt(last, at); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt([]byte{last[0] ^ 1}, at); err != nil { // + 2^56: still in order
		t.Fatal(err)
	}
	f.Close()

	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: leo, NowMs: 2})
	if got := l.active().maxTimestamp; got != want {
		t.Fatalf("reopened with a flipped time index entry: max timestamp %d, want %d", got, want)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("reopened: LEO %d, want %d", l.LogEndOffset(), leo)
	}
}
