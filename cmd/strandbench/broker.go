package main

// The broker section: the production broker under a kgo client
// (production broker issue §7, consumer groups issue §6), side by side with
// franz-go's kfake and the machine's limits, all in the same run.
//
// Cases, each broker a process of its own (bin/strand serve, or this binary
// with -serve-kfake), all three running at once, the client in this process:
//
//	(a) Strand, one node, acks=1
//	(b) Strand, three nodes (-broker-voters of them controllers), RF 3,
//	    acks=all, idempotent (kgo's default for acks=all)
//	(c) kfake, one broker, acks=1, as (a)
//
// Per record size (100 B and 1 KiB values, null keys, one partition, no
// compression): -broker-reps produce runs of -broker-duration per case, as
// fast as one kgo producer goes (kgo's defaults otherwise: linger 10 ms;
// non-idempotent producers get kgo's idempotent 5 requests in flight), the
// cases' runs interleaved (a, b, c, a, b, c...) so that the ratios to kfake
// pair runs made seconds apart; then one run of the raw producer
// (rawproduce.go, informational: the broker's capacity without kgo's cost)
// on the acks=1 cases; then the raw consumer (rawfetch.go) reads
// the topic whole -broker-reps times, each run right after a run of the
// loopback limit (loopback.go), and kgo reads it once, decoding. Then, per
// case, after a sync has written back the page cache the runs before left
// dirty, 100-byte acks=all records at half the case's median 100-byte peak
// with linger 0, for latency. Right after each Strand case's latency run
// the same client at the same rate produces to the null broker
// (nullbroker.go, a process of its own), latencyLimitRuns times, the run
// with the median p99 reported: the limit for latency, what the client,
// loopback TCP and the 2 shared cores cost at that rate when the broker
// answers at once. It has no storage and no replication, so it is
// not a broker's target, only the floor beneath one: the goal stays p99 <=
// 5 ms absolute, and the ratio to the floor is printed beside it. Each
// broker's CPU seconds per million records come from /proc/<pid>/stat
// around its produce runs; its RssAnon is sampled every 50 ms for its whole
// life. The disk limit is raw sequential write of 1 MiB writes without fsync
// (diskio.RawSequentialWrite, as the log section's); the page-cache write
// limit (pagecache.go), the kernel's CPU for writing the bytes (a) logged
// into new page-cache pages, runs right after each of (a)'s 1 KiB produce
// runs. Case (a) also runs the consumer groups figures: idempotent
// against non-idempotent produce, and the rebalance time of three members.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"strand/diskio"
)

var brokerFlags struct {
	strandBin string
	duration  time.Duration
	profile   bool
	voters    int
	reps      int
	// profileDir keeps the CPU profiles; "" writes them in the benchmark's
	// temporary directory, removed at the end.
	profileDir string
	// idempotenceOnly starts case (a) alone and runs only its idempotence
	// figures, to measure that block by itself.
	idempotenceOnly bool
}

func registerBrokerFlags() {
	flag.StringVar(&brokerFlags.strandBin, "strand", "bin/strand", "broker section: the strand binary to benchmark (make build)")
	flag.DurationVar(&brokerFlags.duration, "broker-duration", 1500*time.Millisecond, "broker section: length of each produce run")
	flag.IntVar(&brokerFlags.reps, "broker-reps", 3, "broker section: produce runs per case and value size, interleaved across the cases; the median is reported")
	flag.IntVar(&brokerFlags.voters, "broker-voters", 3, "broker section: controllers (quorum voters) among case (b)'s three nodes, 1 or 3; the others are brokers only")
	flag.StringVar(&brokerFlags.profileDir, "broker-profile-dir", "", "broker section: keep the brokers' CPU profiles in this directory (default: removed with the rest)")
	flag.BoolVar(&brokerFlags.idempotenceOnly, "broker-idempotence-only", false, "broker section: start case (a) alone and run only the idempotence figures and their goal")
	flag.BoolVar(&brokerFlags.profile, "broker-profile", true, "broker section: CPU-profile the Strand brokers and print their top functions (needs the go command)")
}

const (
	// produceRecordsMinPerSec is the goal for (a), 100-byte records, and
	// produceReplicatedRecordsMinPerSec for (b) (the goals).
	produceRecordsMinPerSec           = 1_000_000
	produceReplicatedRecordsMinPerSec = 400_000
	// kfakeThroughputRatioMin is the issue's ≥ 2× kfake for (a) 100-byte,
	// which CLARIFICATIONS.md supersedes (the kgo client caps both
	// brokers) with ≥ 1× for throughput and ≤ 0.5× CPU per record: it is
	// printed for information only.
	kfakeThroughputRatioMin = 2
	kfakeCPURatioMax        = 0.5
	// rawConsumeLoopbackRatioMin is the consume goal, on the raw consumer.
	rawConsumeLoopbackRatioMin = 0.5
	// latencyP99Max is the acks=all latency goal at half the peak.
	latencyP99Max = 5 * time.Millisecond
	// rssAnonMaxKiB is the broker memory goal, 256 MiB.
	rssAnonMaxKiB = 256 << 10
	// idempotenceCPURatioMax is the consumer groups issue's goal,
	// idempotence costs less than 5%, held to the broker's CPU time per
	// record under the raw producer, whose batches are the same either way:
	// on this shared machine back-to-back throughput runs differ by ±50%,
	// which no 5% goal survives (kgo's throughput ratio is printed).
	idempotenceCPURatioMax = 1.05
	// latencyDuration is the length of the fixed-rate run, rebalanceRuns
	// the rebalance repetitions. kgoIdempotencePairs and
	// idempotenceDuration are kgo's interleaved idempotent and
	// non-idempotent runs (informational).
	latencyDuration     = 2 * time.Second
	kgoIdempotencePairs = 3
	idempotenceDuration = time.Second
	rebalanceRuns       = 3
	// The raw producer's idempotence pairs, the goal's (measureIdempotence):
	// idempotencePairs pairs of runs of idempotenceRunRecords records each
	// (about 220 MB of log, under a 1 GiB segment), after a warm-up pair of
	// idempotenceWarmUpRecords. A run past idempotenceRunLimit fails.
	idempotencePairs         = 24
	idempotenceRunRecords    = 2_000_000
	idempotenceWarmUpRecords = 500_000
	idempotenceRunLimit      = 30 * time.Second
	// diskWriteBytes and diskTotalBytes shape the raw write limit.
	diskWriteBytes = 1 << 20
	diskTotalBytes = 256 << 20
	limitRuns      = 3
)

// latencyBelowHalfPeakDivisors are the fractions of the peak, beside the
// goal's half, at which (b) is measured too, for information: where on
// this machine the replicated path's p99 stands as the load falls.
var latencyBelowHalfPeakDivisors = []float64{4, 8}

// latencyLimitRuns is the null broker's runs per Strand case: its p99 is
// the denominator of a ratio, and one 2 s run's p99 moves by ±30% on this
// shared machine.
const latencyLimitRuns = 3

// valueSizes are the record value sizes of the workload.
var valueSizes = []int{100, 1 << 10}

// brokerCase is one broker set-up.
type brokerCase struct {
	label   string
	about   string
	acksAll bool
	// idempotent is kgo's default for acks=all.
	idempotent bool
	strand     bool
	// pageCacheLimit marks the case whose writes the page-cache write limit
	// repeats (pagecache.go).
	pageCacheLimit bool
	start          func(dir string) (*cluster, error)
}

// caseResults are one case's measurements.
type caseResults struct {
	c  brokerCase
	cl *cluster
	// produce holds the produce runs by value size, then repetition.
	produce [][]produceResult
	// loggedBytes holds, as produce does, the bytes each run added to the
	// topic's log (pageCacheLimit cases only); pageCacheRuns the page-cache
	// write limit's run after each of them of pageCacheValueBytes.
	loggedBytes   [][]int64
	pageCacheRuns []pageCacheRun
	// rawProduce is one raw producer run per size (acks=1 cases only).
	rawProduce []produceResult
	// endOffset is each size's topic's end offset after the produce runs.
	endOffset []int64
	// kgoConsume reads each size's topic whole once; rawConsume reads it
	// -broker-reps times, each run right after a run of the loopback limit
	// (loopback), by size then repetition.
	kgoConsume []consumeResult
	rawConsume [][]consumeResult
	loopback   [][]run
	latency    latencyResult
	floorRuns  []latencyResult // the null broker's runs at latency's rate, right after it (Strand cases only)
	// latencyBelowHalfPeak are (b)'s runs at the peak over each of
	// latencyBelowHalfPeakDivisors, after its floor runs.
	latencyBelowHalfPeak []latencyResult
	rssAnonMaxKiB        int64
	profiles             []string
	idempotenceRatio     float64
	idempotenceCPURatio  float64
	idempotentRuns       []produceResult
	nonIdempotentRuns    []produceResult
	rawIdempotentRuns    []produceResult
	rawNonIdempotentRuns []produceResult
	// rawIdempotenceElapsed is the raw pairs' wall time, warm-up, topics
	// and syncs included.
	rawIdempotenceElapsed time.Duration
	rebalanceTimes        []time.Duration
}

// medianProduce is the median over a size's produce runs of rate.
func (r *caseResults) medianProduce(size int, rate func(produceResult) float64) float64 {
	var values []float64
	for _, p := range r.produce[size] {
		values = append(values, rate(p))
	}
	return medianFloat(values)
}

// pairedProduceRatio is the median over repetitions of r's rate over
// other's in the same repetition (the runs were made back to back).
func (r *caseResults) pairedProduceRatio(other *caseResults, size int, rate func(produceResult) float64) float64 {
	var ratios []float64
	for i := range r.produce[size] {
		ratios = append(ratios, rate(r.produce[size][i])/rate(other.produce[size][i]))
	}
	return medianFloat(ratios)
}

// rawOverLoopback is the median over repetitions of the raw consumer's
// MB/s over the loopback limit's measured just before it.
func (r *caseResults) rawOverLoopback(size int) float64 {
	var ratios []float64
	for i, raw := range r.rawConsume[size] {
		ratios = append(ratios, raw.mbPerSec()/r.loopback[size][i].mbPerSec())
	}
	return medianFloat(ratios)
}

// rawMedian is the median MB/s of a size's raw consumer runs.
func (r *caseResults) rawMedian(size int) float64 {
	var values []float64
	for _, raw := range r.rawConsume[size] {
		values = append(values, raw.mbPerSec())
	}
	return medianFloat(values)
}

func runBrokerSection(env *benchEnv) (met bool, err error) {
	strandBin, err := filepath.Abs(brokerFlags.strandBin)
	if err != nil {
		return false, err
	}
	if brokerFlags.voters < 1 || brokerFlags.voters > 3 {
		return false, fmt.Errorf("-broker-voters %d: must be 1, 2 or 3", brokerFlags.voters)
	}
	if brokerFlags.reps < 1 {
		return false, fmt.Errorf("-broker-reps %d: must be at least 1", brokerFlags.reps)
	}
	if _, err := os.Stat(strandBin); err != nil {
		return false, fmt.Errorf("-strand %s: %w (run make build)", brokerFlags.strandBin, err)
	}
	profileDir := ""
	if brokerFlags.profile {
		profileDir = env.root
		if brokerFlags.profileDir != "" {
			if profileDir, err = filepath.Abs(brokerFlags.profileDir); err != nil {
				return false, err
			}
			if err := os.MkdirAll(profileDir, 0o755); err != nil {
				return false, err
			}
		}
	}
	cases := []brokerCase{
		{label: "(a)", about: "Strand, 1 node, acks=1", strand: true, pageCacheLimit: true,
			start: func(dir string) (*cluster, error) { return startStrand("a", strandBin, dir, 1, 1, profileDir) }},
		{label: "(b)", about: fmt.Sprintf("Strand, 3 nodes (%d of them controllers), RF 3, acks=all, idempotent", brokerFlags.voters), strand: true, acksAll: true, idempotent: true,
			start: func(dir string) (*cluster, error) {
				return startStrand("b", strandBin, dir, 3, brokerFlags.voters, profileDir)
			}},
		{label: "(c)", about: "kfake, 1 broker, acks=1",
			start: func(dir string) (*cluster, error) { return startKfake(dir) }},
	}
	if brokerFlags.idempotenceOnly {
		return runIdempotenceOnly(env, cases[0])
	}
	disk, err := measureDisk(env)
	if err != nil {
		return false, err
	}
	fmt.Printf("limit: disk sequential write (1 MiB writes, no fsync) %.0f MB/s, median of %d; loopback TCP is measured before each raw consume,\n", disk.median(), len(disk))
	fmt.Printf("  the page-cache write (CPU per byte) after each of (a)'s %s produce runs\n", sizeName(pageCacheValueBytes))

	var results []*caseResults
	defer func() {
		// Stop every case at once: the last voter of (b) takes 30 s.
		errs := make([]error, len(results))
		var wg sync.WaitGroup
		for i, r := range results {
			wg.Go(func() {
				errs[i] = r.cl.stop()
				r.rssAnonMaxKiB = r.cl.rssAnonMaxKiB()
				for _, p := range r.cl.processes {
					if p.profilePath != "" {
						r.profiles = append(r.profiles, p.profilePath)
					}
				}
			})
		}
		wg.Wait()
		if err = errors.Join(append(errs, err)...); err != nil {
			return
		}
		met = printBrokerResults(results) && met
		if brokerFlags.profile {
			printProfiles(strandBin, results)
		}
	}()
	for _, c := range cases {
		fmt.Printf("starting %s %s\n", c.label, c.about)
		dir := filepath.Join(env.root, "broker"+c.label[1:2])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, err
		}
		cl, err := c.start(dir)
		if err != nil {
			return false, fmt.Errorf("%s %s: %w", c.label, c.about, err)
		}
		results = append(results, &caseResults{c: c, cl: cl})
	}
	fmt.Println("starting the null broker (the latency limit)")
	null, err := startNull(env.root)
	if err != nil {
		return false, fmt.Errorf("null broker: %w", err)
	}
	defer func() { err = errors.Join(err, null.stop()) }()
	pageCacheDir := filepath.Join(env.root, "page-cache-limit")
	if err := os.Mkdir(pageCacheDir, 0o755); err != nil {
		return false, err
	}
	if err := measureCases(results, null, pageCacheDir); err != nil {
		return false, err
	}
	return true, nil
}

// measureCases runs the workload on every case, its produce runs
// interleaved across the cases (a, b, c, a, b, c...) so that the ratios to
// kfake pair runs made seconds apart on this shared machine; the latency
// run of each Strand case is followed by runs at the same rate against the
// null broker, after it so that the case's run is unchanged (right after the
// sync). The page-cache write limit runs right after each produce run of
// the pageCacheLimit case at pageCacheValueBytes, writing its files in
// pageCacheDir.
func measureCases(results []*caseResults, null *cluster, pageCacheDir string) error {
	for size, valueBytes := range valueSizes {
		topic := fmt.Sprintf("bench-%d", valueBytes)
		for _, r := range results {
			if err := r.cl.createTopic(topic, 1); err != nil {
				return err
			}
			r.produce = append(r.produce, nil)
			r.loggedBytes = append(r.loggedBytes, nil)
			r.endOffset = append(r.endOffset, 0)
		}
		for rep := range brokerFlags.reps {
			fmt.Printf("produce %s, run %d of %d:", sizeName(valueBytes), rep+1, brokerFlags.reps)
			for _, r := range results {
				var loggedBefore int64
				if r.c.pageCacheLimit {
					var err error
					if loggedBefore, err = r.cl.settledLogBytes(topic); err != nil {
						return err
					}
				}
				p, err := produceFor(r.cl, topic, valueBytes, brokerFlags.duration, produceSettings{acksAll: r.c.acksAll, idempotent: r.c.idempotent})
				if err != nil {
					return err
				}
				fmt.Printf(" %s %.0f rec/s", r.c.label, p.recordsPerSec())
				r.produce[size] = append(r.produce[size], p)
				r.endOffset[size] += p.records + 1 // and its warm-up record
				if r.c.pageCacheLimit {
					if err := measurePageCacheAfter(r, topic, size, rep, loggedBefore, pageCacheDir); err != nil {
						return err
					}
				}
			}
			fmt.Println()
		}
		rawTopic := fmt.Sprintf("bench-raw-%d", valueBytes)
		for _, r := range results {
			if r.c.acksAll {
				r.rawProduce = append(r.rawProduce, produceResult{})
				continue
			}
			if err := r.cl.createTopic(rawTopic, 1); err != nil {
				return err
			}
			p, err := produceRaw(r.cl, rawTopic, valueBytes, brokerFlags.duration, rawProducer{acks: 1})
			if err != nil {
				return err
			}
			r.rawProduce = append(r.rawProduce, p)
		}
		for _, r := range results {
			r.loopback, r.rawConsume = append(r.loopback, nil), append(r.rawConsume, nil)
			for range brokerFlags.reps {
				l, err := loopbackBandwidth(300 * time.Millisecond)
				if err != nil {
					return fmt.Errorf("loopback: %w", err)
				}
				raw, err := consumeRaw(r.cl, topic, r.endOffset[size])
				if err != nil {
					return err
				}
				r.loopback[size] = append(r.loopback[size], l)
				r.rawConsume[size] = append(r.rawConsume[size], raw)
			}
			k, err := consumeKgo(r.cl, topic, r.endOffset[size])
			if err != nil {
				return err
			}
			r.kgoConsume = append(r.kgoConsume, k)
		}
	}
	for _, r := range results {
		if err := r.cl.createTopic("bench-latency", 1); err != nil {
			return err
		}
		if err := writeBackPageCache(r.c.label); err != nil {
			return err
		}
		rate := r.medianProduce(0, produceResult.recordsPerSec) / 2
		var err error
		if r.latency, err = produceAtRate(r.cl, "bench-latency", valueSizes[0], rate, latencyDuration, true); err != nil {
			return err
		}
		for i := 0; r.c.strand && i < latencyLimitRuns; i++ {
			floor, err := produceAtRate(null, "bench-latency", valueSizes[0], rate, latencyDuration, true)
			if err != nil {
				return err
			}
			r.floorRuns = append(r.floorRuns, floor)
		}
		for i := 0; r.c.strand && r.c.acksAll && i < len(latencyBelowHalfPeakDivisors); i++ {
			peak := 2 * rate
			l, err := produceAtRate(r.cl, "bench-latency", valueSizes[0], peak/latencyBelowHalfPeakDivisors[i], latencyDuration, true)
			if err != nil {
				return err
			}
			r.latencyBelowHalfPeak = append(r.latencyBelowHalfPeak, l)
		}
	}
	// The other cases are done: stop them while (a) runs the group figures,
	// for the last voter of (b) takes 30 s to stop. The final stop waits.
	for _, r := range results[1:] {
		go r.cl.stop()
	}
	return measureGroupFigures(results[0].cl, results[0])
}

// measurePageCacheAfter records the log bytes r's produce run of
// valueSizes[size] just added (from loggedBefore), and if that size is
// pageCacheValueBytes runs the page-cache write limit on as many bytes, in
// a new file in dir.
func measurePageCacheAfter(r *caseResults, topic string, size, rep int, loggedBefore int64, dir string) error {
	loggedAfter, err := r.cl.settledLogBytes(topic)
	if err != nil {
		return err
	}
	logged := loggedAfter - loggedBefore
	r.loggedBytes[size] = append(r.loggedBytes[size], logged)
	if valueSizes[size] != pageCacheValueBytes {
		return nil
	}
	pc, err := measurePageCacheWrite(filepath.Join(dir, fmt.Sprintf("run-%d", rep)), logged)
	if err != nil {
		return err
	}
	r.pageCacheRuns = append(r.pageCacheRuns, pc)
	fmt.Printf(" (page-cache write of its %.0f MB: new %.2f s/GB, cached %.2f)", float64(logged)/1e6, pc.secPerGB(pc.fresh), pc.secPerGB(pc.cached))
	return nil
}

// measureDisk measures raw sequential write limitRuns times.
func measureDisk(env *benchEnv) (series, error) {
	var disk series
	for range limitRuns {
		cpuStart := processCPU()
		mbPerSec, err := diskio.RawSequentialWrite(env.root, diskWriteBytes, diskTotalBytes, false)
		if err != nil {
			return nil, err
		}
		disk = append(disk, runFromRate(diskTotalBytes, mbPerSec, processCPU()-cpuStart))
	}
	return disk, nil
}

// measureGroupFigures measures the consumer groups issue's §6 on a case:
// idempotent against non-idempotent acks=all produce, interleaved, and the
// rebalance time of a three-member group.
func measureGroupFigures(cl *cluster, r *caseResults) error {
	if err := measureIdempotence(cl, r); err != nil {
		return err
	}
	if err := cl.createTopic("bench-group", groupMembers); err != nil {
		return err
	}
	for i := range rebalanceRuns {
		d, err := rebalanceOnce(cl, "bench-group", fmt.Sprintf("bench-group-%d", i))
		if err != nil {
			return err
		}
		r.rebalanceTimes = append(r.rebalanceTimes, d)
	}
	return nil
}

// measureIdempotence measures idempotent against non-idempotent acks=all
// produce on a case.
func measureIdempotence(cl *cluster, r *caseResults) error {
	if err := cl.createTopic("bench-idempotence", 1); err != nil {
		return err
	}
	// kgo pairs, informational: kgo's batches follow the client's speed,
	// which the neighbours' load moves by ±50% from run to run.
	var ratios []float64
	for range kgoIdempotencePairs {
		idem, err := produceFor(cl, "bench-idempotence", valueSizes[0], idempotenceDuration, produceSettings{acksAll: true, idempotent: true})
		if err != nil {
			return err
		}
		plain, err := produceFor(cl, "bench-idempotence", valueSizes[0], idempotenceDuration, produceSettings{acksAll: true})
		if err != nil {
			return err
		}
		r.idempotentRuns = append(r.idempotentRuns, idem)
		r.nonIdempotentRuns = append(r.nonIdempotentRuns, plain)
		ratios = append(ratios, idem.recordsPerSec()/plain.recordsPerSec())
	}
	r.idempotenceRatio = medianFloat(ratios)
	return measureRawIdempotence(cl, r)
}

// measureRawIdempotence measures the goal's figure: the broker's CPU per
// record with the raw producer's 1000-record acks=all batches, with and
// without a producer id and sequences. On this VM a 1 s run's CPU per record
// moves by up to 3× with what the machine does meanwhile, none of it
// idempotence: a segment roll's background flush (a gigabyte's
// writeback, billed to the broker in whichever run it falls); the kernel's
// writeback of the gigabytes the runs before left dirty, which holds the
// broker's write worker in ext4 block allocation for up to a second; the
// cost of new page-cache pages, which rises for good after some gigabytes
// of new page cache (docs/benchmarks.md, the page-cache write limit); and the
// neighbours' load. So each run produces a fixed idempotenceRunRecords;
// each pair produces to two new topics, one per side, so that no run rolls
// a segment, after a sync, so that no writeback backlog is left, and then
// deletes them, so that the next pair's pages are ones just freed rather
// than the machine's dearer new ones; the pairs alternate which side goes
// first; each run's CPU is read once the broker has written its batches;
// and the figure is the idempotent runs' summed CPU over the
// non-idempotent runs' (the same records each side), over idempotencePairs
// pairs after a warm-up pair that is not counted.
func measureRawIdempotence(cl *cluster, r *caseResults) error {
	start := time.Now()
	for pair := range idempotencePairs + 1 {
		records := idempotenceRunRecords
		if pair == 0 {
			records = idempotenceWarmUpRecords
		}
		idempotentTopic := fmt.Sprintf("bench-idempotence-raw-%d-idempotent", pair)
		plainTopic := fmt.Sprintf("bench-idempotence-raw-%d-non-idempotent", pair)
		for _, topic := range []string{idempotentTopic, plainTopic} {
			if err := cl.createTopic(topic, 1); err != nil {
				return err
			}
		}
		unix.Sync()
		var idem, plain produceResult
		for _, idempotent := range idempotenceOrder(pair) {
			topic := plainTopic
			if idempotent {
				topic = idempotentTopic
			}
			p, err := produceRaw(cl, topic, valueSizes[0], idempotenceRunLimit,
				rawProducer{acks: -1, idempotent: idempotent, batches: records / rawProduceBatchRecords, awaitWritten: true})
			if err != nil {
				return err
			}
			if idempotent {
				idem = p
			} else {
				plain = p
			}
		}
		if err := cl.deleteTopics(idempotentTopic, plainTopic); err != nil {
			return err
		}
		if pair > 0 {
			r.rawIdempotentRuns = append(r.rawIdempotentRuns, idem)
			r.rawNonIdempotentRuns = append(r.rawNonIdempotentRuns, plain)
		}
	}
	r.idempotenceCPURatio = summedCPUPerRecordRatio(r.rawIdempotentRuns, r.rawNonIdempotentRuns)
	r.rawIdempotenceElapsed = time.Since(start)
	return nil
}

// idempotenceOrder is the order of pair's runs, true for the idempotent
// one: idempotent first in even pairs, second in odd ones, so that neither
// side always follows the other.
func idempotenceOrder(pair int) []bool {
	if pair%2 == 0 {
		return []bool{true, false}
	}
	return []bool{false, true}
}

// summedCPUPerRecordRatio is subject's broker CPU per record over limit's,
// each summed over its runs: every run counts by its records, so that a run
// whose CPU per record a neighbour's burst doubled weighs no more than its
// share of the work.
func summedCPUPerRecordRatio(subject, limit []produceResult) float64 {
	perRecord := func(runs []produceResult) float64 {
		var cpu time.Duration
		var records int64
		for _, p := range runs {
			cpu += p.brokerCPU
			records += p.records
		}
		if records == 0 {
			panic("strandbench: CPU per record of no records")
		}
		return cpu.Seconds() / float64(records)
	}
	return perRecord(subject) / perRecord(limit)
}

// runIdempotenceOnly starts case c alone (Strand, one node) and runs only
// its idempotence figures and their goal (-broker-idempotence-only).
func runIdempotenceOnly(env *benchEnv, c brokerCase) (met bool, err error) {
	dir := filepath.Join(env.root, "broker"+c.label[1:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	fmt.Printf("starting %s %s, for the idempotence figures alone\n", c.label, c.about)
	cl, err := c.start(dir)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", c.label, c.about, err)
	}
	defer func() { err = errors.Join(err, cl.stop()) }()
	r := &caseResults{c: c, cl: cl}
	if err := measureIdempotence(cl, r); err != nil {
		return false, err
	}
	printIdempotence(r)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Println()
	fmt.Fprintln(w, "goal\tmeasured\ttarget\tverdict")
	measured, target, met := idempotenceGoal(r)
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", idempotenceGoalName, measured, target, map[bool]string{true: "PASS", false: "FAIL"}[met])
	return met, w.Flush()
}

// idempotenceGoalName names the idempotence goal's row.
const idempotenceGoalName = "(a) idempotent / non-idempotent broker CPU per record (raw)"

// idempotenceGoal is the idempotence goal's measured figure and target, and
// whether r meets it.
func idempotenceGoal(r *caseResults) (measured, target string, met bool) {
	return fmt.Sprintf("%.3f", r.idempotenceCPURatio), fmt.Sprintf("<= %.2f", idempotenceCPURatioMax), r.idempotenceCPURatio <= idempotenceCPURatioMax
}

// floor is the null broker's run with the median p99 (the higher of the
// middle two for an even count).
func (r *caseResults) floor() latencyResult {
	if len(r.floorRuns) == 0 {
		panic("strandbench: " + r.c.label + " has no latency limit runs")
	}
	sorted := slices.Clone(r.floorRuns)
	slices.SortFunc(sorted, func(x, y latencyResult) int { return cmp.Compare(x.p99, y.p99) })
	return sorted[len(sorted)/2]
}

// medianFloat is the median of values (the mean of the middle two for an
// even count); values is reordered.
func medianFloat(values []float64) float64 {
	if len(values) == 0 {
		panic("strandbench: median of no values")
	}
	slices.Sort(values)
	middle := len(values) / 2
	if len(values)%2 == 1 {
		return values[middle]
	}
	return (values[middle-1] + values[middle]) / 2
}

func sizeName(valueBytes int) string {
	if valueBytes >= 1<<10 {
		return fmt.Sprintf("%d KiB", valueBytes>>10)
	}
	return fmt.Sprintf("%d B", valueBytes)
}

// printBrokerResults prints the tables, the consumer group figures and the
// goals, and reports whether every goal was met.
func printBrokerResults(results []*caseResults) bool {
	printBrokerTable(results)
	printGroupFigures(results[0])
	return printBrokerGoals(os.Stdout, results)
}

// printBrokerTable prints every case's figures, with the ratios to kfake
// (the last case) and to the loopback limit.
func printBrokerTable(results []*caseResults) {
	kfake := results[len(results)-1]
	recordsPerSec, mbPerSec, cpu := produceResult.recordsPerSec, produceResult.mbPerSec, produceResult.cpuSecPerMillion
	clientCPU := func(p produceResult) float64 { return p.clientCPU.Seconds() / float64(p.records) * 1e6 }
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Println()
	fmt.Fprintln(w, "case\tvalue\tproduce rec/s\tMB/s\t/kfake\tbroker CPU s/M rec\t/kfake\tclient CPU s/M rec\tkgo consume rec/s\tMB/s\traw consume MB/s\tloopback MB/s\traw/loopback\t")
	for _, r := range results {
		for i, size := range valueSizes {
			k := r.kgoConsume[i]
			var loopback series
			for _, l := range r.loopback[i] {
				loopback = append(loopback, l)
			}
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.0f\t%.0f\t%.2f\t\n",
				r.c.label, sizeName(size), r.medianProduce(i, recordsPerSec), r.medianProduce(i, mbPerSec), r.pairedProduceRatio(kfake, i, recordsPerSec),
				r.medianProduce(i, cpu), r.pairedProduceRatio(kfake, i, cpu), r.medianProduce(i, clientCPU),
				k.recordsPerSec(), k.mbPerSec(), r.rawMedian(i), loopback.median(), r.rawOverLoopback(i))
		}
	}
	w.Flush()
	fmt.Println()
	printPageCacheLimit(os.Stdout, results[0], kfake)
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "raw producer (acks=1, %d-record batches, %d in flight)\tvalue\trec/s\tMB/s\tbroker CPU s/M rec\tclient CPU s/M rec\t\n", rawProduceBatchRecords, rawProduceInFlight)
	for _, r := range results {
		if r.c.acksAll {
			continue
		}
		for i, size := range valueSizes {
			p := r.rawProduce[i]
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.1f\t%.2f\t%.2f\t\n", r.c.label, sizeName(size), p.recordsPerSec(), p.mbPerSec(), p.cpuSecPerMillion(), clientCPU(p))
		}
	}
	w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tacks=all, linger 0, at half the 100 B peak: rec/s (achieved)\tp50 ms\tp99 ms\tmax ms\tp99/limit\tclient CPU s/s\tbroker CPU s/s\tbroker RssAnon max MiB\t")
	for _, r := range results {
		l := r.latency
		var f latencyResult
		if r.c.strand {
			f = r.floor()
			fmt.Fprintf(w, "limit: null broker at %s's rate\t%.0f (%.0f)\t%.2f\t%.2f\t%.2f\t\t%.2f\t%.2f\t\t\n", r.c.label, f.ratePerSec, f.achievedPerSec,
				ms(f.p50), ms(f.p99), ms(f.pMax), f.cores(f.clientCPU), f.cores(f.brokerCPU))
		}
		overLimit := "-"
		if r.c.strand {
			overLimit = fmt.Sprintf("%.2f", l.p99.Seconds()/f.p99.Seconds())
		}
		fmt.Fprintf(w, "%s\t%.0f (%.0f)\t%.2f\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t%.1f\t\n", r.c.label, l.ratePerSec, l.achievedPerSec,
			ms(l.p50), ms(l.p99), ms(l.pMax), overLimit, l.cores(l.clientCPU), l.cores(l.brokerCPU), float64(r.rssAnonMaxKiB)/1024)
		for i, l := range r.latencyBelowHalfPeak {
			fmt.Fprintf(w, "%s at 1/%.0f of the peak (info)\t%.0f (%.0f)\t%.2f\t%.2f\t%.2f\t\t%.2f\t%.2f\t\t\n", r.c.label, latencyBelowHalfPeakDivisors[i], l.ratePerSec, l.achievedPerSec,
				ms(l.p50), ms(l.p99), ms(l.pMax), l.cores(l.clientCPU), l.cores(l.brokerCPU))
		}
	}
	w.Flush()
	fmt.Printf(`
  Produce figures are medians of %d runs of %s, the cases' runs interleaved; "/kfake" is the median over
  the runs of this case over (c)'s run next to it. MB/s are 10^6 bytes of record values per second for
  produce and kgo consume, of whole record batches (wire bytes) for the raw consumer: the median of %d
  runs, each right after a run of the loopback limit; raw/loopback is the median of those pairs' ratios. Broker CPU is utime+stime of every broker process of the case
  (3 for (b)) during the produce run; client CPU is strandbench's own (kgo). RssAnon excludes mapped
  segment and index pages (CLARIFICATIONS.md); kfake keeps every record on its heap.
  Each latency run measures %s at the fixed rate after an unmeasured warm-up of %s at that rate.
  The latency limit is the same client at the same rate against the null broker, which answers every
  Produce at once and stores and replicates nothing: what the client, loopback TCP and the machine cost,
  the floor under any broker's p99, not a broker to match. Its row is the run with the median p99 of %d
  right after the case's; their p99s:%s. The "(info)" rows are (b) at lower fixed rates, one run
  each after its limit's, for where its p99 stands as the load falls. CPU s/s are CPU seconds per second of
  the run (2 cores: 2.00 is the whole machine).
`, brokerFlags.reps, brokerFlags.duration, brokerFlags.reps, latencyDuration, latencyWarmup, latencyLimitRuns, limitP99s(results))
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// limitP99s lists each Strand case's null broker runs' p99s.
func limitP99s(results []*caseResults) string {
	var b strings.Builder
	for _, r := range results {
		if !r.c.strand {
			continue
		}
		fmt.Fprintf(&b, " %s", r.c.label)
		for _, f := range r.floorRuns {
			fmt.Fprintf(&b, " %.2f", ms(f.p99))
		}
		b.WriteString(" ms")
	}
	return b.String()
}

// printGroupFigures prints the consumer groups issue's measurements.
func printGroupFigures(r *caseResults) {
	printIdempotence(r)
	printRebalance(r)
}

// printIdempotence prints the idempotent against non-idempotent runs.
func printIdempotence(r *caseResults) {
	fmt.Printf("\nidempotence on %s, acks=all, 100 B: kgo, interleaved pairs of %s runs (informational); then the raw producer, the goal's:\n", r.c.label, idempotenceDuration)
	fmt.Printf("  %d pairs of %d-record runs after a warm-up pair of %d, each pair on two new topics (no segment roll in a run)\n", len(r.rawIdempotentRuns), idempotenceRunRecords, idempotenceWarmUpRecords)
	fmt.Printf("  after a sync (no writeback backlog), deleted after it (the next pair reuses their pages), idempotent first in every\n")
	fmt.Printf("  other pair, each run's broker CPU read once the broker has written its batches; the goal's figure is the idempotent\n")
	fmt.Printf("  runs' summed CPU per record over the non-idempotent runs' (the raw pairs took %.0f s)\n", r.rawIdempotenceElapsed.Seconds())
	for i := range r.idempotentRuns {
		idem, plain := r.idempotentRuns[i], r.nonIdempotentRuns[i]
		fmt.Printf("  kgo: idempotent %.0f rec/s %.2f CPU s/M rec, non-idempotent %.0f rec/s %.2f CPU s/M rec\n",
			idem.recordsPerSec(), idem.cpuSecPerMillion(), plain.recordsPerSec(), plain.cpuSecPerMillion())
	}
	var pairRatios []float64
	for i := range r.rawIdempotentRuns {
		idem, plain := r.rawIdempotentRuns[i], r.rawNonIdempotentRuns[i]
		first := "idempotent first"
		if !idempotenceOrder(i + 1)[0] {
			first = "non-idempotent first"
		}
		ratio := idem.cpuSecPerMillion() / plain.cpuSecPerMillion()
		pairRatios = append(pairRatios, ratio)
		fmt.Printf("  raw: idempotent %.0f rec/s %.3f CPU s/M rec, non-idempotent %.0f rec/s %.3f CPU s/M rec; %.3f (%s)\n",
			idem.recordsPerSec(), idem.cpuSecPerMillion(), plain.recordsPerSec(), plain.cpuSecPerMillion(), ratio, first)
	}
	slices.Sort(pairRatios)
	fmt.Printf("  idempotent/non-idempotent: kgo throughput, median of the pairs, %.3f; raw broker CPU per record, summed over the pairs, %.3f\n", r.idempotenceRatio, r.idempotenceCPURatio)
	fmt.Printf("  (the goal's; the pairs' own ratios %.3f to %.3f, median %.3f)\n", pairRatios[0], pairRatios[len(pairRatios)-1], medianFloat(pairRatios))
}

// printRebalance prints the rebalance times.
func printRebalance(r *caseResults) {
	sorted := append([]time.Duration(nil), r.rebalanceTimes...)
	slices.Sort(sorted)
	fmt.Printf("rebalance on %s: 3 kgo consumers (cooperative-sticky) start at once in a new group on a 3-partition topic;\n", r.c.label)
	fmt.Printf("  time until each owns one partition and has sent its first Fetch, %d runs. With Kafka's default\n", len(sorted))
	fmt.Printf("  group.initial.rebalance.delay.ms (3 s) the join waits twice: the delay, then once more because members\n")
	fmt.Printf("  joined during it (Kafka's InitialDelayedJoin rule), so about 6 s is the protocol's floor:\n  ")
	for _, d := range sorted {
		fmt.Printf(" %.0f ms", ms(d))
	}
	fmt.Printf("; p50 %.0f ms\n", ms(sorted[len(sorted)/2]))
}

// printBrokerGoals prints each goal's verdict to out and reports whether
// all were met. A goal that CLARIFICATIONS.md supersedes is printed as
// "info" and does not count.
func printBrokerGoals(out io.Writer, results []*caseResults) bool {
	a, b, kfake := results[0], results[1], results[2]
	recordsPerSec, cpu := produceResult.recordsPerSec, produceResult.cpuSecPerMillion
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	met := true
	verdict := func(name, measured, target string, ok bool) {
		v := "PASS"
		if !ok {
			v, met = "FAIL", false
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, measured, target, v)
	}
	// info prints a superseded goal's line, which does not count.
	info := func(name, measured, target string) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, measured, target, "info")
	}
	fmt.Fprintln(out)
	fmt.Fprintln(w, "goal\tmeasured\ttarget\tverdict")
	aRate := a.medianProduce(0, recordsPerSec)
	verdict("(a) produce 100 B", fmt.Sprintf("%.0f rec/s", aRate), fmt.Sprintf(">= %d rec/s", produceRecordsMinPerSec), aRate >= produceRecordsMinPerSec)
	ratio := a.pairedProduceRatio(kfake, 0, recordsPerSec)
	info("(a) produce 100 B / kfake", fmt.Sprintf("%.2f", ratio), fmt.Sprintf(">= %d (superseded by CLARIFICATIONS: >= 1, below)", kfakeThroughputRatioMin))
	for i, size := range valueSizes {
		ratio := a.pairedProduceRatio(kfake, i, recordsPerSec)
		verdict(fmt.Sprintf("(a) produce %s / kfake", sizeName(size)), fmt.Sprintf("%.2f", ratio), ">= 1", ratio >= 1)
		cpuRatio := a.pairedProduceRatio(kfake, i, cpu)
		verdict(fmt.Sprintf("(a) broker CPU per record %s / kfake", sizeName(size)), fmt.Sprintf("%.2f", cpuRatio), fmt.Sprintf("<= %.1f", kfakeCPURatioMax), cpuRatio <= kfakeCPURatioMax)
		if size == pageCacheValueBytes && len(a.pageCacheRuns) > 0 {
			pairs := pageCachePairs(a, kfake)
			info(fmt.Sprintf("(a) broker CPU per record %s: the new page-cache write's share", sizeName(size)),
				fmt.Sprintf("%.2f (%.2f of %.2f s per M rec)", medianOfPairs(pairs, pageCacheFigures.machineShare),
					medianOfPairs(pairs, func(f pageCacheFigures) float64 { return f.freshPerMillion }), medianOfPairs(pairs, func(f pageCacheFigures) float64 { return f.strandPerMillion })),
				"none (information: the machine's part)")
			info(fmt.Sprintf("(a) broker CPU per record %s without the new page-cache write / kfake", sizeName(size)), fmt.Sprintf("%.2f", medianOfPairs(pairs, pageCacheFigures.ownOverKfake)),
				"none (information; the goal is on the whole figure)")
		}
	}
	bRate := b.medianProduce(0, recordsPerSec)
	verdict("(b) produce 100 B", fmt.Sprintf("%.0f rec/s", bRate), fmt.Sprintf(">= %d rec/s", produceReplicatedRecordsMinPerSec), bRate >= produceReplicatedRecordsMinPerSec)
	for _, r := range results[:2] {
		for i, size := range valueSizes {
			ratio := r.rawOverLoopback(i)
			verdict(fmt.Sprintf("%s raw consume %s / loopback", r.c.label, sizeName(size)), fmt.Sprintf("%.2f", ratio),
				fmt.Sprintf(">= %.2f", rawConsumeLoopbackRatioMin), ratio >= rawConsumeLoopbackRatioMin)
		}
	}
	verdict("(b) acks=all p99 at half peak", fmt.Sprintf("%.2f ms", ms(b.latency.p99)), fmt.Sprintf("<= %.0f ms", ms(latencyP99Max)), b.latency.p99 <= latencyP99Max)
	floor := b.floor()
	info("(b) acks=all p99 / the null broker's at its rate", fmt.Sprintf("%.2f (limit p99 %.2f ms)", b.latency.p99.Seconds()/floor.p99.Seconds(), ms(floor.p99)),
		"none (the limit: client and machine)")
	for i, l := range b.latencyBelowHalfPeak {
		info(fmt.Sprintf("(b) acks=all p99 at 1/%.0f of the peak", latencyBelowHalfPeakDivisors[i]), fmt.Sprintf("%.2f ms at %.0f rec/s", ms(l.p99), l.ratePerSec), "none (information)")
	}
	for _, r := range results[:2] {
		verdict(fmt.Sprintf("%s broker RssAnon", r.c.label), fmt.Sprintf("%.1f MiB", float64(r.rssAnonMaxKiB)/1024), "<= 256 MiB", r.rssAnonMaxKiB <= rssAnonMaxKiB)
	}
	idempotenceMeasured, idempotenceTarget, idempotenceMet := idempotenceGoal(a)
	verdict(idempotenceGoalName, idempotenceMeasured, idempotenceTarget, idempotenceMet)
	w.Flush()
	return met
}

// profileShown selects the functions printProfiles shows: Strand's own, and
// the leaves where its time ends up (system calls, allocation, copying,
// zeroing, CRC, the garbage collector).
const profileShown = `^strand/|Syscall6$|mallocgc$|memmove$|memclrNoHeapPointers$|crc32.update$|gcBgMarkWorker$`

// printProfiles prints the top functions of each Strand case's CPU
// profiles (merged over a case's nodes) with go tool pprof.
func printProfiles(strandBin string, results []*caseResults) {
	for _, r := range results {
		if len(r.profiles) == 0 {
			continue
		}
		fmt.Printf("\nwhere %s's broker time goes (the whole broker run, all phases; pprof -top -cum of Strand's functions and the runtime's\nmemory and system-call leaves, merged over its %d node(s)):\n", r.c.label, len(r.profiles))
		args := append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=30", "-show=" + profileShown, strandBin}, r.profiles...)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			fmt.Printf("  go tool pprof: %v\n%s", err, out)
			continue
		}
		fmt.Print(string(out))
	}
}

// writeBackPageCache syncs every filesystem before label's fixed-rate run
// and prints how much dirty page cache that wrote back and how long it took.
// The produce runs before it leave gigabytes dirty, which the kernel's
// flusher threads would otherwise write back during the latency run, on the
// same 2 cores: the run would measure that backlog, not its own load.
func writeBackPageCache(label string) error {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return err
	}
	dirtyKiB, err := meminfoKiB(string(data), "Dirty")
	if err != nil {
		return err
	}
	start := time.Now()
	unix.Sync()
	fmt.Printf("before %s's latency run: sync wrote back %d MiB of dirty page cache in %.2f s\n", label, dirtyKiB/1024, time.Since(start).Seconds())
	return nil
}

// meminfoKiB is field's value in /proc/meminfo's text, in KiB.
func meminfoKiB(meminfo, field string) (int64, error) {
	for line := range strings.SplitSeq(meminfo, "\n") {
		if value, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/meminfo: no %s", field)
}
