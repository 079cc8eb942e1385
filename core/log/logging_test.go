package log

import (
	"errors"
	"log/slog"
	"strconv"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// lines is an env.Logger keeping every line.
type lines []line

type line struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *lines) Enabled(slog.Level) bool { return true }

func (l *lines) Log(level slog.Level, msg string, attrs []slog.Attr) {
	m := map[string]string{}
	for _, a := range attrs {
		m[a.Key] = a.Value.String()
	}
	*l = append(*l, line{level, msg, m})
}

// TestRetentionLogsEachDeletedSegment: every segment retention deletes is
// logged at INFO with its offsets and the pass's reason, in order.
func TestRetentionLogsEachDeletedSegment(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 100
	l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
	var got lines
	l.SetLogger(env.NewLog(&got))
	appendSegments(t, l, 80)
	segments := l.SegmentBaseOffsets()
	hw := segments[2] + 1 // only the first two segments may go
	if deleted, err := l.ApplyRetention(1_000_000, hw); err != nil || deleted != 2 {
		t.Fatalf("deleted %d (%v), want 2", deleted, err)
	}
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want one per deleted segment: %+v", len(got), got)
	}
	for i, g := range got {
		if g.level != slog.LevelInfo || g.msg != "deleting segment" ||
			g.attrs["reason"] != "retention.ms breached by the segment's largest timestamp" ||
			g.attrs["base_offset"] != strconv.FormatInt(segments[i], 10) ||
			g.attrs["next_offset"] != strconv.FormatInt(segments[i+1], 10) {
			t.Errorf("line %d = %+v, want INFO deleting segment [%d, %d) by retention.ms", i, g, segments[i], segments[i+1])
		}
	}
}

// TestStorageFailureLoggedOnce: the failure that takes a log offline is
// logged at ERROR once; later calls return the same error silently.
func TestStorageFailureLoggedOnce(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	var got lines
	l.SetLogger(env.NewLog(&got))
	cause := errors.New("device gone")
	first := l.fail(cause)
	if second := l.fail(errors.New("another")); second != first {
		t.Fatalf("second failure returned %v, want the first %v", second, first)
	}
	if len(got) != 1 || got[0].level != slog.LevelError || got[0].attrs["err"] != "device gone" {
		t.Fatalf("logged %+v, want one ERROR line with err=device gone", got)
	}
}
