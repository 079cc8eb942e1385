package env_test

import (
	"errors"
	"log/slog"
	"testing"

	"strand/core/env"
)

// captured is a Logger that keeps every line at or above min.
type captured struct {
	min   slog.Level
	lines []capturedLine
}

type capturedLine struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
}

func (c *captured) Enabled(level slog.Level) bool { return level >= c.min }

func (c *captured) Log(level slog.Level, msg string, attrs []slog.Attr) {
	c.lines = append(c.lines, capturedLine{level, msg, attrs})
}

// A Log passes level, message and attributes through, bound attributes
// first; lines below the Logger's level never reach it.
func TestLogPassesBoundAttributesFirst(t *testing.T) {
	c := &captured{min: slog.LevelInfo}
	l := env.NewLog(c).With(slog.String("component", "replica"))
	l.Debug("hidden", slog.Int("n", 1))
	l.Warn("shrinking ISR", slog.Int64("offset", 7))
	l.Error("append failed", slog.Any("err", errors.New("boom")))
	if len(c.lines) != 2 {
		t.Fatalf("got %d lines, want 2 (Debug is below Info): %+v", len(c.lines), c.lines)
	}
	first := c.lines[0]
	if first.level != slog.LevelWarn || first.msg != "shrinking ISR" {
		t.Errorf("first line = %v %q, want WARN \"shrinking ISR\"", first.level, first.msg)
	}
	if len(first.attrs) != 2 || first.attrs[0].Key != "component" || first.attrs[1].Key != "offset" ||
		first.attrs[1].Value.Int64() != 7 {
		t.Errorf("first line's attrs = %v, want component then offset=7", first.attrs)
	}
	if c.lines[1].level != slog.LevelError || c.lines[1].attrs[1].Value.Any().(error).Error() != "boom" {
		t.Errorf("second line = %+v, want ERROR with err=boom", c.lines[1])
	}
}

// With does not change the Log it is called on, and two Logs derived from
// one do not share their bound attributes.
func TestLogWithDoesNotAlias(t *testing.T) {
	c := &captured{}
	base := env.NewLog(c).With(slog.Int("node", 1))
	a := base.With(slog.String("topic", "a"))
	b := base.With(slog.String("topic", "b"))
	base.Info("base")
	a.Info("a")
	b.Info("b")
	want := []string{"", "a", "b"}
	for i, line := range c.lines {
		var topic string
		for _, attr := range line.attrs {
			if attr.Key == "topic" {
				topic = attr.Value.String()
			}
		}
		if topic != want[i] {
			t.Errorf("line %q has topic %q, want %q", line.msg, topic, want[i])
		}
	}
}

// The zero Log and a Log over a nil Logger discard without panicking.
func TestZeroLogDiscards(t *testing.T) {
	var l env.Log
	l.With(slog.Int("x", 1)).Error("nobody hears this")
	if l.Enabled(slog.LevelError) {
		t.Error("the zero Log reports Error enabled")
	}
	env.NewLog(nil).Info("nor this")
}

// A disabled line allocates nothing, attributes included, so a call site on
// a warm path costs a call and a comparison when its level is off.
func TestDisabledLogDoesNotAllocate(t *testing.T) {
	l := env.NewLog(&captured{min: slog.LevelError}).With(slog.Int("node", 3))
	topic := "orders"
	err := errors.New("boom")
	allocs := testing.AllocsPerRun(100, func() {
		l.Info("became leader", slog.String("topic", topic), slog.Int("partition", 4),
			slog.Int64("leader_epoch", 9), slog.Any("err", err))
	})
	if allocs != 0 {
		t.Errorf("a disabled Info allocates %.0f times, want 0", allocs)
	}
}
