package main

import (
	"context"
	"errors"
	"log/slog"

	"strand/core/config"
)

// errServeNotImplemented is what runBroker reports until the broker exists.
var errServeNotImplemented = errors.New("serving is not implemented yet")

// runBroker runs the node described by cfg, whose log directories are
// formatted for clusterID, until ctx is cancelled (SIGTERM or SIGINT), then
// shuts down gracefully and returns. This is the one call that wires the
// broker (realnet + core + diskio) into `strand serve`; until then it
// reports errServeNotImplemented.
func runBroker(ctx context.Context, cfg config.Broker, clusterID string, logger *slog.Logger) error {
	return errServeNotImplemented
}
