package cluster

import (
	"cmp"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"strand/core/group"
	"strand/models"
	"strand/sim/sched"
	"strand/sim/simnet"
	"strand/sim/workload"
)

// Options choose one run.
type Options struct {
	Seed uint64
	// Shape is a shape name or "mixed" (drawn from the seed); "" is
	// "standard".
	Shape string
	// Bug is a planted bug's name, or "".
	Bug string
	// TraceWriter receives the event trace as text (VERBOSE).
	TraceWriter io.Writer
	// DiscardLogs drops the nodes' log lines instead of keeping each
	// node's last ones for Result.NodeLogs. Either way the run is the
	// same: logging feeds nothing back (TestLoggingDoesNotChangeTheRun).
	DiscardLogs bool
	// HTMLDir, if set, receives the Porcupine visualizations of the
	// partitions involved in violations.
	HTMLDir string
}

// Result is what one run found.
type Result struct {
	Seed  uint64
	Shape string
	Bug   string
	// Header describes the drawn faults and workload.
	Header string
	// TraceHash fingerprints the run; Summary is the scheduler's line.
	TraceHash uint64
	Summary   string
	SimNs     int64
	Events    uint64
	// Violations found; empty means every check passed. They include the
	// one that halted the run, if any (Halt), and every safety checker's,
	// which run on the history so far after a halt too.
	Violations []models.Violation
	// Halt is the check that halted the run before it finished (liveness,
	// setup, panic, restart...), or "": the liveness verdict.
	Halt string
	// OverBudget names the partitions whose fault budget was exceeded;
	// Excused are the losses found there (Violation.Loss), allowed then
	// and reported.
	OverBudget []models.TopicPartition
	Excused    []models.Violation
	// HTML are the visualizations written.
	HTML []string
	// Stats counts the clients' operations and the faults' hits.
	Stats string
	// Hits names the fault classes and shape features the run actually
	// hit (a fault injected, a shape's feature used), for a sweep's
	// summary of what its seeds covered.
	Hits []string
	// ProducesPrechecked and ProducesLoopChecked count the Produce
	// requests the nodes took pre-checked (as realnet takes every one) and
	// checked on their loop, by the network's draw (simnet.PrecheckWith).
	ProducesPrechecked, ProducesLoopChecked uint64
	// NodeLogs are each node's last log lines, in node order, unless the
	// run discarded them.
	NodeLogs []NodeLog
}

// NodeLog is the last lines one node logged, oldest first.
type NodeLog struct {
	Node int32
	// Logged counts every line the node logged, Lines the last of them.
	Logged uint64
	Lines  []string
}

// Timings of the run, in virtual time.
const (
	setupDeadlineNs    = 30e9
	produceAfterHealNs = 2e9
	convergePollNs     = 500e6
	leaderSampleNs     = 100e6
)

// DeleteRecords in the workload, drawn per seed: noDeletesPerMille of the
// seeds delete nothing; the others every deleteIntervalNsMin to
// deleteIntervalNsMax on average.
const (
	noDeletesPerMille   = 200
	deleteIntervalNsMin = 1e9
	deleteIntervalNsMax = 6e9
)

// porcupineEverySeeds: one seed in this many also runs Porcupine over every
// partition's registers and fails if it disagrees with the direct decision
// (models.RegisterOptions.Porcupine); the others run Porcupine only where
// the direct decision finds a violation.
const porcupineEverySeeds = 16

// SweepGCPercent is the garbage collector's target for a process running
// seeds (cmd/strandsim, strandbench's sim section): a seed's heap is small
// and short-lived, and at the default (100) the collector took about a
// fifth of the CPU. It costs about 200 MB per seed running.
const SweepGCPercent = 400

// run is one run's state.
type run struct {
	// churnChecked counts the churn topics' acknowledged produces
	// attributed to an incarnation and checked (churn.go).
	churnChecked int
	opts         Options
	shape        Shape
	s            *sched.Scheduler
	c            *Cluster
	w            *workload.Workload
	f            *faults
	res          *Result
	tps          []models.TopicPartition
	done         bool
	healNs       int64
	// lastSample is the last leader each node reported per partition.
	lastSample map[sampleKey]models.LeaderSample
	samples    []models.LeaderSample
	// notConverged says why the last convergence poll failed.
	notConverged string
	final        map[models.TopicPartition]models.PartitionFinal
	// quietStats says how many partitions the quiet check saw settle
	// (quiet.go), for the result's stats.
	quietStats string
	// epochStarts are the leader epochs' start offsets the leaders
	// reported (sampleLeaders), for the HW model; epochStartSeen dedups.
	epochStarts    []models.EpochStart
	epochStartSeen map[epochKey]bool
}

// epochKey names a leader epoch of a partition.
type epochKey struct {
	tp    models.TopicPartition
	epoch int32
}

type sampleKey struct {
	node int32
	tp   models.TopicPartition
}

// Run runs one seed to the end and checks it. A panic anywhere in the run
// is reported as a violation, not propagated.
func Run(opts Options) (res Result) {
	if opts.Shape == "" {
		opts.Shape = "standard"
	}
	res = Result{Seed: opts.Seed, Bug: opts.Bug}
	shape, err := ShapeFor(opts.Shape, opts.Seed)
	if err != nil {
		res.Violations = append(res.Violations, models.Violation{Check: "options", Detail: err.Error()})
		return res
	}
	res.Shape = shape.Name
	bugs, err := ParseBug(opts.Bug)
	if err != nil {
		res.Violations = append(res.Violations, models.Violation{Check: "options", Detail: err.Error()})
		return res
	}
	r := &run{opts: opts, shape: shape, res: &res, lastSample: map[sampleKey]models.LeaderSample{}}
	r.s = sched.New(sched.Options{TraceWriter: opts.TraceWriter})
	defer func() {
		res.TraceHash, res.Summary = r.s.TraceHash(), r.s.Summary()
		res.SimNs, res.Events = r.s.NowNs(), r.s.EventsRun()
		if r.w != nil {
			res.Stats = r.w.Stats() + r.quietStats
			if r.shape.HostileClients > 0 {
				res.Stats += " " + r.c.Net.AdmissionStats().String()
			}
		}
		if r.c != nil {
			res.NodeLogs = r.c.nodeLogs()
			stats := r.c.Net.Stats()
			res.ProducesPrechecked, res.ProducesLoopChecked = stats.ProducesPrechecked, stats.ProducesLoopChecked
			res.Stats += fmt.Sprintf(" partitions=%d bridges=%d partitions_at_once_max=%d", stats.Partitions, stats.Bridges,
				stats.PartitionsConcurrentMax) + r.f.deep.hits.String()
			if r.shape.Topology != nil {
				res.Stats += r.f.membership.String()
			}
			if r.shape.ChurnTopics > 0 {
				res.Stats += fmt.Sprintf(" churn_checked=%d", r.churnChecked)
			}
			res.Hits = r.hits(stats)
		}
	}()
	r.simulate(bugs)
	r.checkHistory()
	return res
}

// hits names what the run hit, for Result.Hits.
func (r *run) hits(net simnet.Stats) []string {
	h := r.f.deep.hits
	out := r.shapeHits()
	for _, c := range []struct {
		name string
		hit  bool
	}{
		{"fsync_latency", h.syncsDelayed > 0}, {"io_stall", h.stalls > 0}, {"read_error", h.readErrorsFired > 0},
		{"latent_sector_error", h.latent > 0}, {"misdirected_write", h.misdirected > 0},
		{"corrupt_synced", h.corruptSynced > 0}, {"corrupt_index", h.corruptIndex > 0},
		{"corrupt_checkpoint", h.corruptCheckpoint > 0}, {"corrupt_metadata_tail", h.corruptMetadataTail > 0},
		{"deferred_append_error", h.deferredAppendErrors > 0}, {"repair", h.repairs > 0},
		{"crc_refused", h.corruptBatchesRefused > 0},
		{"bridge_partition", net.Bridges > 0}, {"concurrent_partitions", net.PartitionsConcurrentMax > 1},
		{"broker_joined", r.f.membership.joined > 0}, {"broker_removed", r.f.membership.removed > 0},
		{"joined_broker_replicas", r.c.joinedBrokerHosts()},
	} {
		if c.hit {
			out = append(out, c.name)
		}
	}
	return out
}

// shapeHits names the run's cluster size and, per replication of its
// topics, the replication factor and min.insync.replicas
// ("rf3_min_isr2").
func (r *run) shapeHits() []string {
	out := []string{fmt.Sprintf("brokers%d", r.shape.Brokers)}
	seen := map[string]bool{}
	for i := 0; i < r.shape.Topics; i++ {
		topic := topicName(i)
		rf := r.shape.ReplicationFactor
		if i < len(r.shape.TopicReplication) {
			rf = r.shape.TopicReplication[i].ReplicationFactor
		}
		for _, name := range []string{fmt.Sprintf("rf%d", rf), fmt.Sprintf("rf%d_min_isr%d", rf, r.shape.minInsync(topic))} {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// simulate runs the seed until it finishes or halts; a panic anywhere in
// the run halts it as a violation.
func (r *run) simulate(bugs Bugs) {
	defer func() {
		if p := recover(); p != nil {
			r.res.Violations = append(r.res.Violations, models.Violation{Check: "panic",
				Detail: fmt.Sprintf("%v\n%s", p, firstLines(string(debug.Stack()), 40))})
			if r.res.Halt == "" {
				r.res.Halt = "panic"
			}
		}
	}()
	r.execute(bugs)
}

// checkHistory runs the checkers over what the run recorded, whether it
// finished or halted (then on the history so far: what clients were told
// before a stall must hold all the same), and writes the visualizations
// when something failed. A checker's panic is a violation.
func (r *run) checkHistory() {
	if r.w == nil {
		return // halted before the clients existed
	}
	defer func() {
		if p := recover(); p != nil {
			r.res.Violations = append(r.res.Violations, models.Violation{Check: "panic",
				Detail: fmt.Sprintf("in the checkers: %v\n%s", p, firstLines(string(debug.Stack()), 40))})
		}
	}()
	r.check()
	if len(r.res.Violations) > 0 && r.opts.HTMLDir != "" {
		r.res.HTML = append(r.res.HTML, r.visualize(r.w.History())...)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func (r *run) violate(check, detail string) {
	r.res.Violations = append(r.res.Violations, models.Violation{Check: check, Detail: detail})
	if r.res.Halt == "" {
		r.res.Halt = check
	}
	r.s.Halt(check + ": " + detail)
}

// followerFetchOneIn: one consumer fetch in this many goes to a follower
// (KIP-392), so that the followers' read path runs under faults too.
const followerFetchOneIn = 4

// rewindOneIn: after one consumer fetch in this many the consumer reads
// its partition again from the start (workload.Config.RewindOneIn), so
// that old segments, their indexes and bytes synced long ago, where the
// deep disk faults land, are read again.
const rewindOneIn = 1500

// listOffsetsIntervalNs is the mean time between two rounds of the lag
// monitor's ListOffsets (workload.Config.ListOffsetsIntervalNs): often
// enough to catch a new leader in the window before it commits in its
// epoch.
const listOffsetsIntervalNs = 250e6

func (r *run) execute(bugs Bugs) {
	streams := sched.NewStreams(r.opts.Seed)
	r.f = drawFaults(streams, r.shape)
	c, err := newCluster(r.s, streams, r.f.net, r.f.deep, r.shape, bugs, !r.opts.DiscardLogs, r.violate)
	if err != nil {
		r.violate("setup", err.Error())
		return
	}
	r.c = c
	var topics []string
	for i := 0; i < r.shape.Topics; i++ {
		topics = append(topics, topicName(i))
	}
	deletes := streams.Get("workload/deletes")
	deleteIntervalNs := int64(0)
	if !sched.Chance(deletes, noDeletesPerMille) {
		deleteIntervalNs = sched.Int64Between(deletes, deleteIntervalNsMin, deleteIntervalNsMax)
	}
	wcfg := workload.Config{
		Brokers: c.BrokerIDs(), Topics: topics, Partitions: r.shape.Partitions, ReplicationFactor: r.shape.ReplicationFactor,
		TopicReplication: r.shape.topicReplication(),
		Producers:        r.shape.Producers, RecordsPerSec: r.shape.RecordsPerSec, BatchRecordsMax: 4, Consumers: r.shape.Consumers,
		RequestTimeoutNs: 5e9, ProduceTimeoutMs: 2000, BackoffNs: 100e6, RetriesMax: 20, FetchMaxWaitMs: 200,
		IdempotentProducers: r.shape.IdempotentProducers, Groups: r.shape.Groups, MembersPerGroup: r.shape.MembersPerGroup,
		StaticPerMille: r.shape.StaticPerMille, ChurnTopics: r.shape.ChurnTopics,
		DeleteIntervalNs: deleteIntervalNs, DeleteRand: deletes,
		FollowerFetchOneIn: followerFetchOneIn, FollowerFetchRand: streams.Get("workload/follower-fetches"),
		RewindOneIn: rewindOneIn, RewindRand: streams.Get("workload/rewinds"),
		Forger:                c.forgerConfig(streams.Get("workload/forger")),
		ListOffsetsIntervalNs: listOffsetsIntervalNs, ListOffsetsRand: streams.Get("workload/list-offsets"),
		ScramIntervalNs: drawScramInterval(streams), ScramRand: streams.Get("workload/scram"),
		ACLs: c.aclWorkload(streams.Get("workload/acls")),
	}
	hostileWorkload(&wcfg, r.shape)
	r.w, err = workload.New(r.s, c.Net, streams.Get("workload"), wcfg)
	if err != nil {
		r.violate("setup", err.Error())
		return
	}
	r.tps = r.w.Partitions()
	c.watch(r.tps)
	c.watchChurn()
	r.res.Header = fmt.Sprintf("shape=%s bug=%q %s %s %s", r.shape.Name, r.opts.Bug, r.f, c.Security, r.w.Describe())
	healDelayNs := sched.Int64Between(streams.Get("faults/heal"), r.shape.FaultPhaseNs/2, r.shape.FaultPhaseNs)
	setupDone := false
	r.w.Start(func() {
		setupDone = true
		r.f.start(c, r.tps, func() []models.Produce { return r.w.History().Produces })
		r.sampleLeaders()
		r.pollLogMatching()
		r.s.After(healDelayNs, r.heal)
	})
	r.s.After(setupDeadlineNs, func() {
		if !setupDone {
			r.violate("setup", "topics not created and led within the setup deadline")
		}
	})
	for !r.done && r.s.Halted() == "" {
		if !r.s.Step() {
			r.violate("liveness", "the event queue ran dry")
		}
	}
}

// sampleLeaders records, every leaderSampleNs, each running broker's view
// of each partition's leader when it changed.
func (r *run) sampleLeaders() {
	for _, n := range r.c.Brokers() {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		im := n.Core.Image()
		for _, tp := range r.tps {
			st, ok := im.PartitionByName(tp.Topic, tp.Partition)
			if !ok {
				continue
			}
			k := sampleKey{n.ID, tp}
			last, seen := r.lastSample[k]
			if seen && last.Leader == st.Leader && last.LeaderEpoch == st.LeaderEpoch {
				continue
			}
			smp := models.LeaderSample{AtNs: r.s.NowNs(), Node: n.ID, TP: tp, LeaderEpoch: st.LeaderEpoch, Leader: st.Leader}
			r.lastSample[k] = smp
			r.samples = append(r.samples, smp)
		}
		r.sampleEpochStarts(n)
	}
	if !r.done {
		r.s.After(leaderSampleNs, r.sampleLeaders)
	}
}

// sampleEpochStarts records where the leader epochs n leads start (the HW
// model takes a leader's answers as committed from there on). An epoch led
// for less than a sampling period may be missed: its answers are then
// held to their own epoch only.
func (r *run) sampleEpochStarts(n *Node) {
	for _, tp := range r.tps {
		iv, ok := n.Core.InspectReplica(tp.Topic, tp.Partition)
		if !ok || !iv.Leader || iv.EpochStartOffset < 0 {
			continue
		}
		k := epochKey{tp, iv.LeaderEpoch}
		if r.epochStartSeen[k] {
			continue
		}
		if r.epochStartSeen == nil {
			r.epochStartSeen = map[epochKey]bool{}
		}
		r.epochStartSeen[k] = true
		r.epochStarts = append(r.epochStarts, models.EpochStart{TP: tp, LeaderEpoch: iv.LeaderEpoch, StartOffset: iv.EpochStartOffset})
	}
}

// heal starts the liveness phase: producers stop, the deleter's last round
// moves log starts, the quiet check (quiet.go) runs before anything else is
// produced, and then the acks=all probe and the convergence poll.
func (r *run) heal() {
	r.healNs = r.s.NowNs()
	r.f.refreshRecovered()
	r.f.heal()
	r.s.After(produceAfterHealNs, func() {
		r.w.StopProducing()
		// The last round waits for the last produces' HW moves to reach
		// the followers: a log start told in the same answer as a new HW
		// would hide a follower that is told log starts only then.
		r.s.After(deleteRoundDelayNs, func() {
			r.w.FinalDeleteRound(r.s.NowNs()+deleteRoundNs, func() {
				states := make([]quietState, len(r.tps))
				for i := range states {
					states[i].mismatchSinceNs = -1
				}
				r.quietCheck(states, r.s.NowNs()+quietCheckNs, r.probe)
			})
		})
	})
}

// probe checks that every partition accepts an acks=all write again, then
// polls for convergence, within the shape's ConvergeNs.
func (r *run) probe() {
	r.notConverged = "not every partition acknowledged an acks=all probe"
	deadlineNs := r.s.NowNs() + r.shape.ConvergeNs
	// The hard end of the liveness phase, whatever the probes are doing.
	r.s.After(r.shape.ConvergeNs+convergePollNs, func() {
		if !r.done {
			r.violate("liveness", fmt.Sprintf("no convergence %d s after the probe began: %s; %s",
				r.shape.ConvergeNs/1e9, r.notConverged, r.metadataSummary()))
		}
	})
	r.w.ProbeProduce(deadlineNs, func(unacked []models.TopicPartition) {
		if len(unacked) > 0 {
			r.violate("liveness", fmt.Sprintf("partitions %v accept no acks=all write %d s after the probe began",
				unacked, r.shape.ConvergeNs/1e9))
			return
		}
		r.pollConvergence(deadlineNs)
	})
}

// pollConvergence checks, every convergePollNs, that the cluster has
// converged; past deadlineNs it is a violation.
func (r *run) pollConvergence(deadlineNs int64) {
	if r.s.NowNs() > deadlineNs {
		r.violate("liveness", fmt.Sprintf("no convergence %d s after the probe began: %s; %s",
			r.shape.ConvergeNs/1e9, r.notConverged, r.metadataSummary()))
		return
	}
	retry := func(why string) {
		r.notConverged = why
		r.s.After(convergePollNs, func() { r.pollConvergence(deadlineNs) })
	}
	if n := r.w.Outstanding(); n > 0 {
		retry(fmt.Sprintf("%d produce requests unanswered", n))
		return
	}
	r.w.ProbeHighWatermarks(func(views []workload.LeaderView) {
		final, why := r.converged(views)
		if why != "" {
			retry(why)
			return
		}
		if c := r.c.ActiveController(); c != nil {
			if why := cmp.Or(r.shape.checkReplication(c.Core.Image()), r.c.checkMembership(c.Core.Image())); why != "" {
				r.violate("topology", why)
				return
			}
		}
		r.probeGroups(deadlineNs, func() {
			r.final = final
			r.done = true
		})
	})
}

// converged compares the leaders' answers with every broker's metadata and
// every replica's log; it returns the final state, or why not yet.
//
// Every replica must be in the ISR: only then has the leader checked the
// replica's log against its own epochs in its epoch (a fetch passing the
// DivergingEpoch check, SPEC.md §4.1). A log ending at the HW proves
// nothing by itself: a former leader restarted after the election may
// still hold an uncommitted tail of its old epoch that happens to end
// there, and is truncated only by its first fetch
// (TestConvergenceWaitsForTheISR).
func (r *run) converged(views []workload.LeaderView) (map[models.TopicPartition]models.PartitionFinal, string) {
	final := map[models.TopicPartition]models.PartitionFinal{}
	active := r.c.ActiveController()
	if active == nil {
		return nil, "no active controller"
	}
	if why := r.aclsQuiet(); why != "" {
		return nil, why
	}
	if why := r.c.membersUnfenced(active.Core.Image()); why != "" {
		return nil, why
	}
	for i, tp := range r.tps {
		v := views[i]
		if !v.OK {
			return nil, fmt.Sprintf("%s: no leader answered", tp)
		}
		var replicas []int32
		for _, n := range r.c.Brokers() {
			if !n.Proc.Up() {
				return nil, fmt.Sprintf("broker %d down", n.ID)
			}
			st, ok := n.Core.Image().PartitionByName(tp.Topic, tp.Partition)
			if !ok || st.Leader != v.Leader || st.LeaderEpoch != v.LeaderEpoch {
				return nil, fmt.Sprintf("%s: broker %d's metadata disagrees with leader %d epoch %d", tp, n.ID, v.Leader, v.LeaderEpoch)
			}
			replicas = r.c.memberReplicas(st.Replicas)
			if !slices.Equal(sortedIDs(st.ISR), sortedIDs(replicas)) {
				return nil, fmt.Sprintf("%s: broker %d's metadata has ISR %v of replicas %v", tp, n.ID, st.ISR, replicas)
			}
		}
		pf := models.PartitionFinal{Leader: v.Leader, HighWatermark: v.HighWatermark}
		for _, id := range replicas {
			rl, err := r.c.readReplica(id, tp)
			if err != nil {
				return nil, fmt.Sprintf("%s: replica %d: %v", tp, id, err)
			}
			iv, ok := r.c.Nodes[id-1].Core.InspectReplica(tp.Topic, tp.Partition)
			if !ok {
				return nil, fmt.Sprintf("%s: replica %d not hosted", tp, id)
			}
			rl.LogStartOffset = iv.LogStartOffset
			if id == v.Leader {
				pf.LogStartOffset = iv.LogStartOffset
			}
			if end := logEnd(rl); end != v.HighWatermark {
				return nil, fmt.Sprintf("%s: replica %d ends at %d, high watermark %d", tp, id, end, v.HighWatermark)
			}
			pf.Replicas = append(pf.Replicas, rl)
		}
		final[tp] = pf
	}
	if why := r.scramConverged(); why != "" {
		return nil, why
	}
	for _, tp := range r.tps {
		for i := range final[tp].Replicas {
			if err := decodeRecords(&final[tp].Replicas[i], tp); err != nil {
				return nil, err.Error()
			}
		}
	}
	return final, ""
}

// logEnd is one past rl's last offset, its log start if it holds no batch.
func logEnd(rl models.ReplicaLog) int64 {
	if len(rl.Batches) == 0 {
		return rl.LogStartOffset
	}
	return rl.Batches[len(rl.Batches)-1].LastOffset + 1
}

// check runs every checker over the run: the history checkers always,
// the final-state ones once the cluster converged. A loss (Violation.Loss)
// on a partition over its fault budget is excused and reported; everything
// else is a violation.
func (r *run) check() {
	h := r.w.History()
	res := r.res
	overBudget := map[models.TopicPartition]bool{}
	for _, tp := range r.f.budgeted {
		if r.f.budgetExceeded[tp] {
			overBudget[tp] = true
			res.OverBudget = append(res.OverBudget, tp)
		}
	}
	var vs []models.Violation
	regs, _ := models.CheckRegisters(h, models.RegisterOptions{Porcupine: r.opts.Seed%porcupineEverySeeds == 0})
	vs = append(vs, regs...)
	hw, html := models.CheckHighWatermarkOrder(h, models.HWOptions{EpochStarts: r.epochStarts, OverBudget: overBudget,
		Final: r.final, HTMLDir: r.opts.HTMLDir, Porcupine: r.opts.Seed%porcupineEverySeeds == 0})
	vs = append(vs, hw...)
	res.HTML = append(res.HTML, html...)
	vs = append(vs, models.CheckFetchContiguity(h)...)
	vs = append(vs, models.CheckDeleteRecords(h)...)
	vs = append(vs, models.CheckHighWatermarks(h, r.c.restarts)...)
	vs = append(vs, models.CheckLeaders(r.samples)...)
	vs = append(vs, models.CheckMetadataRegisters(r.w.AdminOps(), r.c.alters, 0)...)
	if r.final != nil {
		mayRegress := map[models.TopicPartition]bool{}
		for _, tp := range r.tps {
			mayRegress[tp] = overBudget[tp] || r.shape.SyncEveryBatch
		}
		vs = append(vs, models.CheckFinal(h, r.final, models.FinalOptions{LogStartMayRegress: mayRegress, Held: r.c.held})...)
	}
	vs = append(vs, r.checkChurn()...)
	vs = append(vs, r.checkGroups()...)
	vs = append(vs, r.checkForgeries()...)
	vs = append(vs, r.checkScram()...)
	vs = append(vs, r.checkACLs()...)
	vs = append(vs, r.checkHostile()...)
	for _, e := range r.w.DecodeErrors() {
		if e.Replica >= 0 && r.c.damagedAt(e.Replica, e.TP, e.AtNs) {
			// The client caught the damage the harness did to that
			// replica: its CRC check is what §2.3 counts on.
			r.f.deep.hits.corruptBatchesRefused++
			continue
		}
		vs = append(vs, models.Violation{Check: "fetch-decode", TP: e.TP, Detail: e.Detail})
	}
	if n := r.c.Net.Stats().MalformedFrames; n > 0 {
		vs = append(vs, models.Violation{Check: "wire", Detail: fmt.Sprintf("%d malformed frames", n)})
	}
	for _, why := range r.f.controlledShutdownFailures {
		vs = append(vs, models.Violation{Check: "controlled-shutdown", Detail: why})
	}
	violations, excused := excuseOverBudget(vs, overBudget)
	res.Violations = append(res.Violations, violations...)
	res.Excused = append(res.Excused, excused...)
}

// excuseOverBudget splits vs into the violations and the losses the fault
// budget excuses: a loss (Violation.Loss) on a partition over its budget,
// for a group's commits its coordinator's offsets partition.
func excuseOverBudget(vs []models.Violation, overBudget map[models.TopicPartition]bool) (violations, excused []models.Violation) {
	for _, v := range vs {
		tp := v.TP
		if v.Group != "" {
			tp = models.TopicPartition{Topic: offsetsTopic, Partition: group.PartitionFor(v.Group, offsetsTopicPartitions)}
		}
		if v.Loss && overBudget[tp] {
			excused = append(excused, v)
			continue
		}
		violations = append(violations, v)
	}
	return violations, excused
}

// visualize writes the Porcupine visualization of each partition named by
// a violation (every partition when a violation names none).
func (r *run) visualize(h models.History) []string {
	want := map[models.TopicPartition]bool{}
	for _, v := range r.res.Violations {
		if v.TP.Topic == "" {
			for _, tp := range r.tps {
				want[tp] = true
			}
			break
		}
		want[v.TP] = true
	}
	var paths []string
	for _, tp := range r.tps {
		if !want[tp] {
			continue
		}
		p, err := models.VisualizePartition(h, tp, r.opts.HTMLDir)
		if err != nil {
			r.res.Violations = append(r.res.Violations, models.Violation{Check: "visualize", TP: tp, Detail: err.Error()})
			continue
		}
		paths = append(paths, p)
	}
	return paths
}

// metadataSummary describes each partition as the lowest running broker's
// metadata has it, for liveness reports.
func (r *run) metadataSummary() string {
	for _, n := range r.c.Brokers() {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		var parts []string
		for _, tp := range r.tps {
			st, ok := n.Core.Image().PartitionByName(tp.Topic, tp.Partition)
			if !ok {
				parts = append(parts, tp.String()+" unknown")
				continue
			}
			parts = append(parts, fmt.Sprintf("%s leader=%d epoch=%d isr=%v elr=%v last_known_elr=%v",
				tp, st.Leader, st.LeaderEpoch, st.ISR, st.ELR, st.LastKnownELR))
		}
		return fmt.Sprintf("broker %d's metadata: %s", n.ID, strings.Join(parts, "; "))
	}
	return "no broker running"
}
