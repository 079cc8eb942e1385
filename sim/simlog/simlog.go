// Package simlog is the simulator's env.Logger: each simulated node keeps
// the last lines its core logged, stamped with virtual time, so that a
// failing seed's report can show what every node said before the violation.
//
// Logging must not change a run: a Ring draws no randomness, schedules
// nothing, writes nothing to the trace and never calls back into the node,
// so a seed's trace hash is the same whether its lines are kept or
// discarded (sim/cluster's TestLoggingDoesNotChangeTheRun).
//
// This package must not read the real clock or start goroutines.
package simlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"strand/core/env"
	"strand/sim/sched"
)

// Ring is one node's env.Logger. It formats each kept line at once (the
// core's attribute values are only guaranteed for the duration of the call)
// and keeps the last linesMax of them.
type Ring struct {
	s        *sched.Scheduler
	level    slog.Level
	linesMax int
	// lines holds up to linesMax lines; next is where the next one goes
	// once it is full.
	lines []string
	next  int
	// logged counts every line kept, including those since overwritten.
	logged uint64
	buf    bytes.Buffer
	text   slog.Handler
}

var _ env.Logger = (*Ring)(nil)

// New returns a Ring keeping the last linesMax lines at level or above,
// stamped with s's virtual time.
func New(s *sched.Scheduler, level slog.Level, linesMax int) *Ring {
	if linesMax < 1 {
		panic(fmt.Sprintf("simlog: linesMax %d is below 1", linesMax))
	}
	r := &Ring{s: s, level: level, linesMax: linesMax}
	// A zero record time is left out by the text handler; the virtual time
	// goes in front instead.
	r.text = slog.NewTextHandler(&r.buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return r
}

// Enabled reports whether lines at level are kept.
func (r *Ring) Enabled(level slog.Level) bool { return level >= r.level }

// Log formats and keeps one line: "t=<virtual seconds>s level=... msg=..."
// and the attributes, in slog's text format.
func (r *Ring) Log(level slog.Level, msg string, attrs []slog.Attr) {
	if !r.Enabled(level) {
		return
	}
	r.buf.Reset()
	fmt.Fprintf(&r.buf, "t=%.6fs ", float64(r.s.NowNs())/1e9)
	var rec slog.Record
	rec = slog.NewRecord(rec.Time, level, msg, 0)
	rec.AddAttrs(attrs...)
	// The text handler writing to a bytes.Buffer cannot fail.
	_ = r.text.Handle(context.Background(), rec)
	line := string(bytes.TrimSuffix(r.buf.Bytes(), []byte("\n")))
	r.logged++
	if len(r.lines) < r.linesMax {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % r.linesMax
}

// Lines returns the kept lines, oldest first, in a fresh slice.
func (r *Ring) Lines() []string {
	out := make([]string, 0, len(r.lines))
	out = append(out, r.lines[r.next:]...)
	return append(out, r.lines[:r.next]...)
}

// Logged counts the lines logged at or above the Ring's level, including
// those no longer kept.
func (r *Ring) Logged() uint64 { return r.logged }
