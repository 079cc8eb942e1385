package cluster

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/log/checkpoint"
	"strand/models"
	"strand/sim/sched"
)

// DeepDiskFaults are the disk faults beyond DiskFaults: the device's
// timing, its read errors, misdirected writes, and corruption of what was
// synced. Each class is drawn from a stream of its own (drawDeepDiskFaults),
// so that adding one reshuffles no other class's draws; SPEC.md §2.3 says
// what the broker must do about each.
type DeepDiskFaults struct {
	// SyncLatencyNsMin and SyncLatencyNsMax bound how long a Sync or
	// SyncDir takes to complete, in simulated time; SyncTailPerMille of
	// them take up to SyncTailNsMax more. Completions stay in order per
	// disk, as diskio's per-directory I/O worker completes them. 0: at
	// once, as before.
	SyncLatencyNsMin, SyncLatencyNsMax int64
	SyncTailPerMille                   sched.PerMille
	SyncTailNsMax                      int64
	// StallOneIn: about one file operation in StallOneIn stalls the
	// node's event loop for up to StallNsMax, as a read or write that
	// blocks does (0: never).
	StallOneIn int64
	StallNsMax int64
	// TickNs is how often the injected faults below are considered, each
	// on a broker drawn at random.
	TickNs int64
	// ReadErrorPerMille: a transient read error armed on a region of one
	// of a partition's files; LatentPerMille: a latent sector error under
	// synced bytes of one, failing every read until rewritten.
	ReadErrorPerMille, LatentPerMille sched.PerMille
	// MisdirectPerMille: the next write of a partition's active segment
	// reaches the medium at the wrong place.
	MisdirectPerMille sched.PerMille
	// CorruptSyncedPerMille: a bit of a synced batch of one replica flips
	// (in the bytes its CRC covers). CorruptFilePerMille: a bit of an
	// index flips (per tick), and, at a power loss, one of the files the
	// next start reads: a checkpoint, or the metadata log past what it
	// had synced.
	CorruptSyncedPerMille, CorruptFilePerMille sched.PerMille
	// DeferAppendErrors: the disk reports a failed Append one call later,
	// as diskio's write worker does.
	DeferAppendErrors bool
}

func (f DeepDiskFaults) String() string {
	return fmt.Sprintf("disk2{sync_us=%d..%d tail=%d‰≤%dms stall=1/%d≤%dms read_error=%d‰ latent=%d‰ misdirect=%d‰ "+
		"corrupt_synced=%d‰ corrupt_file=%d‰ defer_append_errors=%v}",
		f.SyncLatencyNsMin/1e3, f.SyncLatencyNsMax/1e3, f.SyncTailPerMille, f.SyncTailNsMax/1e6, f.StallOneIn, f.StallNsMax/1e6,
		f.ReadErrorPerMille, f.LatentPerMille, f.MisdirectPerMille, f.CorruptSyncedPerMille, f.CorruptFilePerMille, f.DeferAppendErrors)
}

// drawDeepDiskFaults draws each class, swarm style, from its own stream.
// The sync-every-batch shape gets none of the faults that destroy synced
// bytes (latent sector errors, misdirected writes, synced corruption):
// there every crash goes ahead, and a medium destroying synced records on
// every replica is beyond what any broker can survive.
func drawDeepDiskFaults(streams *sched.Streams, shape Shape) DeepDiskFaults {
	f := DeepDiskFaults{TickNs: 1e9}
	if r := streams.Get("faults/disk/sync-latency"); !sched.Chance(r, 300) {
		f.SyncLatencyNsMin = sched.Int64Between(r, 0, 2e6)
		f.SyncLatencyNsMax = f.SyncLatencyNsMin + sched.Int64Between(r, 0, 30e6)
		f.SyncTailPerMille = sched.SwarmPerMille(r, 500, 50)
		f.SyncTailNsMax = sched.Int64Between(r, 1e6, 1e9)
	}
	if r := streams.Get("faults/disk/stalls"); !sched.Chance(r, 500) {
		f.StallOneIn = sched.Int64Between(r, 200, 20000)
		f.StallNsMax = sched.Int64Between(r, 1e6, 500e6)
	}
	r := streams.Get("faults/disk/read-errors")
	f.ReadErrorPerMille = sched.SwarmPerMille(r, 500, 100)
	latent := sched.SwarmPerMille(r, 500, 100)
	misdirect := sched.SwarmPerMille(streams.Get("faults/disk/misdirect"), 500, 100)
	r = streams.Get("faults/disk/corrupt")
	corruptSynced := sched.SwarmPerMille(r, 500, 100)
	f.CorruptFilePerMille = sched.SwarmPerMille(r, 500, 300)
	if !shape.SyncEveryBatch {
		f.LatentPerMille, f.MisdirectPerMille, f.CorruptSyncedPerMille = latent, misdirect, corruptSynced
	}
	f.DeferAppendErrors = sched.Chance(streams.Get("faults/disk/defer-append-errors"), 500)
	return f
}

// damageKind is how the operator repairs a damage the harness injected.
type damageKind int

const (
	// damageReplica: the partition's replica on this broker holds bytes it
	// cannot trust (a latent sector error, a misdirected write, synced
	// corruption, a leader-epoch checkpoint that does not parse): its
	// directory is removed, and the broker restarts uncleanly and fetches
	// it again, as an operator replacing a damaged replica does.
	damageReplica damageKind = iota
	// damageFile: a file the broker can do without (an index, which it
	// rebuilds; the HW checkpoint, without which HWs restart from the
	// leaders'), removed.
	damageFile
)

// damage is one injected damage still on a broker's disk.
type damage struct {
	kind damageKind
	tp   models.TopicPartition // damageReplica
	path string                // damageFile
}

// deepFaults drives the DeepDiskFaults of a run.
type deepFaults struct {
	f    *faults
	cfg  DeepDiskFaults
	r    *rand.Rand // injection choices ("disk/deep")
	tick sched.Handle
	// hits counts what happened, for the result's stats.
	hits deepHits
}

// deepHits counts the deep faults a run injected and saw.
type deepHits struct {
	syncsDelayed, stalls, readErrorsArmed, readErrorsFired, latent, misdirected               int
	corruptSynced, corruptIndex, corruptCheckpoint, corruptMetadataTail, deferredAppendErrors int
	repairs, corruptBatchesRefused                                                            int
}

func (h deepHits) String() string {
	return fmt.Sprintf(" syncs_delayed=%d io_stalls=%d read_errors=%d/%d latent=%d misdirected=%d corrupt_synced=%d "+
		"corrupt_index=%d corrupt_checkpoint=%d corrupt_metadata_tail=%d deferred_append_errors=%d repairs=%d crc_refused=%d",
		h.syncsDelayed, h.stalls, h.readErrorsFired, h.readErrorsArmed, h.latent, h.misdirected, h.corruptSynced,
		h.corruptIndex, h.corruptCheckpoint, h.corruptMetadataTail, h.deferredAppendErrors, h.repairs, h.corruptBatchesRefused)
}

// start begins the injected faults.
func (d *deepFaults) start() {
	c := d.f.c
	if d.cfg.ReadErrorPerMille+d.cfg.LatentPerMille+d.cfg.MisdirectPerMille+d.cfg.CorruptSyncedPerMille+d.cfg.CorruptFilePerMille > 0 {
		d.tick = c.S.After(d.cfg.TickNs, d.step)
	}
}

// heal stops injecting and stalling; delays of Syncs stay (a slow device
// stays slow), without their tail.
func (d *deepFaults) heal() {
	d.tick.Cancel()
	d.cfg.StallOneIn = 0
	d.cfg.SyncTailPerMille = 0
}

// step considers each injected fault on a running broker drawn at random.
// Every fault that may cost the replica data or take its log directory
// offline counts against the budget (admitLoss) and is refused when it
// would exceed it.
func (d *deepFaults) step() {
	f, c := d.f, d.f.c
	brokers := c.Brokers()
	n := brokers[d.r.IntN(len(brokers))]
	if n.Proc.Up() && n.Core != nil {
		if sched.Chance(d.r, d.cfg.ReadErrorPerMille) && f.admitLoss(n, "fault.disk_refused") {
			d.armReadError(n, false)
		}
		if sched.Chance(d.r, d.cfg.LatentPerMille) && f.admitLoss(n, "fault.disk_refused") {
			d.armReadError(n, true)
		}
		if sched.Chance(d.r, d.cfg.MisdirectPerMille) && f.admitLoss(n, "fault.disk_refused") {
			d.misdirect(n)
		}
		if sched.Chance(d.r, d.cfg.CorruptSyncedPerMille) && f.admitLoss(n, "fault.disk_refused") {
			d.corruptSynced(n)
		}
		if sched.Chance(d.r, d.cfg.CorruptFilePerMille) {
			d.corruptIndex(n)
		}
	}
	d.tick = c.S.After(d.cfg.TickNs, d.step)
}

// partitionDir draws one of the workload's partitions and its directory.
func (d *deepFaults) partitionDir() (models.TopicPartition, string) {
	tps := d.f.tps
	tp := tps[d.r.IntN(len(tps))]
	return tp, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
}

// filesIn lists dir's files with one of the suffixes, sorted.
func filesIn(n *Node, dir string, suffixes ...string) []string {
	names, err := n.Disk.List(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range names {
		for _, s := range suffixes {
			if strings.HasSuffix(name, s) {
				out = append(out, dir+"/"+name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// armReadError arms a read error on a region of a file of a partition of
// n: transient (the next read touching it fails: a segment's last bytes or
// an index, read soon), or latent (a bad sector under synced bytes, which
// fails every read until a write covers it).
func (d *deepFaults) armReadError(n *Node, latent bool) {
	tp, dir := d.partitionDir()
	files := filesIn(n, dir, ".log", ".index", ".timeindex")
	if len(files) == 0 {
		return
	}
	path := files[d.r.IntN(len(files))]
	size, _ := n.Disk.DurableSize(path)
	if !latent {
		data, err := n.Disk.ReadFile(path)
		if err != nil {
			return
		}
		size = int64(len(data))
	}
	if size == 0 {
		return
	}
	at := sched.Int64Between(d.r, 0, size-1)
	length := min(sched.Int64Between(d.r, 1, 4096), size-at)
	if err := n.Disk.FailReads(path, at, length, latent); err != nil {
		return
	}
	kind := int64(0)
	if latent {
		kind = 1
		d.hits.latent++
		d.f.c.addDamage(n, damage{kind: damageReplica, tp: tp})
	} else {
		d.hits.readErrorsArmed++
		n.readFaultArmed, n.diskFaulted = true, true
	}
	d.f.c.S.Trace(sched.Record{Kind: "fault.read_error", Node: n.ID, A: at, B: length, C: kind, Text: path})
}

// misdirect arms the next write of a partition's active segment to reach
// the medium elsewhere: inside the same segment, in its offset index, or
// in an older segment, at a place within what is already synced there.
func (d *deepFaults) misdirect(n *Node) {
	tp, dir := d.partitionDir()
	segments := filesIn(n, dir, ".log")
	if len(segments) == 0 {
		return
	}
	active := segments[len(segments)-1]
	targets := append(filesIn(n, dir, ".index"), segments...)
	to := targets[d.r.IntN(len(targets))]
	size, _ := n.Disk.DurableSize(to)
	at := int64(0)
	if size > 0 {
		at = sched.Int64Between(d.r, 0, size-1)
	}
	if err := n.Disk.MisdirectNextWrite(active, to, at); err != nil {
		return
	}
	d.hits.misdirected++
	d.f.c.addDamage(n, damage{kind: damageReplica, tp: tp})
	d.f.c.S.Trace(sched.Record{Kind: "fault.misdirect", Node: n.ID, A: at, Text: active + " -> " + to})
}

// corruptSynced flips a bit of a synced batch of one of n's replicas, in
// the bytes its CRC-32C covers (from the magic byte on): the flip is one
// that every consumer and follower can catch. The base offset, length and
// leader epoch before them are not flipped: no Kafka client checks them
// (SPEC.md §2.3).
func (d *deepFaults) corruptSynced(n *Node) {
	tp, dir := d.partitionDir()
	if led := d.ledBy(n); len(led) > 0 && d.r.IntN(2) == 0 {
		// Half the time a partition n leads, whose consumers read it.
		tp = led[d.r.IntN(len(led))]
		dir = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	segments := filesIn(n, dir, ".log")
	if len(segments) == 0 {
		return
	}
	path := segments[d.r.IntN(len(segments))]
	synced, _ := n.Disk.DurableSize(path)
	data, err := n.Disk.ReadFile(path)
	if err != nil {
		return
	}
	type span struct{ from, to int64 }
	var covered []span
	for pos := int64(0); pos < synced && pos < int64(len(data)); {
		h, err := batch.ParseHeader(data[pos:])
		if err != nil || h.Length <= 0 || pos+h.TotalBytes() > synced {
			break
		}
		covered = append(covered, span{pos + batchMagicOffset, pos + h.TotalBytes()})
		pos += h.TotalBytes()
	}
	if len(covered) == 0 {
		return
	}
	i := d.r.IntN(len(covered))
	if d.r.IntN(4) != 0 {
		// Mostly one of the last batches synced, which lagging
		// consumers have yet to read.
		i = len(covered) - 1 - d.r.IntN(min(len(covered), recentBatches))
	}
	s := covered[i]
	at := sched.Int64Between(d.r, s.from, s.to-1)
	if err := n.Disk.FlipBit(path, at, uint(d.r.IntN(8))); err != nil {
		return
	}
	d.hits.corruptSynced++
	d.f.c.addDamage(n, damage{kind: damageReplica, tp: tp})
	d.f.c.S.Trace(sched.Record{Kind: "fault.corrupt_synced", Node: n.ID, A: at, Text: path})
}

// recentBatches is how many of a segment's last synced batches count as
// recent for corruptSynced.
const recentBatches = 8

// ledBy lists the workload's partitions n leads, as its metadata says.
func (d *deepFaults) ledBy(n *Node) []models.TopicPartition {
	var out []models.TopicPartition
	im := n.Core.Image()
	for _, tp := range d.f.tps {
		if st, ok := im.PartitionByName(tp.Topic, tp.Partition); ok && st.Leader == n.ID {
			out = append(out, tp)
		}
	}
	return out
}

// batchMagicOffset is where a batch's magic byte lies; the CRC-32C covers
// everything from Attributes, just after the CRC that follows the magic.
const batchMagicOffset = 16

// corruptIndex flips a bit of an offset or time index of one of n's
// partitions: a running broker may read it at any time.
func (d *deepFaults) corruptIndex(n *Node) {
	_, dir := d.partitionDir()
	indexes := filesIn(n, dir, ".index", ".timeindex")
	if len(indexes) == 0 {
		return
	}
	path := indexes[d.r.IntN(len(indexes))]
	data, err := n.Disk.ReadFile(path)
	if err != nil || len(data) == 0 || !d.f.admitLoss(n, "fault.disk_refused") {
		return
	}
	at := sched.Int64Between(d.r, 0, int64(len(data))-1)
	if err := n.Disk.FlipBit(path, at, uint(d.r.IntN(8))); err != nil {
		return
	}
	d.hits.corruptIndex++
	d.f.c.addDamage(n, damage{kind: damageFile, path: path})
	d.f.c.S.Trace(sched.Record{Kind: "fault.corrupt_index", Node: n.ID, A: at, Text: path})
}

// corruptAtPowerLoss damages, right after n lost power (the crash was
// counted against the budget), one of the files its next start reads: the
// metadata log past what it had synced (syncedMetadataBytes), or a
// checkpoint (recovery points, high watermarks, a partition's leader
// epochs) so that it no longer parses, as a decayed block of a file
// without a checksum.
func (d *deepFaults) corruptAtPowerLoss(n *Node, syncedMetadataBytes int64) {
	tp, dir := d.partitionDir()
	switch d.r.IntN(4) {
	case 0:
		d.damageMetadataTail(n, syncedMetadataBytes)
	case 1:
		d.corruptCheckpoint(n, log.RecoveryPointCheckpointName, nil, parsesAsOffsets)
	case 2:
		d.corruptCheckpoint(n, log.ReplicationCheckpointName, &damage{kind: damageFile, path: log.ReplicationCheckpointName}, parsesAsOffsets)
	default:
		d.corruptCheckpoint(n, dir+"/"+log.EpochCheckpointName, &damage{kind: damageReplica, tp: tp}, parsesAsEpochs)
	}
}

func parsesAsOffsets(data []byte) bool {
	_, err := checkpoint.ParseOffsets(data)
	return err == nil
}

func parsesAsEpochs(data []byte) bool {
	_, err := checkpoint.ParseEpochs(data)
	return err == nil
}

// corruptCheckpointTries bounds the bits tried to make a checkpoint
// unparsable.
const corruptCheckpointTries = 32

// corruptCheckpoint flips a bit of the checkpoint at path that makes it
// fail to parse (Kafka's checkpoints carry no checksum: a flip that leaves
// one parsable cannot be told from a real value, and is not injected),
// and records the damage the operator must repair, if any.
func (d *deepFaults) corruptCheckpoint(n *Node, path string, repair *damage, parses func([]byte) bool) {
	data, err := n.Disk.ReadFile(path)
	if err != nil || len(data) == 0 {
		return
	}
	for range corruptCheckpointTries {
		at, bit := d.r.IntN(len(data)), uint(d.r.IntN(8))
		data[at] ^= 1 << bit
		if parses(data) {
			data[at] ^= 1 << bit
			continue
		}
		if err := n.Disk.FlipBit(path, int64(at), bit); err != nil {
			return
		}
		d.hits.corruptCheckpoint++
		if n.corruptCheckpoints == nil {
			n.corruptCheckpoints = map[string]string{}
		}
		n.corruptCheckpoints[path] = string(data)
		if repair != nil {
			d.f.c.addDamage(n, *repair)
		}
		d.f.c.S.Trace(sched.Record{Kind: "fault.corrupt_checkpoint", Node: n.ID, A: int64(at), Text: path})
		return
	}
}

// metadataLogFile is the metadata quorum's entry log on a voter's disk.
const metadataLogFile = "metadata/__cluster_metadata-0/quorum.log"

// damageMetadataTail corrupts or cuts the metadata log of n past what was
// synced before its power loss (syncedBytes): recovery must drop exactly
// the entries that were never acknowledged, as for a partition's tail.
func (d *deepFaults) damageMetadataTail(n *Node, syncedBytes int64) {
	data, err := n.Disk.ReadFile(metadataLogFile)
	if err != nil || int64(len(data)) <= syncedBytes {
		return
	}
	at := sched.Int64Between(d.r, syncedBytes, int64(len(data))-1)
	if d.r.IntN(2) == 0 {
		if n.Disk.FlipBit(metadataLogFile, at, uint(d.r.IntN(8))) != nil {
			return
		}
	} else if n.Disk.TruncateFile(metadataLogFile, at) != nil {
		return
	}
	d.hits.corruptMetadataTail++
	d.f.c.S.Trace(sched.Record{Kind: "fault.metadata_tail", Node: n.ID, A: at})
}
