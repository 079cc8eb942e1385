package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"strand/core/config"
	"strand/realnet"
)

// shutdownTimeout bounds the controlled shutdown after SIGTERM: long enough
// for the controller to move leaderships away, short enough that an
// operator's stop never hangs (Kafka's controlled.shutdown takes seconds).
const shutdownTimeout = 30 * time.Second

// runBroker runs the node described by cfg, whose log directories dirs
// prepared (formatted for its cluster id, locked, but those offline),
// until ctx is cancelled (SIGTERM or SIGINT), then shuts down gracefully
// (controlled shutdown bounded by shutdownTimeout) and returns. The node
// takes over the locks and releases them once it has stopped.
func runBroker(ctx context.Context, cfg config.Broker, dirs *logDirSet, logger *slog.Logger) error {
	logger = logger.With("node.id", int32(cfg.NodeID))
	node, err := realnet.Start(realnet.Options{Config: cfg, Logger: logger, ClusterID: dirs.clusterID,
		OfflineLogDirs: dirs.offline, LogDirLocks: dirs.locks})
	if err != nil {
		return fmt.Errorf("starting node %d (cluster %s): %w", cfg.NodeID, dirs.clusterID, err)
	}
	logger.Info("serving", "cluster.id", dirs.clusterID)
	<-ctx.Done()
	logger.Info("shutting down", "timeout", shutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := node.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down node %d: %w", cfg.NodeID, err)
	}
	return nil
}
