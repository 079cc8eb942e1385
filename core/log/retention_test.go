package log

import (
	"testing"

	"strand/sim/memdisk"
)

// appendSegments fills the log with batches of timestamps 1000, 1001, ...
// and returns them.
func appendSegments(t *testing.T, l *Log, batches int) []appended {
	var out []appended
	for i := 0; i < batches; i++ {
		out = append(out, appendLeader(t, l, 2, int64(1000+i), 0))
	}
	return out
}

func TestRetentionByTimeRespectsHighWatermark(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 100
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	want := appendSegments(t, l, 80)
	segments := l.SegmentBaseOffsets()
	if len(segments) < 4 {
		t.Fatalf("need several segments, have %v", segments)
	}
	// Everything is old, but the HW is inside the third segment: only the
	// first two may go.
	hw := segments[2] + 1
	deleted, err := l.ApplyRetention(1_000_000, hw)
	if err != nil || deleted != 2 {
		t.Fatalf("deleted %d (%v), want 2", deleted, err)
	}
	if l.LogStartOffset() != segments[2] {
		t.Fatalf("log start %d, want %d", l.LogStartOffset(), segments[2])
	}
	// With the HW at the LEO, everything but the active segment goes.
	deleted, _ = l.ApplyRetention(1_000_000, l.LogEndOffset())
	if l.SegmentCount() != 1 || deleted != len(segments)-3 {
		t.Fatalf("deleted %d, %d segments remain", deleted, l.SegmentCount())
	}
	got := readAll(t, l)
	first := len(want) - len(got)
	for i := range got {
		if string(got[i]) != string(want[first+i].bytes) {
			t.Fatalf("retained batch %d differs", i)
		}
	}
	if _, err := l.Read(0, 100, l.LogEndOffset(), true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of a deleted offset: %v", err)
	}
}

func TestRetentionByTimeKeepsRecentSegments(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 100
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	appendSegments(t, l, 80) // timestamps 1000..1079
	// At now=1150 a segment is older than 100 ms iff its max timestamp < 1050.
	deleted, err := l.ApplyRetention(1150, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if deleted == 0 || l.LogStartOffset() == 0 {
		t.Fatal("no segment was deleted")
	}
	if kept := l.segments[0].maxTimestamp; kept < 1050 {
		t.Fatalf("a segment with max timestamp %d, older than retention.ms, was kept", kept)
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 6000
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	appendSegments(t, l, 100)
	before := l.SizeBytes()
	deleted, err := l.ApplyRetention(0, l.LogEndOffset())
	if err != nil || deleted == 0 {
		t.Fatalf("deleted %d: %v", deleted, err)
	}
	// Kafka's rule: delete the oldest segments while the log stays at
	// least retention.bytes without them.
	if l.SizeBytes() < cfg.RetentionBytes {
		t.Fatalf("size %d below retention.bytes %d (was %d): deleted too much", l.SizeBytes(), cfg.RetentionBytes, before)
	}
	if l.SizeBytes()-l.segments[0].bytes >= cfg.RetentionBytes {
		t.Fatalf("size %d: the oldest segment (%d bytes) should have gone too", l.SizeBytes(), l.segments[0].bytes)
	}
}

func TestAdvanceStartOffsetDeletesWholeSegmentsLater(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	appendSegments(t, l, 80)
	segments := l.SegmentBaseOffsets()
	target := segments[1] + 3
	if err := l.AdvanceStartOffset(target); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != target {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	if _, err := l.Read(target-1, 100, l.LogEndOffset(), true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the advanced start: %v", err)
	}
	deleted, _ := l.ApplyRetention(0, l.LogEndOffset())
	if deleted != 1 || l.SegmentBaseOffsets()[0] != segments[1] || l.LogStartOffset() != target {
		t.Fatalf("deleted %d, segments %v, start %d", deleted, l.SegmentBaseOffsets(), l.LogStartOffset())
	}
	if err := l.AdvanceStartOffset(l.LogEndOffset() + 1); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("advance beyond the LEO: %v", err)
	}
}
