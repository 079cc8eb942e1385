package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/broker"
	"strand/core/config"
	"strand/core/env"
	"strand/core/log"
	"strand/models"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simlog"
	"strand/sim/simnet"
)

// logLinesMax is how many log lines each node keeps for a failure report.
const logLinesMax = 400

// VotersMax is how many nodes (the lowest ids) are controller voters as
// well as brokers: three, as a real deployment's quorum.
const VotersMax = 3

// Node is one simulated Strand process and the environment that outlives
// its incarnations.
type Node struct {
	ID    int32
	Proc  *sched.Node
	Net   *simnet.NodeNet
	Clock *simclock.Clock
	Disk  *memdisk.Disk
	// Core is the current incarnation's broker.Node.
	Core *broker.Node
	// Log keeps the last lines the node's incarnations logged, or is nil
	// when the run discards them (Options.DiscardLogs).
	Log *simlog.Ring
	cfg broker.Config
	// envDisk is what the core is given: Disk, or a lying wrapper.
	envDisk env.Disk
	// nextCrash is the crash mode MayCrash chose for the coming crash.
	nextCrash memdisk.CrashMode
	// unrecovered names the partitions whose replica on this broker may
	// have lost unsynced data (a crash or a disk fault) and has not yet
	// recovered (the fault budget, faults.admitLoss): rejoined the ISR
	// with its log back past mustReach, what was acknowledged then.
	unrecovered map[models.TopicPartition]bool
	mustReach   map[models.TopicPartition]int64
	// absent: the node is no member of the cluster now, a broker that has
	// not joined yet or one removed for good (membership.go); its
	// process is down and no fault or restart reaches it.
	absent bool
	// leaving: the broker's removal has begun (its controlled shutdown).
	leaving bool
	// failNextSync arms an fsync failure on the next file Sync.
	failNextSync bool
	// diskFull: the disk answers writes with ENOSPC.
	diskFull bool
	// storageFailed: since this incarnation started, its disk failed a
	// write or an fsync (an armed fault went off), which takes the log
	// directory offline.
	storageFailed bool
	// diskFaulted: a disk fault may have taken its log directory offline;
	// the liveness phase restarts it.
	diskFaulted bool
	// readFaultArmed: a transient read error waits for its read
	// (deepFaults.armReadError); a crash ends it.
	readFaultArmed bool
	// damage is what the harness damaged on the disk and an operator must
	// repair (deepfaults.go): at heal time, or when the broker cannot
	// start because of it.
	damage []damage
	// corruptCheckpoints holds, by path, the content a checkpoint was
	// corrupted to, while the broker has not written it again: the
	// synced-kept check cannot read it, and knows why.
	corruptCheckpoints map[string]string
	// sync delays the disk's completions (DeepDiskFaults.SyncLatency*).
	sync *syncLatency
	// stalls stalls the node's loop now and then (DeepDiskFaults.Stall*).
	stalls *ioStalls
	// deep counts the deep faults' hits; shared by the run's nodes.
	deep *deepHits
}

// addDamage records an injected damage on n that the operator must
// repair; until then the broker's replicas do not recover
// (faults.refreshRecovered), and a client that cannot decode what n
// serves of the partition has caught it (damagedAt).
func (c *Cluster) addDamage(n *Node, d damage) {
	n.damage = append(n.damage, d)
	n.diskFaulted = true
	tp, ok := d.tp, d.kind == damageReplica
	if dir, _, found := strings.Cut(d.path, "/"); d.kind == damageFile && found {
		if ltp, parsed := log.ParseDirName(dir); parsed {
			tp, ok = models.TopicPartition{Topic: ltp.Topic, Partition: ltp.Partition}, true
		}
	}
	if ok {
		c.damageSpans = append(c.damageSpans, damageSpan{node: n.ID, tp: tp, fromNs: c.S.NowNs(), toNs: -1})
	}
}

// damageSpan is a time when a broker's replica of a partition held
// damage the harness injected.
type damageSpan struct {
	node         int32
	tp           models.TopicPartition
	fromNs, toNs int64 // toNs -1: not repaired yet
}

// damagedAt reports whether node's replica of tp held injected damage at
// atNs.
func (c *Cluster) damagedAt(node int32, tp models.TopicPartition, atNs int64) bool {
	for _, s := range c.damageSpans {
		if s.node == node && s.tp == tp && s.fromNs <= atNs && (s.toNs < 0 || atNs <= s.toNs) {
			return true
		}
	}
	return false
}

// Cluster is the nodes of one run on one scheduler.
type Cluster struct {
	S       *sched.Scheduler
	Streams *sched.Streams
	Net     *simnet.Network
	// Nodes holds every node by id; each is a broker, and the first
	// VotersMax are controller voters too.
	Nodes []*Node
	// churnTopics are the churned topics' names; churnAcks the brokers'
	// successful produce answers on them (churn.go).
	churnTopics   map[string]bool
	churnRequests map[churnRequestKey]map[models.TopicPartition]string
	churnAcks     []churnAck
	// members are the nodes that are members of the cluster now, by id.
	members []*Node
	shape   Shape
	bugs    Bugs
	// Security is how the run's listeners authenticate (security.go).
	Security Security
	idSeq    uint64
	// raft checks the voters' Raft as it runs.
	raft *raftChecker
	// alters are the AlterPartition exchanges the nodes' networks saw.
	alters []models.AlterPartitionOp
	// restarts are the brokers' restarts, in order: a follower's high
	// watermark may go back across one (models.CheckHighWatermarks).
	restarts []models.Restart
	// watched are the workload's partitions by directory name; held the
	// records their replicas held in the segments they deleted
	// (keepRemoved), for CheckFinal.
	watched map[string]models.TopicPartition
	held    map[models.TopicPartition]*models.HeldRecords
	// damageSpans are when injected damage lay on each replica.
	damageSpans []damageSpan
	// fail records a harness-level violation (a node that cannot restart)
	// and halts the run.
	fail func(check, detail string)
}

// Brokers returns the cluster's brokers now: every node but those not
// joined yet or removed (membership.go).
func (c *Cluster) Brokers() []*Node { return c.members }

// VoterIDs returns the controller voters' node.ids.
func (c *Cluster) VoterIDs() []int32 {
	var ids []int32
	for _, n := range c.Nodes {
		if n.cfg.Broker.Roles.Controller {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// ActiveController is the node hosting the active controller, or nil.
func (c *Cluster) ActiveController() *Node {
	for _, n := range c.Nodes {
		if n.Proc.Up() && n.Core != nil && n.Core.ControllerActive() {
			return n
		}
	}
	return nil
}

// BrokerIDs returns the brokers' node.ids.
func (c *Cluster) BrokerIDs() []env.NodeID {
	var ids []env.NodeID
	for _, n := range c.Brokers() {
		ids = append(ids, env.NodeID(n.ID))
	}
	return ids
}

// newCluster builds and starts the nodes on a network with faults f.
// With keepLogs each node keeps its last logLinesMax log lines at INFO and
// above; without, the cores log nothing.
func newCluster(s *sched.Scheduler, streams *sched.Streams, netFaults simnet.Faults, deep *deepFaults, shape Shape, bugs Bugs,
	keepLogs bool, fail func(check, detail string)) (*Cluster, error) {
	c := &Cluster{S: s, Streams: streams, Net: simnet.New(s, streams.Get("net"), netFaults), shape: shape, bugs: bugs, fail: fail,
		Security: drawSecurity(streams.Get("security"))}
	if shape.Authorization {
		c.Security = Security{ControllerSecured: true, InterBrokerSecured: true, SharedPrincipal: c.Security.SharedPrincipal, Authorizer: true}
	}
	c.Net.PrecheckWith(streams.Get("net/precheck"))
	if shape.ChurnTopics > 0 {
		c.churnTopics = map[string]bool{}
		c.churnRequests = map[churnRequestKey]map[models.TopicPartition]string{}
		for i := 0; i < shape.ChurnTopics; i++ {
			c.churnTopics[churnTopicName(i)] = true
		}
	}
	c.raft = newRaftChecker(c)
	for id := int32(1); id <= int32(shape.nodes()); id++ {
		b, err := brokerConfig(id, shape, c.Security)
		if err != nil {
			return nil, err
		}
		proc := s.NewNode(id)
		nodeNet := c.Net.AddNode(env.NodeID(id), proc)
		nodeNet.SetListeners(simnet.ListenersOf(b))
		nodeNet.SetRoute(func(req kmsg.Request) string { return broker.PeerListener(b, req) })
		nodeNet.SetPrincipal(c.Security.principal(id))
		n := &Node{ID: id, Proc: proc, Net: nodeNet,
			Clock: simclock.New(s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12}),
			cfg:   broker.Config{Broker: b, Bugs: bugs.broker(), QuorumObserver: c.raft},
			sync:  &syncLatency{s: s, proc: proc, r: streams.Getf("disk/sync-latency/%d", id), cfg: &deep.cfg, hits: &deep.hits},
			deep:  &deep.hits}
		n.stalls = &ioStalls{node: n, r: streams.Getf("disk/stalls/%d", id), cfg: &deep.cfg}
		n.stalls.rearm()
		n.Disk = memdisk.New(memdisk.Options{Post: n.sync.post, DeferAppendErrors: deep.cfg.DeferAppendErrors})
		n.envDisk = faultDisk{Disk: n.Disk, node: n, lie: bugs.LostFsync, c: c}
		if shape.HostileClients > 0 {
			n.Net.SetAdmission(b)
		}
		if keepLogs {
			n.Log = simlog.New(s, slog.LevelInfo, logLinesMax)
			n.cfg.Log = env.NewLog(n.Log).With(slog.Int("node", int(id)))
		}
		crashStream := streams.Getf("crash/%d", id)
		node := n
		proc.OnCrash(func() {
			node.readFaultArmed = false
			c.keepBelowLogStart(node)
			what := node.Disk.Crash(crashStream, node.nextCrash)
			s.Trace(sched.Record{Kind: "disk.crash", Node: node.ID, A: int64(node.nextCrash), B: int64(len(what))})
			if node.nextCrash != memdisk.CrashKeepAll {
				c.checkSyncedKept(node)
			}
		})
		c.Nodes = append(c.Nodes, n)
		if int(id) > shape.Brokers {
			// A broker that joins later (membership.go): down until then.
			n.absent, n.nextCrash = true, memdisk.CrashKeepAll
			proc.Crash()
			continue
		}
		c.members = append(c.members, n)
		if err := c.start(n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// brokerConfig is node id's server.properties for the shape and the
// run's security.
func brokerConfig(id int32, shape Shape, security Security) (config.Broker, error) {
	var voters []string
	for v := int32(1); v <= int32(min(shape.Brokers, VotersMax)); v++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", v, 9001+2*v))
	}
	props := map[string]string{
		"node.id":                      fmt.Sprint(id),
		"process.roles":                "broker",
		"listeners":                    fmt.Sprintf("%s://127.0.0.1:%d", clientListener, 9000+2*id),
		"controller.listener.names":    controllerListener,
		"controller.quorum.voters":     strings.Join(voters, ","),
		"log.dirs":                     fmt.Sprintf("/data/node%d", id),
		"auto.create.topics.enable":    "false",
		"min.insync.replicas":          fmt.Sprint(shape.MinInsyncReplicas),
		"default.replication.factor":   fmt.Sprint(shape.ReplicationFactor),
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "500",
		"replica.lag.time.max.ms":      fmt.Sprint(cmp.Or(shape.ReplicaLagTimeMaxMs, 3000)),
		// Few coordinators, and no 3 s wait before a group's first
		// rebalance, for runs of a few simulated seconds.
		"offsets.topic.num.partitions":     fmt.Sprint(offsetsTopicPartitions),
		"group.initial.rebalance.delay.ms": "100",
	}
	if id <= int32(min(shape.Brokers, VotersMax)) {
		props["process.roles"] = "broker,controller"
		props["listeners"] += fmt.Sprintf(",%s://127.0.0.1:%d", controllerListener, 9001+2*id)
	}
	for k, v := range security.properties(shape.nodes()) { // order-independent: a plain copy into a map
		props[k] = v
	}
	if shape.SyncEveryBatch {
		props["log.flush.interval.messages"] = "1"
	}
	if shape.HostileClients > 0 {
		maps.Copy(props, hostileLimits())
	}
	b, _, err := config.FromProperties(props)
	if err != nil {
		return b, fmt.Errorf("node %d config: %w", id, err)
	}
	return b, nil
}

// start builds the node's core from its disk, as a process start does.
func (c *Cluster) start(n *Node) error {
	core, err := broker.New(n.cfg, n.Clock, alterRecorder{Network: n.Net, node: n.ID, c: c}, []env.Disk{n.envDisk}, c.newID)
	if err != nil {
		return fmt.Errorf("node %d: start: %w", n.ID, err)
	}
	n.Core = core
	if len(c.churnTopics) > 0 {
		n.Net.SetHandler(churnHandler{Handler: core, c: c, node: n.ID})
	} else {
		n.Net.SetHandler(core)
	}
	return nil
}

// restart brings a crashed node back in a new incarnation.
func (c *Cluster) restart(n *Node) {
	n.Proc.Restart()
	c.restarts = append(c.restarts, models.Restart{Node: n.ID, AtNs: c.S.NowNs()})
	// A crash ends the disk's armed faults: the new incarnation starts
	// with a working log directory.
	n.diskFaulted, n.failNextSync, n.storageFailed = false, false, false
	n.setDiskFull(false)
	if len(n.damage) > 0 {
		// Still damaged: a replica the harness damaged may yet fail.
		n.diskFaulted = true
	}
	err := c.start(n)
	if err != nil && len(n.damage) > 0 {
		// The damage the harness injected keeps the broker from
		// starting (Kafka would take the directory offline too): the
		// process exits, the operator repairs the damage, and starts
		// the broker again. The exit matters: broker.New had started
		// its controller role before the log directory failed it, and
		// that Raft's timers would otherwise keep running beside the
		// new incarnation's, a second voter answering in the node's
		// name, and a leader could count its acknowledgements.
		n.nextCrash = memdisk.CrashKeepAll
		n.Proc.Crash()
		c.repair(n, err.Error())
		n.Proc.Restart()
		err = c.start(n)
	}
	if err != nil {
		n.Net.SetHandler(refusingHandler{net: n.Net})
		c.fail("restart", err.Error())
	}
}

// repair is the operator's answer to the damage injected on n's disk,
// with the broker stopped: a damaged replica's directory is removed (the
// broker fetches the replica again), a damaged file the broker can do
// without is removed, and so is the clean-shutdown marker, so that the
// broker registers uncleanly (it lost what those held). Then everything
// is written back, as the operator's sync does.
func (c *Cluster) repair(n *Node, why string) {
	for _, d := range n.damage {
		switch d.kind {
		case damageReplica:
			removeTree(n, fmt.Sprintf("%s-%d", d.tp.Topic, d.tp.Partition))
		case damageFile:
			_ = n.Disk.Remove(d.path)
		}
	}
	_ = n.Disk.Remove(broker.CleanShutdownFile)
	n.Disk.Writeback()
	for i := range c.damageSpans {
		if c.damageSpans[i].node == n.ID && c.damageSpans[i].toNs < 0 {
			c.damageSpans[i].toNs = c.S.NowNs()
		}
	}
	c.S.Trace(sched.Record{Kind: "fault.repair", Node: n.ID, A: int64(len(n.damage)), Text: why})
	n.deep.repairs++
	n.damage = nil
}

// removeTree removes dir and everything in it, if it exists.
func removeTree(n *Node, dir string) {
	names, err := n.Disk.List(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		removeTree(n, dir+"/"+name)
		_ = n.Disk.Remove(dir + "/" + name)
	}
	_ = n.Disk.Remove(dir)
}

// newID is the cluster's IDSource: deterministic, distinct ids.
func (c *Cluster) newID() [16]byte {
	c.idSeq++
	var id [16]byte
	for i := 0; i < 8; i++ {
		id[i] = byte(c.Streams.Seed() >> (8 * i))
		id[8+i] = byte(c.idSeq >> (8 * i))
	}
	id[0] |= 1
	return id
}

// refusingHandler stands in for a node that failed to start: it closes
// every connection, on its first request.
type refusingHandler struct{ net *simnet.NodeNet }

func (h refusingHandler) HandleRequest(conn env.ConnID, header env.RequestHeader, _ kmsg.Request) {
	h.net.Close(conn, header.CorrelationID)
}

func (h refusingHandler) HandleClosed(env.ConnID) {}

// faultDisk is a broker's disk as its core sees it: the memdisk, with two
// harness-controlled twists on file Syncs. When the node's failNextSync is
// armed, the next Sync fails with env.ErrIO and makes nothing durable (the
// harness disarms it when healing, which memdisk.FailNextSync cannot).
// With lie set (the lost-fsync planted bug) every Sync of a partition's
// segment file (*.log outside the metadata directory) reports success
// without making anything durable: the log claims durability it does not
// have. Checkpoints, indexes, the metadata quorum's files and SyncDir stay
// honest, so the bug shows as lost records, not as unreadable files or a
// broken Raft.
type faultDisk struct {
	*memdisk.Disk
	node *Node
	lie  bool
	c    *Cluster
}

// Remove keeps the records of a partition segment the broker deletes
// (Cluster.keepRemoved) before removing it.
func (d faultDisk) Remove(path string) error {
	d.c.keepRemoved(d.node, path)
	return d.Disk.Remove(path)
}

// Open wraps the file so that its Syncs go through the twists; an ENOSPC
// creating it is the broker's storage failing.
func (d faultDisk) Open(path string, opts env.OpenOptions) (env.File, error) {
	f, err := d.Disk.Open(path, opts)
	if err != nil {
		if d.node.diskFull {
			d.node.storageFailed = true
		}
		return nil, err
	}
	return faultFile{File: f, disk: d}, nil
}

type faultFile struct {
	env.File
	disk faultDisk
}

// setDiskFull makes the disk answer writes with ENOSPC, or stop.
func (n *Node) setDiskFull(full bool) {
	n.diskFull = full
	n.Disk.SetFull(full)
}

// Append notes an error the disk answered: the broker's storage failed.
// An ENOSPC the disk defers (DeepDiskFaults.DeferAppendErrors) is noted
// here too: the write failed, whichever call the core hears it from (a
// later write, or a read finding the bytes missing).
func (f faultFile) Append(p []byte) error {
	n := f.disk.node
	n.stalls.tick()
	before := f.Size()
	err := f.File.Append(p)
	if err == nil && len(p) > 0 && f.Size() == before {
		n.deep.deferredAppendErrors++
		n.storageFailed = true
	}
	f.noteFailure(err)
	return err
}

// WriteAt notes an error as Append does.
func (f faultFile) WriteAt(p []byte, off int64) error {
	f.disk.node.stalls.tick()
	err := f.File.WriteAt(p, off)
	f.noteFailure(err)
	return err
}

// Truncate notes an error as Append does (a deferred one, for instance).
func (f faultFile) Truncate(size int64) error {
	f.disk.node.stalls.tick()
	err := f.File.Truncate(size)
	f.noteFailure(err)
	return err
}

// ReadAt notes an injected read error: the broker's storage failed.
func (f faultFile) ReadAt(p []byte, off int64) (int, error) {
	n := f.disk.node
	n.stalls.tick()
	read, err := f.File.ReadAt(p, off)
	if err != nil && errors.Is(err, env.ErrIO) {
		n.storageFailed, n.readFaultArmed = true, false
		n.deep.readErrorsFired++
	}
	return read, err
}

// noteFailure notes that the disk failed a write: ENOSPC, or EIO (a
// deferred one included).
func (f faultFile) noteFailure(err error) {
	if err != nil && (errors.Is(err, env.ErrNoSpace) || errors.Is(err, env.ErrIO)) {
		f.disk.node.storageFailed = true
	}
}

// Sync fails when armed, lies under lost-fsync, and is honest otherwise.
func (f faultFile) Sync(done func(error)) {
	n := f.disk.node
	switch {
	case n.failNextSync:
		n.failNextSync = false
		n.storageFailed = true
		path := f.Path()
		n.sync.post(func() { done(fmt.Errorf("memdisk: sync %s: injected failure: %w", path, env.ErrIO)) })
	case f.disk.lie && strings.HasSuffix(f.Path(), ".log") && !strings.HasPrefix(f.Path(), "metadata/"):
		n.sync.post(func() { done(nil) })
	default:
		f.File.Sync(func(err error) {
			if err != nil && (errors.Is(err, env.ErrNoSpace) || errors.Is(err, env.ErrIO)) {
				n.storageFailed = true
			}
			done(err)
		})
	}
}

// nodeLogs is every node's kept log lines, in node order; nil when the
// run discarded them.
func (c *Cluster) nodeLogs() []NodeLog {
	var out []NodeLog
	for _, n := range c.Nodes {
		if n.Log != nil {
			out = append(out, NodeLog{Node: n.ID, Logged: n.Log.Logged(), Lines: n.Log.Lines()})
		}
	}
	return out
}
