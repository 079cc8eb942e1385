package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"strand/core/config"
	"strand/core/metadata"
	"strand/realnet/auth"
)

// format is `strand format --config FILE [--cluster-id ID]
// [--ignore-formatted] [--add-scram SPEC ...]`, Strand's kafka-storage.sh
// format: it writes
// meta.properties into every log directory of the config, and says one
// thing, on stdout when it succeeds (status 0), on stderr when it refuses
// (status 1, nothing written): as Kafka, a directory already formatted is
// refused unless --ignore-formatted, which leaves formatted directories as
// they are (after checking that they belong to this node and cluster) and
// formats the others. A directory another process uses (its lock is held:
// a running node) is refused whatever the flags, naming that process's
// pid; so is one that belongs to another node or cluster, holds other
// files, or cannot be read or written. Usage errors exit 2.
//
// --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (KIP-900;
// iterations=N, or salt= and saltedpassword= in base64 instead of
// password=) writes the bootstrap file beside the metadata log of the
// first log directory when it formats that directory: the credentials
// the cluster's first active controller appends before anything else, so
// that nodes can authenticate to each other with SCRAM from their first
// start. Format every controller with the same credentials.
func format(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("strand format", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "server.properties file (default: the embedded single-node defaults)")
	clusterID := flags.String("cluster-id", "", "cluster id to write (default: the one already on disk, else derived from controller.quorum.voters)")
	ignoreFormatted := flags.Bool("ignore-formatted", false, "leave log dirs already formatted for this node and cluster as they are, and format the others")
	overrides := overrideFlags{}
	flags.Var(overrides, "override", "set a config key, key=value (repeatable)")
	var addScram stringList
	flags.Var(&addScram, "add-scram", "a SCRAM credential to bootstrap the cluster with, 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "strand format: unexpected arguments %v\n", flags.Args())
		return 2
	}
	bootstrap, err := bootstrapRecords(addScram)
	if err != nil {
		fmt.Fprintf(stderr, "strand format: --add-scram: %v\n", err)
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
	if len(bootstrap) > 0 {
		if !slices.Contains(dirs.formatted, cfg.LogDirs[0]) {
			fmt.Fprintf(stderr, "strand format: --add-scram: log dir %s, which holds the metadata log, was formatted before: its cluster has its credentials already (add more with strand configs); nothing written\n", cfg.LogDirs[0])
			return 1
		}
		if err := writeDurably(filepath.Join(cfg.LogDirs[0], "metadata"), metadata.BootstrapFileName, metadata.EncodeBootstrap(bootstrap)); err != nil {
			fmt.Fprintf(stderr, "strand format: writing the bootstrap credentials: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "bootstrap SCRAM credentials: %s\n", describeBootstrap(bootstrap))
	}
	if len(dirs.formatted) == 0 {
		fmt.Fprintf(stdout, "all %d log dir(s) are already formatted for node.id %d, cluster.id %s\n", len(cfg.LogDirs), cfg.NodeID, dirs.clusterID)
		return 0
	}
	fmt.Fprintf(stdout, "formatted %d log dir(s) for node.id %d, cluster.id %s: %s\n",
		len(dirs.formatted), cfg.NodeID, dirs.clusterID, strings.Join(dirs.formatted, ", "))
	return 0
}

// bootstrapRecords makes the credential records of the --add-scram
// specs: a user has at most one credential per mechanism.
func bootstrapRecords(specs []string) ([]metadata.Record, error) {
	var records []metadata.Record
	seen := map[metadata.ScramUser]bool{}
	for _, text := range specs {
		spec, rest, err := parseScramSpec(strings.TrimSpace(text))
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf("%q: one credential per --add-scram", text)
		}
		u := metadata.ScramUser{Name: spec.attrs["name"], Mechanism: spec.mechanism}
		if err := metadata.ValidateScramUser(u); err != nil {
			return nil, fmt.Errorf("%q: name=: %w", text, err)
		}
		if seen[u] {
			return nil, fmt.Errorf("user %s has two %v credentials", u.Name, u.Mechanism)
		}
		seen[u] = true
		cred, err := bootstrapCredential(spec)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", text, err)
		}
		records = append(records, metadata.NewUserScramCredentialRecord(u, cred))
	}
	return records, nil
}

// bootstrapCredential is a spec's credential: from password= (a fresh
// salt) or from salt= and saltedpassword=.
func bootstrapCredential(spec scramSpec) (metadata.ScramCredential, error) {
	iterations, err := spec.iterations()
	if err != nil {
		return metadata.ScramCredential{}, err
	}
	if _, ok := spec.attrs["password"]; ok {
		if err := spec.only("name", "password", "iterations"); err != nil {
			return metadata.ScramCredential{}, err
		}
		if spec.attrs["password"] == "" {
			return metadata.ScramCredential{}, fmt.Errorf("%v: empty password", spec.mechanism)
		}
		return auth.NewScramCredential(spec.mechanism, spec.attrs["password"], iterations)
	}
	if err := spec.only("name", "salt", "saltedpassword", "iterations"); err != nil {
		return metadata.ScramCredential{}, err
	}
	salt, err := spec.decodeBase64Attr("salt")
	if err != nil {
		return metadata.ScramCredential{}, err
	}
	salted, err := spec.decodeBase64Attr("saltedpassword")
	if err != nil {
		return metadata.ScramCredential{}, err
	}
	if len(salted) != spec.mechanism.KeyBytes() || len(salt) > metadata.ScramSaltBytesMax {
		return metadata.ScramCredential{}, fmt.Errorf("%v: saltedpassword of %d bytes (want %d) or salt of %d (at most %d)",
			spec.mechanism, len(salted), spec.mechanism.KeyBytes(), len(salt), metadata.ScramSaltBytesMax)
	}
	return metadata.NewScramCredential(spec.mechanism, salt, salted, iterations), nil
}

// describeBootstrap names the bootstrap credentials, for format's output.
func describeBootstrap(records []metadata.Record) string {
	var parts []string
	for _, rec := range records {
		r := rec.(*metadata.UserScramCredentialRecord)
		parts = append(parts, fmt.Sprintf("%s %v (%d iterations)", r.Name, r.Mechanism, r.Iterations))
	}
	return strings.Join(parts, ", ")
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
