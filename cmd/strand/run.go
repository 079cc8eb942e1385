package main

import (
	"fmt"
	"io"
)

// usage lists the subcommands.
const usage = `usage: strand <command> [flags]

commands:
  serve              run a node (--config FILE, --override key=value ...)
  format             write meta.properties into every log directory (--config FILE, --cluster-id ID)
  random-cluster-id  print a new random cluster id, as kafka-storage.sh random-uuid does
  version            print the version
`

// run executes one subcommand and returns the process exit status. It writes
// only to stdout and stderr, so that tests can call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "format":
		return format(args[1:], stdout, stderr)
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
