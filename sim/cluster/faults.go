package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/log/checkpoint"
	"strand/models"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
	"strand/sim/workload"
)

// DiskFaults are one run's disk-fault settings, drawn from the seed.
type DiskFaults struct {
	// KeepCachePerMille is the chance a crash is a process crash that
	// keeps the page cache; otherwise it is a power loss, torn half the
	// time.
	KeepCachePerMille sched.PerMille
	// TailDamagePerMille is the chance a power loss also corrupts or
	// truncates a log tail beyond the recovery point.
	TailDamagePerMille sched.PerMille
	// TickNs is how often ENOSPC and fsync faults are considered.
	TickNs int64
	// FullPerMille is the chance per tick that a broker's disk fills for up
	// to FullNsMax.
	FullPerMille sched.PerMille
	FullNsMax    int64
	// FailSyncPerMille is the chance per tick that a broker's next fsync
	// of a segment fails.
	FailSyncPerMille sched.PerMille
	// WritebackNs is how often the kernel writes the page cache back
	// without fsync; 0 never.
	WritebackNs int64
}

func (f DiskFaults) String() string {
	return fmt.Sprintf("disk{keep_cache=%d‰ tail_damage=%d‰ full=%d‰/%dms≤%dms fail_sync=%d‰ writeback_ms=%d}",
		f.KeepCachePerMille, f.TailDamagePerMille, f.FullPerMille, f.TickNs/1e6, f.FullNsMax/1e6, f.FailSyncPerMille, f.WritebackNs/1e6)
}

// drawDiskFaults draws the disk faults, swarm style. The sync-every-batch
// shape gets no tail damage: synced records above a stale recovery-point
// checkpoint are durable, and a medium destroying them is beyond what any
// broker can survive.
func drawDiskFaults(r *rand.Rand, shape Shape) DiskFaults {
	f := DiskFaults{TickNs: 1e9}
	f.KeepCachePerMille = sched.PerMille(r.IntN(1001))
	if !shape.SyncEveryBatch {
		f.TailDamagePerMille = sched.SwarmPerMille(r, 500, 1000)
	}
	f.FullPerMille = sched.SwarmPerMille(r, 600, 100)
	f.FullNsMax = sched.Int64Between(r, 100e6, 3e9)
	f.FailSyncPerMille = sched.SwarmPerMille(r, 600, 100)
	if sched.Chance(r, 500) {
		f.WritebackNs = sched.Int64Between(r, 500e6, 10e9)
	}
	return f
}

// faults drives every fault class of a run and keeps the budget.
type faults struct {
	c          *Cluster
	overBudget bool
	// syncEveryBatch: the shape syncs every batch, so every crash goes
	// ahead and no acknowledged record may be lost.
	syncEveryBatch bool
	// budgetExceeded names the partitions that at some point had more
	// replicas unrecovered than the budget allows.
	budgetExceeded map[models.TopicPartition]bool
	net            simnet.Faults
	process        sched.ProcessFaults
	clock          simclock.Faults
	disk           DiskFaults
	deep           *deepFaults
	crashR, diskR  *rand.Rand
	// partitionKinds is the network chaos's stream for bridges and
	// concurrent partitions (simnet.DrawPartitionKinds).
	partitionKinds *rand.Rand
	// deepCrashR draws the metadata log's tail damage at a power loss.
	deepCrashR     *rand.Rand
	processChaos   *sched.ProcessChaos
	clockChaos     *simclock.Chaos
	diskTick       sched.Handle
	writebackTick  sched.Handle
	electionTick   sched.Handle
	congestionTick sched.Handle
	healed         bool
	tps            []models.TopicPartition
	// budgeted are the partitions whose budget is kept: the workload's
	// and, with consumer groups, the offsets topic's.
	budgeted []models.TopicPartition
	// acked returns the produces recorded so far (the workload's history).
	acked func() []models.Produce
	// chaosNodes are the nodes under the process chaos, by its index: the
	// brokers at the start, then any that joined.
	chaosNodes []*Node
	// membership counts the joins and removals (membership.go).
	membership membershipHits
	// controlledShutdownFailures say which brokers whose disks failed
	// nothing could not shut down cleanly at heal time: violations.
	controlledShutdownFailures []string
}

// drawFaults draws every class; the network's are drawn before the cluster
// exists, since the network is built with them.
func drawFaults(streams *sched.Streams, shape Shape) *faults {
	f := &faults{
		net:     drawNetFaults(streams),
		process: sched.DrawProcessFaults(streams.Get("faults/process")),
		clock:   simclock.DrawFaults(streams.Get("faults/clock")),
		disk:    drawDiskFaults(streams.Get("faults/disk"), shape),
		crashR:  streams.Get("crash"),
		diskR:   streams.Get("disk"),

		partitionKinds: streams.Get("net/partition-kinds"),
		deepCrashR:     streams.Get("crash/deep"),

		budgetExceeded: map[models.TopicPartition]bool{},
	}
	f.overBudget = sched.Chance(streams.Get("faults/budget"), 300)
	f.syncEveryBatch = shape.SyncEveryBatch
	f.deep = &deepFaults{f: f, cfg: drawDeepDiskFaults(streams, shape), r: streams.Get("disk/deep")}
	return f
}

// drawNetFaults draws the network's faults, the partition kinds beyond one
// split at a time from a stream of their own.
func drawNetFaults(streams *sched.Streams) simnet.Faults {
	nf := simnet.DrawFaults(streams.Get("faults/net"))
	simnet.DrawPartitionKinds(streams.Get("faults/net/partition-kinds"), &nf)
	return nf
}

func (f *faults) String() string {
	mode := "within-budget"
	switch {
	case f.syncEveryBatch:
		mode = "any-crash(sync-every-batch)"
	case f.overBudget:
		mode = "over-budget"
	}
	return strings.Join([]string{mode, f.net.String(), f.process.String(), f.clock.String(), f.disk.String(), f.deep.cfg.String()}, " ")
}

// start begins the process, clock and disk faults (the network's chaos is
// started here too).
func (f *faults) start(c *Cluster, tps []models.TopicPartition, produces func() []models.Produce) {
	f.c, f.tps, f.acked = c, tps, produces
	f.budgeted = append(f.budgeted, tps...)
	for i := 0; i < c.shape.ChurnTopics; i++ {
		for p := int32(0); p < workload.ChurnPartitionsMax; p++ {
			f.budgeted = append(f.budgeted, models.TopicPartition{Topic: churnTopicName(i), Partition: p})
		}
	}
	if c.shape.Groups > 0 {
		for p := int32(0); p < offsetsTopicPartitions; p++ {
			f.budgeted = append(f.budgeted, models.TopicPartition{Topic: offsetsTopic, Partition: p})
		}
	}
	c.Net.StartChaos(f.partitionKinds)
	var procs []*sched.Node
	f.chaosNodes = slices.Clone(c.Brokers())
	for _, n := range f.chaosNodes {
		procs = append(procs, n.Proc)
	}
	f.processChaos = sched.StartProcessChaos(c.S, c.Streams.Get("process"), procs, f.process, sched.ProcessHooks{
		MayCrash: func(i int) bool { return f.mayCrash(f.chaosNodes[i]) },
		Restart: func(i int) {
			if !f.chaosNodes[i].absent {
				c.restart(f.chaosNodes[i])
			}
		},
	})
	f.startMembership()
	var clocks []*simclock.Clock
	for _, n := range c.Nodes {
		clocks = append(clocks, n.Clock)
	}
	f.clockChaos = simclock.StartChaos(c.S, c.Streams.Get("clock"), clocks, f.clock)
	if f.disk.FullPerMille > 0 || f.disk.FailSyncPerMille > 0 {
		f.diskTick = c.S.After(f.disk.TickNs, f.diskStep)
	}
	if f.disk.WritebackNs > 0 {
		f.writebackTick = c.S.After(f.disk.WritebackNs, f.writeback)
	}
	f.deep.start()
	if c.shape.ElectionChaos {
		r := c.Streams.Get("faults/elections")
		f.electionTick = c.S.After(sched.Int64Between(r, 1e9, 3e9), func() { f.electionStep(r) })
	}
	if c.shape.CongestionChaos {
		r := c.Streams.Get("faults/congestion")
		f.congestionTick = c.S.After(sched.Int64Between(r, 1e9, 3e9), func() { f.congestionStep(r) })
	}
}

// congestionStep is the congestion shape's fault: one node's links to
// every other node clog (a saturated NIC, a noisy neighbour), so that the
// followers of every partition it leads fall behind at once and its ISRs
// shrink to the leader alone, where min.insync.replicas decides whether a
// write may be acknowledged.
func (f *faults) congestionStep(r *rand.Rand) {
	c := f.c
	if f.healed {
		return
	}
	congested := c.Nodes[r.IntN(len(c.Nodes))]
	durationNs, delayNs := sched.Int64Between(r, 500e6, 2000e6), sched.Int64Between(r, 200e6, 800e6)
	for _, other := range c.Nodes {
		if other != congested {
			c.Net.Clog(congested.Net.Host(), other.Net.Host(), durationNs, delayNs)
		}
	}
	f.congestionTick = c.S.After(sched.Int64Between(r, 500e6, 1500e6), func() { f.congestionStep(r) })
}

// electionStep is the election-chaos shape's fault: the links between
// controller voters turn slow (a WAN-like quorum), and the active
// controller's node crashes, within the budget, and restarts before its
// followers' fetch timeout runs out, so that they stand for election while
// it is back and unattached, grants pre-votes to both, and the slow links
// let two candidates stand in one epoch: the split votes that pre-vote
// otherwise makes rare, where a voter that votes twice shows.
func (f *faults) electionStep(r *rand.Rand) {
	c := f.c
	if f.healed {
		return
	}
	periodNs := sched.Int64Between(r, 2e9, 5e9)
	voters := c.VoterIDs()
	for _, a := range voters {
		for _, b := range voters {
			if a != b {
				c.Net.Clog(c.Nodes[a-1].Net.Host(), c.Nodes[b-1].Net.Host(), periodNs, sched.Int64Between(r, 20e6, 400e6))
			}
		}
	}
	for _, n := range c.Brokers() {
		if n.Proc.Up() && !n.Proc.Paused() && n.Core != nil && n.Core.ControllerActive() && f.mayCrash(n) {
			c.S.Trace(sched.Record{Kind: "fault.crash_controller", Node: n.ID})
			n.Proc.Crash()
			incarnation := n.Proc.Incarnation()
			c.S.After(sched.Int64Between(r, 100e6, 1500e6), func() {
				if !f.healed && !n.Proc.Up() && n.Proc.Incarnation() == incarnation {
					c.restart(n)
				}
			})
			break
		}
	}
	f.electionTick = c.S.After(periodNs, func() { f.electionStep(r) })
}

// mayCrash chooses the coming crash's mode and keeps the budget
// (admitLoss): a crash refused within budget does not happen.
func (f *faults) mayCrash(n *Node) bool {
	c := f.c
	if n.absent || n.leaving || !f.admitLoss(n, "fault.crash_refused") {
		return false
	}
	mode := memdisk.CrashKeepAll
	if !sched.Chance(f.crashR, f.disk.KeepCachePerMille) {
		mode = memdisk.CrashLoseAll
		if f.crashR.IntN(2) == 0 {
			mode = memdisk.CrashTorn
		}
	}
	n.nextCrash = mode
	if mode != memdisk.CrashKeepAll && sched.Chance(f.crashR, f.disk.TailDamagePerMille) {
		// Damage the tail once the crash has reverted the disk.
		c.S.After(0, func() { f.damageTail(n) })
	}
	if mode != memdisk.CrashKeepAll && sched.Chance(f.deepCrashR, f.deep.cfg.CorruptFilePerMille) {
		synced, _ := n.Disk.DurableSize(metadataLogFile)
		c.S.After(0, func() { f.deep.corruptAtPowerLoss(n, synced) })
	}
	c.S.Trace(sched.Record{Kind: "fault.crash_mode", Node: n.ID, A: int64(mode)})
	return true
}

// admitLoss keeps the fault budget, per partition (CLARIFICATIONS.md, "The
// fault budget"), for a fault that may cost n unsynced data: a crash, or a
// disk fault, which takes the log directory offline (Kafka then halts the
// broker, so it restarts as after a crash). Every such fault counts, a
// process crash that keeps the page cache too: a broker restarted without
// a clean shutdown cannot know what it lost, registers as unclean and
// leaves the ISR and the ELR (KIP-966), exactly as after a power loss.
// n's replicas stay unrecovered until refreshRecovered clears them. Within
// budget the fault is refused (traced as refused, with the most
// unrecovered replicas of any of n's partitions) when some partition of
// n's would have more than min.insync.replicas−1 replicas unrecovered;
// over budget it goes ahead and those partitions are marked over budget.
// The sync-every-batch shape lets every fault through and stays strict.
func (f *faults) admitLoss(n *Node, refused string) bool {
	c := f.c
	f.refreshRecovered()
	var exceeded []models.TopicPartition
	most := 0
	for _, tp := range f.budgeted {
		replicas := f.replicasOf(tp)
		if !containsID(replicas, n.ID) || n.unrecovered[tp] {
			continue
		}
		unrecovered := 0
		for _, other := range c.Nodes { // removed brokers' replicas stay unrecovered

			if containsID(replicas, other.ID) && other.unrecovered[tp] {
				unrecovered++
			}
		}
		most = max(most, unrecovered)
		if unrecovered+1 > effectiveMinInsync(c.shape.minInsync(tp.Topic), replicas)-1 && !c.shape.SyncEveryBatch {
			exceeded = append(exceeded, tp)
		}
	}
	if len(exceeded) > 0 {
		if !f.overBudget {
			c.S.Trace(sched.Record{Kind: refused, Node: n.ID, A: int64(most)})
			return false
		}
		for _, tp := range exceeded {
			f.budgetExceeded[tp] = true
		}
	}
	if n.unrecovered == nil {
		n.unrecovered = map[models.TopicPartition]bool{}
	}
	for _, tp := range f.budgeted {
		if containsID(f.replicasOf(tp), n.ID) {
			n.unrecovered[tp] = true
		}
	}
	n.mustReach = f.ackedEnds()
	return true
}

// effectiveMinInsync is the min.insync.replicas a partition with replicas
// is held to: the topic's, capped at its replication factor, as Kafka's
// (ReplicationControlManager.getTopicEffectiveMinIsr) and core/replica's
// effectiveMinISR cap it. A partition of 1 replica under a brokers'
// default of 2 acknowledges acks=all writes with that one replica alone,
// so its budget is 0.
func effectiveMinInsync(minInsync int, replicas []int32) int {
	return min(minInsync, len(replicas))
}

// replicasOf is tp's assignment as the lowest running broker's metadata
// has it; every broker before any metadata says otherwise.
func (f *faults) replicasOf(tp models.TopicPartition) []int32 {
	for _, n := range f.c.Brokers() {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		if s, ok := n.Core.Image().PartitionByName(tp.Topic, tp.Partition); ok {
			return s.Replicas
		}
	}
	var all []int32
	for _, n := range f.c.Brokers() {
		all = append(all, n.ID)
	}
	return all
}

// refreshRecovered clears, per partition, the unrecovered replicas of
// brokers that are up, registered in this incarnation and in that
// partition's ISR as every running broker's metadata says, whose log of it
// holds every record acknowledged before they lost data, and whose disk
// has no armed fault and has failed nothing since the broker started. ISR
// membership alone is not enough: a broker that lost data and kept its
// place in the ISR is the kind of bug the run is looking for, and must not
// widen the budget; metadata from before its new registration committed
// (a controller failing over takes seconds) still shows the ISR of before
// the crash; and a disk fault whose failure is still to come, or whose
// directory went offline, will cost the broker its replicas. A broker with
// every replica recovered is traced as recovered.
func (f *faults) refreshRecovered() {
	c := f.c
	for _, n := range c.Brokers() {
		if len(n.unrecovered) == 0 || !n.Proc.Up() || n.failNextSync || n.diskFull || n.storageFailed ||
			n.readFaultArmed || len(n.damage) > 0 {
			continue
		}
		registered := true
		for _, viewer := range c.Brokers() {
			if !viewer.Proc.Up() || viewer.Core == nil {
				continue
			}
			if b, ok := viewer.Core.Image().Broker(n.ID); !ok || b.IncarnationID != n.Core.Incarnation() {
				registered = false
			}
		}
		if !registered {
			continue
		}
		for _, tp := range f.budgeted {
			if !n.unrecovered[tp] || c.logEnd(n, tp) < n.mustReach[tp] {
				continue
			}
			// A partition no running broker knows (an offsets partition
			// before the first group needs it) has no replica to recover.
			inISR, known := true, false
			for _, viewer := range c.Brokers() {
				if !viewer.Proc.Up() || viewer.Core == nil {
					continue
				}
				s, ok := viewer.Core.Image().PartitionByName(tp.Topic, tp.Partition)
				known = known || ok
				if !ok || !containsID(s.ISR, n.ID) {
					inISR = false
				}
			}
			inISR = inISR || !known
			if inISR {
				delete(n.unrecovered, tp)
			}
		}
		if len(n.unrecovered) == 0 {
			c.S.Trace(sched.Record{Kind: "fault.recovered", Node: n.ID})
		}
	}
}

// ackedEnds is, per partition, one past the highest offset acknowledged
// to an acks=all produce so far.
func (f *faults) ackedEnds() map[models.TopicPartition]int64 {
	ends := map[models.TopicPartition]int64{}
	for _, p := range f.acked() {
		if p.Acks == -1 && p.Acked {
			ends[p.TP] = max(ends[p.TP], p.BaseOffset+int64(len(p.Values)))
		}
	}
	return ends
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// damageTail corrupts or truncates the newest segment of a random
// partition of n beyond its checkpointed recovery point, as a power loss
// in the middle of writeback can leave it.
func (f *faults) damageTail(n *Node) {
	if len(f.tps) == 0 {
		return
	}
	tp := f.tps[f.diskR.IntN(len(f.tps))]
	dir := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	names, err := n.Disk.List(dir)
	if err != nil {
		return
	}
	var segments []string
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			segments = append(segments, name)
		}
	}
	if len(segments) == 0 {
		return
	}
	sort.Strings(segments)
	path := dir + "/" + segments[len(segments)-1]
	data, err := n.Disk.ReadFile(path)
	if err != nil {
		return
	}
	start := int64(positionOfOffset(data, recoveryPoint(n.Disk, tp)))
	if start >= int64(len(data)) {
		return
	}
	at := sched.Int64Between(f.diskR, start, int64(len(data))-1)
	// Only damage that was made is traced: a flip or a cut the disk
	// refused (a file it no longer holds) leaves the log as it was.
	if f.diskR.IntN(2) == 0 {
		if err := n.Disk.FlipBit(path, at, uint(f.diskR.IntN(8))); err == nil {
			f.c.S.Trace(sched.Record{Kind: "fault.disk_flip", Node: n.ID, A: at, Text: path})
		}
	} else if err := n.Disk.TruncateFile(path, at); err == nil {
		f.c.S.Trace(sched.Record{Kind: "fault.disk_truncate", Node: n.ID, A: at, Text: path})
	}
}

// recoveryPoint reads tp's checkpointed recovery point from the disk, 0 if
// none.
func recoveryPoint(d *memdisk.Disk, tp models.TopicPartition) int64 {
	data, err := d.ReadFile(log.RecoveryPointCheckpointName)
	if err != nil {
		return 0
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		if e.Topic == tp.Topic && e.Partition == tp.Partition {
			return e.Offset
		}
	}
	return 0
}

// positionOfOffset is the byte position of the first batch of a segment's
// data holding offsets at or above offset, or the data's size.
func positionOfOffset(data []byte, offset int64) int {
	pos := 0
	for pos < len(data) {
		h, err := batch.ParseHeader(data[pos:])
		if err != nil {
			return pos
		}
		if h.BaseOffset+int64(h.LastOffsetDelta) >= offset {
			return pos
		}
		pos += int(h.Length) + 12
	}
	return len(data)
}

// diskStep considers an ENOSPC period and an fsync failure on a random
// broker. Either may take its log directory offline, so each counts
// against the budget as a crash does (admitLoss) and is refused within it
// when it would exceed it.
func (f *faults) diskStep() {
	c := f.c
	brokers := c.Brokers()
	n := brokers[f.diskR.IntN(len(brokers))]
	if n.Proc.Up() && sched.Chance(f.diskR, f.disk.FullPerMille) && f.admitLoss(n, "fault.disk_refused") {
		n.setDiskFull(true)
		n.diskFaulted = true
		incarnation := n.Proc.Incarnation()
		c.S.Trace(sched.Record{Kind: "fault.disk_full", Node: n.ID})
		c.S.After(sched.Int64Between(f.diskR, 1, f.disk.FullNsMax), func() {
			if n.Proc.Incarnation() == incarnation {
				n.setDiskFull(false)
			}
		})
	}
	if n.Proc.Up() && sched.Chance(f.diskR, f.disk.FailSyncPerMille) && f.admitLoss(n, "fault.disk_refused") {
		n.failNextSync = true
		n.diskFaulted = true
		c.S.Trace(sched.Record{Kind: "fault.fail_sync", Node: n.ID})
	}
	f.diskTick = c.S.After(f.disk.TickNs, f.diskStep)
}

func (f *faults) writeback() {
	for _, n := range f.c.Nodes {
		n.Disk.Writeback()
	}
	f.writebackTick = f.c.S.After(f.disk.WritebackNs, f.writeback)
}

// heal ends every fault for the liveness phase. Brokers whose log
// directory may have failed are restarted (a process restart keeps the
// page cache), as an operator would after replacing the disk.
func (f *faults) heal() {
	c := f.c
	f.healed = true
	f.electionTick.Cancel()
	f.congestionTick.Cancel()
	c.Net.Heal()
	f.clockChaos.Heal()
	f.diskTick.Cancel()
	f.deep.heal()
	for _, n := range c.Brokers() {
		n.setDiskFull(false)
		n.failNextSync = false
	}
	f.processChaos.Heal()
	for _, n := range c.Brokers() {
		if (n.diskFaulted || n.storageFailed || len(n.damage) > 0) && n.Proc.Up() {
			f.cleanRestart(n)
		}
	}
	c.S.Trace(sched.Record{Kind: "fault.heal", Node: -1})
}

// The offsets topic (core/broker's offsetsTopic) and its partition count as
// brokerConfig sets offsets.topic.num.partitions.
const (
	offsetsTopic           = "__consumer_offsets"
	offsetsTopicPartitions = 3
)

// cleanRestartWaitNs bounds a controlled shutdown at heal time; past it the
// broker is restarted the hard way.
const cleanRestartWaitNs = 10e9

// cleanRestart restarts n the way an operator would after a disk fault.
// A broker whose disk failed something (its log or metadata log directory
// went offline) is one Kafka would have halted: it restarts at once,
// uncleanly, keeping the page cache; the fault was counted against the
// budget when it was drawn (admitLoss). Left running until a controlled
// shutdown timed out, such brokers would keep their dead voters out of the
// controller quorum, and a healthy broker's controlled shutdown would then
// wait for a controller that could not form. A broker
// whose disk failed nothing shuts down through a controlled shutdown
// (leadership moves away, logs flushed, clean-shutdown marker written),
// then restarts keeping the page cache; if that does not finish in time,
// or Close fails, it is a violation (controlled-shutdown), never a budget
// event.
func (f *faults) cleanRestart(n *Node) {
	c := f.c
	incarnation := n.Proc.Incarnation()
	restarted := false
	restart := func(clean bool, why string) {
		if restarted || n.Proc.Incarnation() != incarnation || !n.Proc.Up() {
			return
		}
		restarted = true
		cleanFlag := int64(0)
		if clean {
			cleanFlag = 1
		}
		c.S.Trace(sched.Record{Kind: "fault.heal_restart", Node: n.ID, A: cleanFlag})
		if !clean && !n.storageFailed {
			f.controlledShutdownFailures = append(f.controlledShutdownFailures,
				fmt.Sprintf("broker %d, whose disk failed nothing, could not shut down cleanly after healing: %s", n.ID, why))
		}
		n.nextCrash = memdisk.CrashKeepAll
		n.Proc.Crash()
		c.restart(n)
	}
	if n.storageFailed || len(n.damage) > 0 {
		if len(n.damage) > 0 {
			// The operator repairs what the harness damaged before
			// the broker starts again.
			n.nextCrash = memdisk.CrashKeepAll
			n.Proc.Crash()
			c.repair(n, "heal")
			c.restart(n)
			return
		}
		restart(false, "")
		return
	}
	core := n.Core
	core.BeginShutdown(func() {
		core.Close(func(err error) {
			c.S.After(0, func() {
				why := ""
				if err != nil {
					why = "Close: " + err.Error()
				}
				restart(err == nil, why)
			})
		})
	})
	c.S.After(cleanRestartWaitNs, func() {
		restart(false, fmt.Sprintf("the controlled shutdown did not finish within %d s", int64(cleanRestartWaitNs/1e9)))
	})
}
