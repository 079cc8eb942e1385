package main

import (
	"os"
	"strings"
	"syscall"
)

// The Go runtime's sysmon thread sleeps on a futex whenever every P of the
// process is idle, and the first system call any goroutine makes afterwards
// wakes it (runtime.reentersyscall, Go 1.26); it then polls every 20 µs
// until the process is idle again. A broker under a request-per-round-trip
// load (acks=all replication: produce, the followers' Fetch, their answers)
// goes idle and busy again several times per request, so each request paid
// for a cross-CPU futex wake-up of sysmon and its sleeps, about a third of
// the broker's context switches. With GODEBUG's schedtrace set, sysmon never
// takes that deep sleep (its loop keeps sleeping 20 µs to 10 ms, backing
// off while there is nothing to retake), so a request pays neither the
// wake-up nor the sleeps (SPEC.md §7.1).
//
// schedtrace's value is the interval of the scheduler summary it prints,
// in ms; schedtraceMs is the largest the runtime takes (24.8 days), so the
// summary is printed at most that often, once at start-up on a machine up
// longer than that. With it set, any panic that ends the process (and any
// fatal runtime error) first prints the scheduler's state, one line per
// goroutine, before the panic's own trace.
const schedtraceMs = "2147483647"

// reexecKeepingSysmonAwake replaces the process with itself, with
// schedtrace added to GODEBUG, unless GODEBUG names schedtrace already
// (GODEBUG=schedtrace=0 keeps the runtime's default) or the re-execution
// fails, in which case the process goes on unchanged. The runtime reads
// schedtrace only at start-up, so it cannot be set from within. It must run
// before the process has started anything, as the first thing of main.
func reexecKeepingSysmonAwake() {
	godebug, changed := godebugWithSchedtrace(os.Getenv("GODEBUG"))
	if !changed {
		return
	}
	// /proc/self/exe is the very file this process runs, even if the path
	// it was started from has been replaced since (a rebuilt bin/strand);
	// argv, argv[0] included, is kept as given.
	const exe = "/proc/self/exe"
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GODEBUG="+godebug)
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure: run as we are
}

// godebugWithSchedtrace returns GODEBUG's value with schedtrace added, and
// whether it added it (false when godebug sets schedtrace itself).
func godebugWithSchedtrace(godebug string) (string, bool) {
	for _, field := range strings.Split(godebug, ",") {
		if key, _, _ := strings.Cut(field, "="); strings.TrimSpace(key) == "schedtrace" {
			return godebug, false
		}
	}
	setting := "schedtrace=" + schedtraceMs
	if godebug == "" {
		return setting, true
	}
	return godebug + "," + setting, true
}
