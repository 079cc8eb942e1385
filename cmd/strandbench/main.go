// Command strandbench measures Strand against the physical limits of the
// machine it runs on, measured in the same run, and prints each result beside
// its limit, as a ratio, with the goal it is held to (`make bench`).
//
// Each section measures one subsystem, in a file of its own:
//
//	log          the partition log on the real disk (log.go; foundation issue §6)
//	broker       the production broker under kgo beside kfake and the limits (broker.go; production broker issue §7)
//	replication  replication's cost in the simulator (replication.go; replication issue §6)
//	sim          the simulator's speed, standard scenario (sim.go; simulator issue §7)
//
// Usage:
//
//	strandbench [-section=log,...] [-dir=DIR] [-reps=N] [-cpuprofile=FILE]
//
// It exits with status 1 if a goal is missed, 2 on an error.
//
// The machine is shared and noisy, so every measurement is repeated, its
// runs interleaved with those of its limit (limit, subject, limit, subject…),
// and the median reported. What strandbench must not do: leave files behind
// (everything it writes lives in one temporary directory it removes), or
// compare against a limit measured elsewhere or at another time.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
)

// section is one part of the benchmark.
type section struct {
	name  string
	about string
	// run measures and prints; it reports whether every goal was met.
	run func(*benchEnv) (goalsMet bool, err error)
}

// sections are run in this order. Later issues add theirs (simulator speed,
// broker throughput) here, each in its own file.
var sections = []section{
	{name: "log", about: "partition log on diskio vs raw sequential write and page-cache read", run: runLogSection},
	{name: "broker", about: "the production broker under kgo, beside kfake, loopback TCP and disk; consumer group figures", run: runBrokerSection},
	{name: "security", about: "TLS and SASL beside plaintext on one broker: produce and consume CPU per record, new authenticated connections per second", run: runSecuritySection},
	{name: "replication", about: "replication cost in the simulator: frames per acks=all batch, leader copies per byte", run: runReplicationSection},
	{name: "failover", about: "leadership failover in the simulator, default timeouts: broker crash, active controller crash (p50/p99/max)", run: runFailoverSection},
	{name: "sim", about: "simulator speed, standard scenario: simulated s per wall s on one core, a 1,000-seed sweep on all", run: runSimSection},
}

func main() {
	os.Exit(runSections())
}

func runSections() int {
	sectionList := flag.String("section", "all", "comma-separated sections to run: all, or any of "+sectionNames())
	dir := flag.String("dir", "", "directory to write in (default: a temporary directory on the filesystem of ./data)")
	reps := flag.Int("reps", 7, "repetitions of each measurement; the median is reported")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	registerLogFlags()
	registerRestartFlags()
	registerBrokerFlags()
	flag.Parse()
	if *kfakeServeFlag != 0 {
		return serveKfake(*kfakeServeFlag)
	}
	if *nullServeFlag != 0 {
		return serveNull(*nullServeFlag)
	}

	chosen, err := chooseSections(*sectionList)
	if err == nil && *reps < 1 {
		err = fmt.Errorf("-reps %d: must be at least 1", *reps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "strandbench:", err)
		return 2
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "strandbench:", err)
			return 2
		}
		defer stop()
	}
	env, err := newBenchEnv(*dir, *reps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "strandbench:", err)
		return 2
	}
	defer env.close()
	removeOnInterrupt(env)
	env.describe()

	allMet := true
	for _, s := range chosen {
		fmt.Printf("\n== %s: %s ==\n", s.name, s.about)
		met, err := s.run(env)
		if err != nil {
			fmt.Fprintf(os.Stderr, "strandbench: section %s: %v\n", s.name, err)
			return 2
		}
		allMet = allMet && met
	}
	fmt.Println()
	printLoad("at end")
	if !allMet {
		fmt.Println("\nsome goals were missed (FAIL above)")
		return 1
	}
	fmt.Println("\nall goals met")
	return 0
}

func sectionNames() string {
	names := make([]string, len(sections))
	for i, s := range sections {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// chooseSections parses -section.
func chooseSections(list string) ([]section, error) {
	if list == "all" {
		return sections, nil
	}
	var chosen []section
	for name := range strings.SplitSeq(list, ",") {
		i := slices.IndexFunc(sections, func(s section) bool { return s.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-section: unknown section %q (have: all, %s)", name, sectionNames())
		}
		chosen = append(chosen, sections[i])
	}
	return chosen, nil
}

// startCPUProfile starts profiling into path and returns the function that
// stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "strandbench: -cpuprofile:", err)
		}
	}, nil
}

// removeOnInterrupt removes what the benchmark wrote when it is interrupted
// (SIGINT, SIGTERM) and exits: the deferred cleanup would not run, and the
// brokers' data would stay in the benchmark directory. The brokers
// themselves die with this process (brokerProcess.start's Pdeathsig).
func removeOnInterrupt(env *benchEnv) {
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-interrupted
		fmt.Fprintf(os.Stderr, "strandbench: %v: removing %s\n", sig, env.root)
		env.close()
		os.Exit(130)
	}()
}
