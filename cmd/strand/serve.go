package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
)

// serve is `strand serve [--config FILE] [--override key=value ...]`: it
// loads and validates the configuration (the embedded single-node defaults
// without --config, which is what `make run` uses), logs every key Strand
// ignores, locks every log directory (a directory another process uses
// refuses the start, naming it and that process's pid), formats the empty
// ones and checks formatted ones, then runs the broker until SIGTERM or
// SIGINT; the locks are held until the broker has stopped. A log directory other than the first
// that cannot be read or formatted starts offline (prepareLogDirs), and the
// broker logs it at ERROR.
func serve(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serveUntil(ctx, args, stdout, stderr)
}

// serveUntil is serve with the stop signal given as ctx, so that tests can
// run the whole command and stop it.
func serveUntil(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("strand serve", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "server.properties file (default: the embedded single-node defaults)")
	overrides := overrideFlags{}
	flags.Var(overrides, "override", "set a config key, key=value (repeatable)")
	defer cpuProfileFlag(flags)()
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "strand serve: unexpected arguments %v\n", flags.Args())
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, warnings, err := loadConfig(*configPath, overrides)
	logWarnings(logger, warnings)
	if err != nil {
		logger.Error("invalid configuration", "err", err)
		return 1
	}
	dirs, err := prepareLogDirs(cfg, prepareOptions{})
	if err != nil {
		logger.Error("log directories not usable", "err", err)
		return 1
	}
	for _, dir := range dirs.alreadyFormatted {
		logger.Info("log dir already formatted", "dir", dir, "cluster.id", dirs.clusterID, "node.id", cfg.NodeID)
	}
	for _, dir := range dirs.formatted {
		logger.Info("formatted log dir", "dir", dir, "cluster.id", dirs.clusterID, "node.id", cfg.NodeID)
	}
	logger.Info("starting", "node.id", cfg.NodeID, "process.roles", cfg.Roles.String(), "cluster.id", dirs.clusterID)

	err = runBroker(ctx, cfg, dirs, logger)
	if err != nil {
		logger.Error("broker stopped", "err", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}
