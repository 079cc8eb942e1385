package simlog_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"strand/core/env"
	"strand/sim/sched"
	"strand/sim/simlog"
)

// A Ring stamps lines with virtual time, drops lines below its level, and
// keeps only the newest linesMax, oldest first.
func TestRingKeepsTheNewestLinesWithVirtualTime(t *testing.T) {
	s := sched.New(sched.Options{})
	r := simlog.New(s, slog.LevelInfo, 3)
	l := env.NewLog(r).With(slog.Int("node", 2))
	for i := 0; i < 5; i++ {
		i := i
		s.After(int64(i+1)*1e9, func() {
			l.Info("became leader", slog.Int("partition", i), slog.Any("err", errors.New("x y")))
			l.Debug("not kept")
		})
	}
	for s.Step() {
	}
	lines := r.Lines()
	if len(lines) != 3 || r.Logged() != 5 {
		t.Fatalf("kept %d lines of %d logged, want 3 of 5:\n%s", len(lines), r.Logged(), strings.Join(lines, "\n"))
	}
	for i, line := range lines {
		want := fmt.Sprintf(`t=%d.000000s level=INFO msg="became leader" node=2 partition=%d err="x y"`, i+3, i+2)
		if line != want {
			t.Errorf("line %d = %q, want %q", i, line, want)
		}
	}
}
