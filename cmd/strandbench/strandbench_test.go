package main

import (
	"math"
	"os"
	"testing"
	"time"

	"strand/core/batch"
	"strand/diskio"
)

func TestMedianAndPairedRatio(t *testing.T) {
	second := time.Second
	limit := series{{bytes: 100e6, elapsed: second}, {bytes: 300e6, elapsed: second}, {bytes: 200e6, elapsed: second}}
	subject := series{{bytes: 90e6, elapsed: second}, {bytes: 150e6, elapsed: second}, {bytes: 160e6, elapsed: second}}
	if got := limit.median(); got != 200 {
		t.Errorf("median of 100, 300, 200 MB/s = %v, want 200", got)
	}
	if got := limit[:2].median(); got != 200 {
		t.Errorf("median of 100, 300 MB/s = %v, want 200", got)
	}
	// Pair ratios 0.9, 0.5, 0.8: the median pairs each run with its own
	// limit, not with the limit's median.
	if got := pairedRatio(subject, limit, run.mbPerSec); math.Abs(got-0.8) > 1e-9 {
		t.Errorf("paired ratio = %v, want 0.8", got)
	}
}

func TestGoalVerdict(t *testing.T) {
	g := goal{ratioMin: 0.8}
	for _, c := range []struct {
		ratio float64
		want  string
	}{{0.79, "FAIL"}, {0.8, "PASS"}, {1.2, "PASS"}} {
		if got := g.verdict(c.ratio); got != c.want {
			t.Errorf("goal >= 0.8, ratio %v: %s, want %s", c.ratio, got, c.want)
		}
	}
	if got := (goal{}).verdict(0.1); got != "info" {
		t.Errorf("no goal: %s, want info", got)
	}
}

func TestChooseSections(t *testing.T) {
	if got, err := chooseSections("all"); err != nil || len(got) != len(sections) {
		t.Errorf("all: %d sections, %v", len(got), err)
	}
	if got, err := chooseSections("log"); err != nil || len(got) != 1 || got[0].name != "log" {
		t.Errorf("log: %v, %v", got, err)
	}
	if _, err := chooseSections("log,nope"); err == nil {
		t.Error("an unknown section was accepted")
	}
}

func TestBuildBatchFitsTarget(t *testing.T) {
	for _, target := range batchBytesTargets {
		b, records := buildBatch(target, 1_700_000_000_000)
		h, err := batch.Verify(b)
		if err != nil {
			t.Fatalf("target %d: %v", target, err)
		}
		if len(b) > target || int(h.RecordCount) != records {
			t.Errorf("target %d: %d bytes, %d records (header says %d)", target, len(b), records, h.RecordCount)
		}
		// One more record must not fit: the batch is as full as the target allows.
		if len(b)+recordValueBytes <= target {
			t.Errorf("target %d: batch of %d bytes leaves room for another record", target, len(b))
		}
	}
}

// TestLogRunsRoundTrip runs the section's measurements on a few megabytes:
// every byte appended is read back, through the log and raw, and nothing is
// left behind.
func TestLogRunsRoundTrip(t *testing.T) {
	root := t.TempDir()
	loop := newEventLoop()
	disk, err := diskio.New(root, diskio.Options{Post: loop.post})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	b := &logBench{env: &benchEnv{root: root, reps: 1}, loop: loop, disk: disk}
	batchBytes, _ := buildBatch(16<<10, 1_700_000_000_000)
	batches := b.newBatchRing(batchBytes)
	for _, fsync := range []bool{false, true} {
		appended, l, err := b.appendRun(batches, 200, fsync)
		if err != nil {
			t.Fatalf("fsync=%v: %v", fsync, err)
		}
		if want := int64(200 * len(batchBytes)); appended.bytes != want || appended.elapsed <= 0 {
			t.Errorf("fsync=%v: appended %v, want %d bytes", fsync, appended, want)
		}
		if fsync && l.RecoveryPoint() != l.LogEndOffset() {
			t.Errorf("after the synced run the recovery point is %d, LEO %d", l.RecoveryPoint(), l.LogEndOffset())
		}
		read, err := b.readRun(l)
		if err != nil || read.bytes != appended.bytes {
			t.Errorf("fsync=%v: read %v, %v", fsync, read, err)
		}
		raw, err := b.rawReadLog(l)
		if err != nil || raw.bytes != appended.bytes {
			t.Errorf("fsync=%v: raw read %v, %v", fsync, raw, err)
		}
		if _, err := b.discard(l, 0); err != nil {
			t.Fatal(err)
		}
	}
	synced, err := rawWriteSyncedAtEnd(root, 4096, 1<<20)
	if err != nil || synced.bytes != 1<<20 {
		t.Errorf("raw synced write: %v, %v", synced, err)
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Errorf("left behind in %s: %v, %v", root, entries, err)
	}
}

func TestMemoryKiB(t *testing.T) {
	anon, file, err := memoryKiB()
	if err != nil || anon <= 0 || file <= 0 {
		t.Errorf("RssAnon %d kB, RssFile %d kB, %v", anon, file, err)
	}
}
