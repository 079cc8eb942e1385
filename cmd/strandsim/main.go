// Command strandsim runs Strand's deterministic simulator (simulator issue
// §5): one seed, a range of seeds, or every planted bug over a sweep. Each
// seed prints its trace hash and result, in seed order as soon as it and
// every earlier seed are done; the last line is "seeds=K violations=V
// sim_s=… wall_s=… events_per_s=… cpu_s=… sim_per_wall=… sim_per_cpu=…
// events_per_cpu_s=…" (CPU time is the process's, user and system; on a
// shared machine it measures the simulator better than wall time). Seeds run
// -parallel at a time, one per goroutine. The exit status
// is 1 when any violation was found. On a violation the run's Porcupine
// visualizations and its full trace are written under -out, and the exact
// command that reproduces it is printed.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"strand/sim/cluster"
)

func main() {
	seed := flag.Uint64("seed", 0, "first seed (default: a short sweep from 1)")
	count := flag.Int("count", 1, "number of seeds, from -seed on")
	bug := flag.String("bug", "", "planted bug: "+strings.Join(cluster.BugNames, ", "))
	shape := flag.String("shape", "", "scenario shape: mixed, "+strings.Join(cluster.ShapeNames(), ", ")+" (default standard; mixed for the short sweep)")
	verbose := flag.Bool("verbose", false, "print the event trace")
	planted := flag.Bool("planted-bugs", false, "run every planted bug over a sweep; fail unless each is caught")
	bugSeedsMax := flag.Int("bug-seeds-max", 200, "with -planted-bugs: seeds to try per bug before giving up")
	out := flag.String("out", "sim-out", "directory for visualizations and traces of failing seeds")
	parallel := flag.Int("parallel", runtime.GOMAXPROCS(0), "seeds run at once")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile to this file at the end")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cluster.SweepGCPercent) // GOGC overrides it
	}
	var cpuFile *os.File
	if *cpuProfile != "" {
		var err error
		if cpuFile, err = os.Create(*cpuProfile); err != nil {
			fmt.Fprintln(os.Stderr, "strandsim:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			fmt.Fprintln(os.Stderr, "strandsim:", err)
			os.Exit(2)
		}
	}
	code := run(*seed, *count, *bug, *shape, *verbose, *planted, *bugSeedsMax, *out, *parallel)
	if cpuFile != nil {
		pprof.StopCPUProfile()
		cpuFile.Close()
	}
	if *memProfile != "" {
		if err := writeMemProfile(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "strandsim:", err)
			code = max(code, 2)
		}
	}
	os.Exit(code)
}

// writeMemProfile writes the allocation profile (every allocation since
// the start, sampled) to path.
func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile %s: %w", path, err)
	}
	return f.Close()
}

// run carries out the flags and returns the exit status.
func run(seed uint64, count int, bug, shape string, verbose, planted bool, bugSeedsMax int, out string, parallel int) int {
	seedSet := false
	flag.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if planted {
		return plantedBugs(shape, bugSeedsMax, parallel)
	}
	if !seedSet {
		// make sim with no arguments: a short sweep.
		seed, count = 1, max(count, 20)
		if shape == "" {
			shape = "mixed"
		}
	}
	if count < 1 {
		fmt.Fprintln(os.Stderr, "strandsim: -count must be at least 1")
		return 2
	}
	if _, err := cluster.ParseBug(bug); err != nil {
		fmt.Fprintln(os.Stderr, "strandsim:", err)
		return 2
	}
	return sweep(seed, count, shape, bug, verbose, parallel, out)
}

// sweep runs seeds first..first+count-1 and prints their results in seed
// order, each as soon as it and every earlier seed are done.
func sweep(first uint64, count int, shape, bug string, verbose bool, parallel int, out string) int {
	start := time.Now()
	cpuStart := cpuSeconds()
	if verbose {
		parallel = 1
	}
	violations := 0
	var simNs int64
	var events uint64
	hits := map[string]int{}
	runSeeds(first, count, shape, bug, verbose, parallel, func(res cluster.Result) {
		simNs += res.SimNs
		events += res.Events
		for _, h := range res.Hits {
			hits[h]++
		}
		printResult(res)
		if len(res.Violations) > 0 {
			violations++
			report(res, shape, out)
		}
	})
	wall := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpuStart
	sim := float64(simNs) / 1e9
	printHits(hits)
	fmt.Printf("seeds=%d violations=%d sim_s=%.1f wall_s=%.2f events_per_s=%.0f cpu_s=%.2f sim_per_wall=%.1f sim_per_cpu=%.1f events_per_cpu_s=%.0f\n",
		count, violations, sim, wall, float64(events)/wall, cpu, sim/wall, sim/cpu, float64(events)/cpu)
	if violations > 0 {
		return 1
	}
	return 0
}

// printHits prints, on one line, how many seeds hit each fault class and
// shape feature (cluster.Result.Hits), by name.
func printHits(hits map[string]int) {
	names := make([]string, 0, len(hits))
	for name := range hits { // order-independent: sorted below
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("hits")
	for _, name := range names {
		fmt.Fprintf(&b, " %s=%d", name, hits[name])
	}
	fmt.Println(b.String())
}

// cpuSeconds is the CPU time (user and system) the process has used so
// far: on a shared machine, simulated seconds per CPU second measure the
// simulator, where per wall second also measure the neighbours.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}

// runSeeds runs the seeds, parallel at a time, each on its own goroutine
// with its own scheduler (a run shares nothing with another, so results do
// not depend on parallel), and calls emit with each result in seed order,
// on the calling goroutine, as soon as every earlier seed is done.
func runSeeds(first uint64, count int, shape, bug string, verbose bool, parallel int, emit func(cluster.Result)) {
	options := func(i int) cluster.Options {
		opts := cluster.Options{Seed: first + uint64(i), Shape: shape, Bug: bug}
		if verbose {
			opts.TraceWriter = os.Stdout
		}
		return opts
	}
	if parallel <= 1 {
		// One at a time, on this goroutine: a verbose trace and the
		// result lines never interleave.
		for i := 0; i < count; i++ {
			emit(cluster.Run(options(i)))
		}
		return
	}
	type done struct {
		i   int
		res cluster.Result
	}
	next := make(chan int)
	finished := make(chan done)
	for range parallel {
		go func() {
			for i := range next {
				finished <- done{i, cluster.Run(options(i))}
			}
		}()
	}
	go func() {
		for i := 0; i < count; i++ {
			next <- i
		}
		close(next)
	}()
	// waiting holds results that finished before an earlier seed.
	waiting := map[int]cluster.Result{}
	for emitted := 0; emitted < count; {
		d := <-finished
		waiting[d.i] = d.res
		for {
			res, ok := waiting[emitted]
			if !ok {
				break
			}
			delete(waiting, emitted)
			emit(res)
			emitted++
		}
	}
}

func printResult(res cluster.Result) {
	fmt.Printf("seed=%d shape=%s trace_hash=%016x sim_s=%.1f events=%d %s %s\n",
		res.Seed, res.Shape, res.TraceHash, float64(res.SimNs)/1e9, res.Events, res.Stats, status(res))
}

// status is a result's verdicts: "ok", or "VIOLATION (n)"; then the
// liveness verdict (ok, or the check that halted the run) and the safety
// verdict (ok, or how many violations the checkers found, on the history
// so far after a halt); then the losses the fault budget excused, by
// partition and check.
func status(res cluster.Result) string {
	safety := len(res.Violations)
	liveness := "ok"
	if res.Halt != "" {
		liveness, safety = res.Halt, safety-1
	}
	safetyVerdict := "ok"
	if safety > 0 {
		safetyVerdict = fmt.Sprintf("%d (%s)", safety, strings.Join(cluster.Checks(res.Violations[len(res.Violations)-safety:]), ","))
	}
	s := "ok"
	if len(res.Violations) > 0 {
		s = fmt.Sprintf("VIOLATION (%d)", len(res.Violations))
	}
	s += fmt.Sprintf(" liveness=%s safety=%s", liveness, safetyVerdict)
	if len(res.OverBudget) > 0 {
		var tps []string
		for _, tp := range res.OverBudget {
			tps = append(tps, tp.String())
		}
		s += fmt.Sprintf(" over_budget=%s excused=%d", strings.Join(tps, ","), len(res.Excused))
		if len(res.Excused) > 0 {
			s += " (" + strings.Join(cluster.Checks(res.Excused), ",") + ")"
		}
	}
	return s
}

// reproduceCommand is the exact command that replays a seed.
func reproduceCommand(res cluster.Result, shape string) string {
	cmd := fmt.Sprintf("make sim SEED=%d", res.Seed)
	if res.Bug != "" {
		cmd += " BUG=" + res.Bug
	}
	if shape != "" && shape != "standard" {
		cmd += " SHAPE=" + res.Shape
	}
	return cmd
}

// report prints a failing seed's violations and reproduce command, and
// writes its visualizations and full trace under out/seed-N/ (the seed is
// run again with the trace on: same seed, same run).
func report(res cluster.Result, shape, out string) {
	fmt.Printf("  %s\n", res.Header)
	for i, v := range res.Violations {
		if i == 10 {
			fmt.Printf("  … and %d more\n", len(res.Violations)-10)
			break
		}
		fmt.Printf("  violation: %s\n", v)
	}
	printNodeLogs(res)
	dir := filepath.Join(out, fmt.Sprintf("seed-%d", res.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Printf("  cannot write %s: %v\n", dir, err)
	} else {
		writeNodeLogs(res, dir)
		writeArtifacts(res, dir)
	}
	fmt.Printf("  reproduce: %s\n", reproduceCommand(res, shape))
}

// reportLogLinesMax is how many of each node's last log lines a failure
// report prints; the files under out/seed-N/ hold all that were kept.
const reportLogLinesMax = 8

// printNodeLogs prints each node's last log lines: what it saw last
// before the violation (leaderships, ISR changes, truncations, failures).
func printNodeLogs(res cluster.Result) {
	for _, nl := range res.NodeLogs {
		lines := nl.Lines[max(len(nl.Lines)-reportLogLinesMax, 0):]
		fmt.Printf("  node %d's last %d of %d log lines:\n", nl.Node, len(lines), nl.Logged)
		for _, l := range lines {
			fmt.Printf("    %s\n", l)
		}
	}
}

// writeNodeLogs writes each node's kept log lines to node-N.log in dir.
func writeNodeLogs(res cluster.Result, dir string) {
	for _, nl := range res.NodeLogs {
		path := filepath.Join(dir, fmt.Sprintf("node-%d.log", nl.Node))
		if err := os.WriteFile(path, []byte(strings.Join(nl.Lines, "\n")+"\n"), 0o644); err != nil {
			fmt.Printf("  cannot write %s: %v\n", path, err)
			continue
		}
		fmt.Printf("  log: %s\n", path)
	}
}

func writeArtifacts(res cluster.Result, dir string) {
	tracePath := filepath.Join(dir, "trace.txt")
	f, err := os.Create(tracePath)
	if err != nil {
		fmt.Printf("  cannot write trace: %v\n", err)
		return
	}
	w := bufio.NewWriterSize(f, 1<<20)
	again := cluster.Run(cluster.Options{Seed: res.Seed, Shape: res.Shape, Bug: res.Bug, TraceWriter: w, HTMLDir: dir})
	w.Flush()
	f.Close()
	if again.TraceHash != res.TraceHash {
		fmt.Printf("  NONDETERMINISM: the rerun's trace hash is %016x, not %016x\n", again.TraceHash, res.TraceHash)
	}
	fmt.Printf("  trace: %s\n", tracePath)
	for _, p := range again.HTML {
		fmt.Printf("  html: %s\n", p)
	}
}

// plantedBugs hunts each planted bug over seeds from 1 and fails unless
// every one is caught by the checker it names (cluster.PlantedBugs): a
// violation of that check with the bug that the same seed without it
// does not show. A bug only other checkers caught is not caught.
func plantedBugs(shape string, seedsMax, parallel int) int {
	start := time.Now()
	caught, seeds := 0, 0
	var simNs int64
	var events uint64
	for _, pb := range cluster.PlantedBugs {
		bugShape := shape
		if bugShape == "" {
			bugShape = pb.Shape
		}
		h := cluster.HuntBug(pb.Name, bugShape, seedsMax, parallel)
		seeds += h.SeedsRun
		simNs += h.SimNs
		events += h.Events
		if h.CaughtSeed == 0 {
			fmt.Printf("bug=%s NOT CAUGHT by %s in %d seeds (shape %s; %d seeds failed with and without the bug; %d caught only by other checkers)\n",
				pb.Name, pb.Checker, h.SeedsRun, bugShape, h.Masked, h.OtherSeeds)
			if h.OtherSeeds > 0 {
				fmt.Printf("  first caught only by %s at seed %d: %s\n", strings.Join(cluster.Checks(h.Other.Violations), ","),
					h.Other.Seed, firstLine(h.Other.Violations[0].String()))
			}
			continue
		}
		caught++
		fmt.Printf("bug=%s caught by %s at seed %d: %d seeds needed (shape %s; %d earlier seeds failed without the bug too, %d were caught only by other checkers)\n",
			pb.Name, pb.Checker, h.CaughtSeed, h.SeedsRun, bugShape, h.Masked, h.OtherSeeds)
		fmt.Printf("  checks that failed: %s\n", strings.Join(cluster.Checks(h.Caught.Violations), ","))
		for _, v := range h.Caught.Violations {
			if v.Check == pb.Checker {
				fmt.Printf("  violation: %s\n", firstLine(v.String()))
				break
			}
		}
		fmt.Printf("  reproduce: %s\n", reproduceCommand(h.Caught, bugShape))
	}
	wall := time.Since(start).Seconds()
	fmt.Printf("caught=%d/%d seeds=%d sim_s=%.1f wall_s=%.2f events_per_s=%.0f\n",
		caught, len(cluster.PlantedBugs), seeds, float64(simNs)/1e9, wall, float64(events)/wall)
	if caught < len(cluster.PlantedBugs) {
		return 1
	}
	return 0
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
