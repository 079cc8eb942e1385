package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"strand/core/config"
)

// format is `strand format --config FILE [--cluster-id ID]`, Strand's
// kafka-storage.sh format: it writes meta.properties into every log
// directory of the config. Directories already formatted for this node and
// cluster are left as they are, so formatting twice is harmless; a directory
// that belongs to another node or cluster, or holds other files, makes it
// refuse without writing anything.
func format(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("strand format", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "server.properties file (default: the embedded single-node defaults)")
	clusterID := flags.String("cluster-id", "", "cluster id to write (default: the one already on disk, else derived from controller.quorum.voters)")
	overrides := overrideFlags{}
	flags.Var(overrides, "override", "set a config key, key=value (repeatable)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "strand format: unexpected arguments %v\n", flags.Args())
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, warnings, err := loadConfig(*configPath, overrides)
	logWarnings(logger, warnings)
	if err != nil {
		fmt.Fprintf(stderr, "strand format: %v\n", err)
		return 1
	}
	id, offline, err := prepareLogDirs(cfg, *clusterID, logger)
	if err != nil {
		fmt.Fprintf(stderr, "strand format: %v\n", err)
		return 1
	}
	// serve starts without such a directory; format formats them all.
	for _, dir := range cfg.LogDirs {
		if cause := offline[dir]; cause != nil {
			fmt.Fprintf(stderr, "strand format: log dir %s: %v\n", dir, cause)
			return 1
		}
	}
	fmt.Fprintf(stdout, "formatted %d log dir(s) for node.id %d, cluster.id %s\n", len(cfg.LogDirs), cfg.NodeID, id)
	return 0
}

// randomClusterID prints a fresh random cluster id, for
// `strand format --cluster-id` on every node of a cluster.
func randomClusterID(stdout, stderr io.Writer) int {
	var random [16]byte
	if _, err := rand.Read(random[:]); err != nil {
		fmt.Fprintf(stderr, "strand random-cluster-id: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, config.NewClusterID(random))
	return 0
}
