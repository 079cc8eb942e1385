package main

import (
	"fmt"
	"io"
	"os"
)

// usage lists the subcommands.
const usage = `usage: strand <command> [flags]

commands:
  serve              run a node (--config FILE, --override key=value ...)
  format             write meta.properties into every log directory (--config FILE, --cluster-id ID,
                     --add-scram 'SCRAM-SHA-256=[name=USER,password=SECRET]' ...)
  random-cluster-id  print a new random cluster id, as kafka-storage.sh random-uuid does
  version            print the version

client tools (--bootstrap-server HOST:PORT, default 127.0.0.1:9092; --command-config FILE for a secured listener):
  topics             create, list, describe, delete, alter-config (strand topics help)
  produce            send stdin's lines as records (--topic T [--key-separator SEP])
  consume            print records (--topic T [--from-beginning | --offset N | --timestamp MS])
  groups             list, describe (lag), reset offsets (strand groups help)
  configs            users' SCRAM credentials: --alter --add-config/--delete-config, --describe (strand configs help)
  acls               add, remove, list ACLs as kafka-acls.sh; grant, revoke, reset, check, apply (strand acls help)
`

// run executes one subcommand and returns the process exit status. It writes
// only to stdout and stderr, so that tests can call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	return runWithStdin(args, os.Stdin, stdout, stderr)
}

// runWithStdin is run with the input `strand produce` reads given.
func runWithStdin(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "format":
		return format(args[1:], stdout, stderr)
	case "topics":
		return topics(args[1:], stdout, stderr)
	case "produce":
		return produce(args[1:], stdin, stdout, stderr)
	case "consume":
		return consume(args[1:], stdout, stderr)
	case "groups":
		return groups(args[1:], stdout, stderr)
	case "configs":
		return configs(args[1:], stdout, stderr)
	case "acls":
		return acls(args[1:], stdin, stdout, stderr)
	case "random-cluster-id":
		return randomClusterID(stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "strand: unknown command %q\n%s", args[0], usage)
	return 2
}
