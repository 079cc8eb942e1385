package env

import (
	"log/slog"
	"strconv"
	"strings"
)

// Logger is the fourth door: where the core writes the log lines an operator
// reads (leader elections, ISR changes, truncations, storage failures, group
// rebalances). See SPEC.md §2.4.
//
// The core names a level, a constant message and key-value attributes; the
// environment decides everything else. In particular it stamps the time:
// realnet with the real clock, the simulator with virtual time. The core
// never reads a clock to log, which is why it does not take a *slog.Logger
// (whose methods read time.Now on every enabled line).
//
// Nothing may flow back: Log returns nothing, and an implementation must not
// call into the node, so a run logs or discards its lines and behaves the
// same. Log and Enabled are called on the node's event loop only.
type Logger interface {
	// Enabled reports whether lines at level are kept. The core asks before
	// it builds a line, so a discarded line costs one call.
	Enabled(level slog.Level) bool
	// Log records one line. attrs belongs to the Logger after the call (the
	// core builds a fresh slice for every line); the values in it are
	// copies or immutable, never the core's mutable state.
	Log(level slog.Level, msg string, attrs []slog.Attr)
}

// Log is the core's handle on a Logger, with the attributes its component
// binds to every line (With). The zero Log discards everything, so a core
// built without a Logger (most unit tests) logs nothing. Log is a small value:
// copy it into every component that logs.
type Log struct {
	logger Logger
	bound  []slog.Attr
}

// NewLog returns a Log writing to logger; a nil logger discards.
func NewLog(logger Logger) Log { return Log{logger: logger} }

// With returns a Log that adds attrs to every line, after the attributes
// already bound. The receiver is unchanged.
func (l Log) With(attrs ...slog.Attr) Log {
	if l.logger == nil || len(attrs) == 0 {
		return l
	}
	bound := make([]slog.Attr, 0, len(l.bound)+len(attrs))
	bound = append(bound, l.bound...)
	bound = append(bound, attrs...)
	return Log{logger: l.logger, bound: bound}
}

// Enabled reports whether a line at level would be kept. Call sites that
// must compute something to log (a sorted list, a formatted set) ask first.
func (l Log) Enabled(level slog.Level) bool {
	return l.logger != nil && l.logger.Enabled(level)
}

// Debug logs msg at slog.LevelDebug.
func (l Log) Debug(msg string, attrs ...slog.Attr) { l.log(slog.LevelDebug, msg, attrs) }

// Info logs msg at slog.LevelInfo.
func (l Log) Info(msg string, attrs ...slog.Attr) { l.log(slog.LevelInfo, msg, attrs) }

// Warn logs msg at slog.LevelWarn.
func (l Log) Warn(msg string, attrs ...slog.Attr) { l.log(slog.LevelWarn, msg, attrs) }

// Error logs msg at slog.LevelError.
func (l Log) Error(msg string, attrs ...slog.Attr) { l.log(slog.LevelError, msg, attrs) }

// log hands one line to the Logger. It copies attrs into a fresh slice and
// never lets the caller's slice escape, so the variadic slice at a call site
// stays on the stack and a disabled line allocates nothing
// (TestDisabledLogDoesNotAllocate).
func (l Log) log(level slog.Level, msg string, attrs []slog.Attr) {
	if !l.Enabled(level) {
		return
	}
	line := make([]slog.Attr, 0, len(l.bound)+len(attrs))
	line = append(line, l.bound...)
	line = append(line, attrs...)
	l.logger.Log(level, msg, line)
}

// IDs is an attribute holding broker or replica ids as Kafka's logs write
// them: "1,2,3".
func IDs(key string, ids []int32) slog.Attr {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	return slog.String(key, b.String())
}
