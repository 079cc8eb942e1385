package realnet

import (
	"context"
	"log/slog"
	"time"

	"strand/core/env"
)

// coreLogger is the core's env.Logger in a real process: the node's
// *slog.Logger (its caller binds the node id: cmd/strand adds node.id),
// each line stamped with the real time here, since the core reads no clock
// to log. It runs on the event loop, in the core's call: a slow handler
// (stderr) delays the loop, which is why the core logs only state changes,
// never per request.
type coreLogger struct{ handler slog.Handler }

var _ env.Logger = coreLogger{}

// newCoreLogger wraps logger for the core.
func newCoreLogger(logger *slog.Logger) env.Log {
	return env.NewLog(coreLogger{handler: logger.Handler()})
}

// Enabled reports whether the handler keeps lines at level.
func (l coreLogger) Enabled(level slog.Level) bool {
	return l.handler.Enabled(context.Background(), level)
}

// Log stamps the line with the time now and hands it to the handler. A
// handler's error (a closed stderr) is dropped: logging must not fail the
// node.
func (l coreLogger) Log(level slog.Level, msg string, attrs []slog.Attr) {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = l.handler.Handle(context.Background(), r)
}
