package main

// The client tools (topics, produce, consume, groups) talk to a running
// cluster with franz-go's kgo and kadm, as Kafka's shell tools use its Java
// clients. They share the flags and error handling below: a failure prints
// "strand <command>: <what went wrong>" on stderr and exits with status 1; a
// usage mistake exits with status 2, as the flag package does.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultBootstrapServer is where `make run` listens.
const defaultBootstrapServer = "127.0.0.1:9092"

// clientFlags are the flags every client tool takes.
type clientFlags struct {
	bootstrapServer string
	timeout         time.Duration
	// commandConfig is a Kafka client properties file for secured
	// listeners (clientconfig.go).
	commandConfig string
}

// addClientFlags registers --bootstrap-server, --command-config and
// --timeout on flags.
func addClientFlags(flags *flag.FlagSet) *clientFlags {
	f := &clientFlags{}
	flags.StringVar(&f.bootstrapServer, "bootstrap-server", defaultBootstrapServer, "comma-separated host:port list of brokers to connect to")
	flags.StringVar(&f.commandConfig, "command-config", "", "Kafka client properties for a secured listener (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
	flags.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up on the cluster after this long")
	return f
}

// newClient connects a kgo client to the bootstrap servers, secured as
// --command-config says.
func (f *clientFlags) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, s := range strings.Split(f.bootstrapServer, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, usageErrorf("--bootstrap-server is empty")
	}
	security, err := clientOpts(f.commandConfig)
	if err != nil {
		return nil, err
	}
	opts = append(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(f.timeout / 2),
		kgo.RetryTimeout(f.timeout)}, security...), opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", f.bootstrapServer, err)
	}
	return cl, nil
}

// newAdmin connects an admin client and starts the run's --timeout
// deadline; closeAdmin closes the client and releases the deadline.
func (f *clientFlags) newAdmin() (adm *kadm.Client, ctx context.Context, closeAdmin func(), err error) {
	cl, err := f.newClient()
	if err != nil {
		return nil, nil, nil, err
	}
	adm = kadm.NewClient(cl)
	ctx, cancel := f.deadline()
	return adm, ctx, func() { cancel(); adm.Close() }, nil
}

// newACLClient connects the ACL requests' client and starts the run's
// --timeout deadline; done closes it and releases the deadline.
func (f *clientFlags) newACLClient() (client aclClient, ctx context.Context, done func(), err error) {
	cl, err := f.newClient()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := f.deadline()
	return kgoACLClient{cl}, ctx, func() { cancel(); cl.Close() }, nil
}

// deadline bounds one tool run by --timeout.
func (f *clientFlags) deadline() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), f.timeout)
}

// subcommand is one action of a multi-command tool (`strand topics
// create`): its name and what runs it on the remaining arguments.
type subcommand struct {
	name string
	run  func(args []string, stdout, stderr io.Writer) error
}

// runSubcommand runs the subcommand of tool (`topics`, `groups`) named by
// args[0] and returns the exit status; help prints usage, a missing or
// unknown name is a usage error.
func runSubcommand(tool, usage string, subs []subcommand, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	for _, sub := range subs {
		if sub.name == args[0] {
			return finish(tool+" "+sub.name, stderr, sub.run(args[1:], stdout, stderr))
		}
	}
	fmt.Fprintf(stderr, "strand %s: unknown subcommand %q\n%s", tool, args[0], usage)
	return 2
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// finish reports err for command name on stderr and returns the exit
// status: 0 without an error, 2 for a usage error, 1 otherwise.
func finish(name string, stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "strand %s: %v\n", name, err)
	var uerr *usageError
	if errors.As(err, &uerr) {
		return 2
	}
	return 1
}

// parseInterspersed parses flags and positional arguments in any order
// (`strand groups describe GROUP --bootstrap-server …`), which the flag
// package alone does not: it stops at the first positional one.
func parseInterspersed(flags *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := flags.Parse(args); err != nil {
			return nil, err
		}
		args = flags.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// parseNoPositional parses flags and refuses positional arguments.
func parseNoPositional(flags *flag.FlagSet, args []string) error {
	if err := flags.Parse(args); err != nil {
		return &usageError{err.Error()}
	}
	if len(flags.Args()) > 0 {
		return usageErrorf("unexpected arguments %q", flags.Args())
	}
	return nil
}

// newFlagSet makes a flag set for `strand <name>` that prints its usage
// to stderr and reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	flags := flag.NewFlagSet("strand "+name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	return flags
}

// keyValues collects repeated key=value flags in order.
type keyValues []keyValue

type keyValue struct{ key, value string }

// String shows the pairs (flag.Value).
func (kvs *keyValues) String() string {
	var parts []string
	for _, kv := range *kvs {
		parts = append(parts, kv.key+"="+kv.value)
	}
	return strings.Join(parts, ",")
}

// Set adds one key=value (flag.Value).
func (kvs *keyValues) Set(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if key = strings.TrimSpace(key); !ok || key == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	*kvs = append(*kvs, keyValue{key, value})
	return nil
}

// stringList collects a repeated string flag.
type stringList []string

// String shows the values (flag.Value).
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds one value (flag.Value).
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }
