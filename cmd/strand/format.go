package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"strand/core/config"
)

// format is `strand format --config FILE [--cluster-id ID]
// [--ignore-formatted]`, Strand's kafka-storage.sh format: it writes
// meta.properties into every log directory of the config, and says one
// thing, on stdout when it succeeds (status 0), on stderr when it refuses
// (status 1, nothing written): as Kafka, a directory already formatted is
// refused unless --ignore-formatted, which leaves formatted directories as
// they are (after checking that they belong to this node and cluster) and
// formats the others. A directory another process uses (its lock is held:
// a running node) is refused whatever the flags, naming that process's
// pid; so is one that belongs to another node or cluster, holds other
// files, or cannot be read or written. Usage errors exit 2.
func format(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("strand format", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "server.properties file (default: the embedded single-node defaults)")
	clusterID := flags.String("cluster-id", "", "cluster id to write (default: the one already on disk, else derived from controller.quorum.voters)")
	ignoreFormatted := flags.Bool("ignore-formatted", false, "leave log dirs already formatted for this node and cluster as they are, and format the others")
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
	// serve starts without an unusable directory; format formats them all.
	dirs, err := prepareLogDirs(cfg, prepareOptions{clusterID: *clusterID, allUsable: true, refuseFormatted: !*ignoreFormatted})
	if err != nil {
		fmt.Fprintf(stderr, "strand format: %v\n", err)
		return 1
	}
	defer dirs.release()
	if len(dirs.formatted) == 0 {
		fmt.Fprintf(stdout, "all %d log dir(s) are already formatted for node.id %d, cluster.id %s\n", len(cfg.LogDirs), cfg.NodeID, dirs.clusterID)
		return 0
	}
	fmt.Fprintf(stdout, "formatted %d log dir(s) for node.id %d, cluster.id %s: %s\n",
		len(dirs.formatted), cfg.NodeID, dirs.clusterID, strings.Join(dirs.formatted, ", "))
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
