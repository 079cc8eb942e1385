package main

// strand configs, after kafka-configs.sh, for users' SCRAM credentials
// (topic configs have `strand topics alter-config`):
//
//	strand configs --alter --entity-type users --entity-name alice \
//	    --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
//	strand configs --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
//	strand configs --describe --entity-type users [--entity-name alice]
//
// kadm derives the salted password (PBKDF2 over a fresh salt) on this
// side: the password never travels. Each credential is its own
// AlterUserScramCredentials request, because the controller refuses two
// changes of one user in one request (DUPLICATE_RESOURCE, as Kafka's
// KRaft controller does, where kafka-configs.sh then fails on its own
// documented example).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/metadata"
)

const configsUsage = `usage: strand configs (--alter | --describe) --entity-type users [--entity-name USER] [flags]

  --alter     --entity-name USER --add-config 'SCRAM-SHA-256=[iterations=8192,password=SECRET],SCRAM-SHA-512=[password=SECRET]'
              --entity-name USER --delete-config 'SCRAM-SHA-256,SCRAM-SHA-512'
  --describe  [--entity-name USER]   the mechanisms and iteration counts of the users' SCRAM credentials

Takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE and --timeout.
Topic configs: strand topics alter-config.
`

func configs(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, configsUsage)
		return 0
	}
	return finish("configs", stderr, configsRun(args, stdout, stderr))
}

func configsRun(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("configs", stderr)
	cf := addClientFlags(flags)
	alter := flags.Bool("alter", false, "add or delete the entity's configs")
	describe := flags.Bool("describe", false, "show the entity's configs")
	entityType := flags.String("entity-type", "", "the kind of entity: users")
	entityName := flags.String("entity-name", "", "the user")
	addConfig := flags.String("add-config", "", "credentials to set, MECHANISM=[iterations=N,password=P],...")
	deleteConfig := flags.String("delete-config", "", "credentials to delete, MECHANISM,...")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	switch {
	case *alter == *describe:
		return usageErrorf("give exactly one of --alter and --describe\n%s", configsUsage)
	case *entityType != "users":
		return usageErrorf("--entity-type %q: strand configs manages users' SCRAM credentials (--entity-type users); topic configs: strand topics alter-config", *entityType)
	case *alter && *entityName == "":
		return usageErrorf("--alter needs --entity-name")
	case *alter && *addConfig == "" && *deleteConfig == "":
		return usageErrorf("--alter needs --add-config or --delete-config")
	case *describe && (*addConfig != "" || *deleteConfig != ""):
		return usageErrorf("--add-config and --delete-config go with --alter")
	}
	var upserts []kadm.UpsertSCRAM
	var deletes []kadm.DeleteSCRAM
	if *alter {
		var err error
		if upserts, err = scramUpserts(*entityName, *addConfig); err != nil {
			return &usageError{err.Error()}
		}
		if deletes, err = scramDeletes(*entityName, *deleteConfig); err != nil {
			return &usageError{err.Error()}
		}
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	if *describe {
		return describeScram(ctx, adm, *entityName, stdout)
	}
	for _, d := range deletes {
		if err := alterScram(ctx, adm, []kadm.DeleteSCRAM{d}, nil); err != nil {
			return err
		}
	}
	for _, u := range upserts {
		if err := alterScram(ctx, adm, nil, []kadm.UpsertSCRAM{u}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Completed updating config for user %s.\n", *entityName)
	return nil
}

// scramUpserts reads --add-config: iterations (default 4096) and password
// per mechanism.
func scramUpserts(user, text string) ([]kadm.UpsertSCRAM, error) {
	specs, err := parseScramSpecs(text)
	if err != nil {
		return nil, fmt.Errorf("--add-config: %w", err)
	}
	var out []kadm.UpsertSCRAM
	for _, s := range specs {
		if err := s.only("iterations", "password"); err != nil {
			return nil, fmt.Errorf("--add-config: %w", err)
		}
		iterations, err := s.iterations()
		if err != nil {
			return nil, fmt.Errorf("--add-config: %w", err)
		}
		password := s.attrs["password"]
		if password == "" {
			return nil, fmt.Errorf("--add-config: %v needs password=", s.mechanism)
		}
		if slices.ContainsFunc(out, func(u kadm.UpsertSCRAM) bool { return u.Mechanism == kadmMechanism(s.mechanism) }) {
			return nil, fmt.Errorf("--add-config: %v given twice", s.mechanism)
		}
		out = append(out, kadm.UpsertSCRAM{User: user, Mechanism: kadmMechanism(s.mechanism), Iterations: iterations, Password: password})
	}
	return out, nil
}

// scramDeletes reads --delete-config: mechanism names.
func scramDeletes(user, text string) ([]kadm.DeleteSCRAM, error) {
	var out []kadm.DeleteSCRAM
	for _, name := range strings.Split(text, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		m, ok := metadata.ScramMechanismNamed(name)
		if !ok {
			return nil, fmt.Errorf("--delete-config %q: strand configs deletes SCRAM-SHA-256 and SCRAM-SHA-512 credentials", name)
		}
		out = append(out, kadm.DeleteSCRAM{User: user, Mechanism: kadmMechanism(m)})
	}
	return out, nil
}

func kadmMechanism(m metadata.ScramMechanism) kadm.ScramMechanism { return kadm.ScramMechanism(m) }

// alterScram sends one alteration and reports its user's error with the
// broker's message.
func alterScram(ctx context.Context, adm *kadm.Client, del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM) error {
	what := "setting"
	var m kadm.ScramMechanism
	var user string
	if len(del) > 0 {
		what, m, user = "deleting", del[0].Mechanism, del[0].User
	} else {
		m, user = up[0].Mechanism, up[0].User
	}
	results, err := adm.AlterUserSCRAMs(ctx, del, up)
	if err != nil {
		return fmt.Errorf("%s the %v credential of user %s: %w", what, m, user, err)
	}
	if r := results[user]; r.Err != nil {
		return fmt.Errorf("%s the %v credential of user %s: %w%s", what, m, user, r.Err, detail(r.ErrMessage))
	}
	return nil
}

// describeScram prints each user's credentials as kafka-configs.sh does:
// SCRAM credential configs for user-principal 'alice' are
// SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096. A named
// user without credentials prints nothing, as there.
func describeScram(ctx context.Context, adm *kadm.Client, user string, stdout io.Writer) error {
	var users []string
	if user != "" {
		users = []string{user}
	}
	described, err := adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return fmt.Errorf("describing SCRAM credentials: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(described)) {
		d := described[name]
		if errors.Is(d.Err, kerr.ResourceNotFound) {
			continue
		}
		if d.Err != nil {
			return fmt.Errorf("describing the SCRAM credentials of user %s: %w%s", name, d.Err, detail(d.ErrMessage))
		}
		var parts []string
		for _, info := range slices.SortedFunc(slices.Values(d.CredInfos), func(a, b kadm.CredInfo) int { return int(a.Mechanism) - int(b.Mechanism) }) {
			parts = append(parts, fmt.Sprintf("%v=iterations=%d", metadata.ScramMechanism(info.Mechanism), info.Iterations))
		}
		fmt.Fprintf(stdout, "SCRAM credential configs for user-principal '%s' are %s\n", name, strings.Join(parts, ", "))
	}
	return nil
}
