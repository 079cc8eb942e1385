// Command strand is Strand's single binary: the broker (serve), log-directory
// set-up (format), and tools. It only parses flags, reads files and wires
// packages together; the broker's logic lives in core/ and realnet/.
package main

import "os"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		reexecKeepingSysmonAwake() // see sysmon.go; the tools keep the default
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
