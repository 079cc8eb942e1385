package cluster

import (
	"fmt"
	"sort"
	"strings"

	"strand/core/acl"
	"strand/core/broker"
	"strand/core/group"
	"strand/core/producer"
	"strand/core/quorum"
	"strand/core/replica"
	"strand/sim/workload"
)

// Shape is a scenario: the cluster's size, the topics, the clients, and how
// long the fault phase lasts.
type Shape struct {
	Name    string
	Brokers int
	// Topics × Partitions partitions of ReplicationFactor replicas.
	Topics            int
	Partitions        int32
	ReplicationFactor int16
	MinInsyncReplicas int
	Producers         int
	RecordsPerSec     int
	Consumers         int
	// FaultPhaseNs is how long the run lasts before healing; the heal time
	// is drawn in [FaultPhaseNs/2, FaultPhaseNs].
	FaultPhaseNs int64
	// ConvergeNs bounds the liveness phase.
	ConvergeNs int64
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms; 0 means 3000 (the
	// run's scaled-down default). A short one shrinks ISRs on every pause
	// or clog, which is where min.insync.replicas matters.
	ReplicaLagTimeMaxMs int
	// ElectionChaos slows the links between controller voters and crashes
	// the active controller's node again and again (faults.electionStep):
	// the shape the Raft planted bugs are hunted in.
	ElectionChaos bool
	// CongestionChaos clogs one node's links to all the others, again and
	// again (faults.congestionStep): ISRs shrink to their leader alone.
	CongestionChaos bool
	// SyncEveryBatch sets log.flush.interval.messages=1: every crash may
	// then lose unsynced data, and no acknowledged record may be lost.
	SyncEveryBatch bool
	// IdempotentProducers of the Producers are idempotent.
	IdempotentProducers int
	// Groups consumer groups of MembersPerGroup members consume every
	// topic; StaticPerMille of the members are static.
	Groups          int
	MembersPerGroup int
	StaticPerMille  int
	// ChurnTopics are deleted, re-created and grown during the run while
	// plain producers write to them (workload.Config.ChurnTopics).
	ChurnTopics int
	// HostileClients attack the brokers' connection limits for the whole
	// run, which the brokers run with small (hostile.go).
	HostileClients int
	// Authorization secures both planes and switches the authorizer on
	// in every seed (other shapes draw it), with the ACL clients
	// (acls.go): the shape the ACL planted bugs are hunted in.
	Authorization bool
	// Topology, when set, draws Brokers and TopicReplication from the
	// seed (topology.go).
	Topology *Topology
	// TopicReplication gives topic t<i> its own replication factor and
	// min.insync.replicas; topics past its end, and every topic when it is
	// empty, have ReplicationFactor and the brokers' MinInsyncReplicas.
	TopicReplication []workload.TopicReplication
	// Membership adds and removes brokers during the run
	// (membership.go); drawn per seed when Topology.Membership is set.
	Membership Membership
}

// Shapes are the scenario shapes, by name. "standard" is issue 3 §7's.
var Shapes = map[string]Shape{
	"standard": {Name: "standard", Brokers: 3, Topics: 3, Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 10, RecordsPerSec: 1000, Consumers: 3, FaultPhaseNs: 30e9, ConvergeNs: 30e9},
	"elections": {Name: "elections", Brokers: 3, Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 20e9, ConvergeNs: 30e9, ElectionChaos: true},
	"small": {Name: "small", Brokers: 3, Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9},
	"hot": {Name: "hot", Brokers: 3, Topics: 1, Partitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 4, RecordsPerSec: 300, Consumers: 2, FaultPhaseNs: 10e9, ConvergeNs: 30e9},
	"lag": {Name: "lag", Brokers: 3, Topics: 1, Partitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 4, RecordsPerSec: 300, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9, ReplicaLagTimeMaxMs: 300,
		CongestionChaos: true},
	"sync": {Name: "sync", Brokers: 3, Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9, SyncEveryBatch: true},
	// groups: consumer groups (static and dynamic members crashing,
	// leaving and rejoining, so that rebalances are frequent), idempotent
	// producers and a churned topic on a small cluster.
	"groups": {Name: "groups", Brokers: 3, Topics: 2, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, IdempotentProducers: 2, RecordsPerSec: 150, Consumers: 0, FaultPhaseNs: 10e9, ConvergeNs: 30e9,
		Groups: 4, MembersPerGroup: 3, StaticPerMille: 400, ChurnTopics: 1},
	// groups-lag is groups with a short replica.lag.time.max.ms: the
	// offsets partitions' ISRs shrink often, so coordinator appends fail
	// and coordinators fail over, which is where group-double-assign shows.
	"groups-lag": {Name: "groups-lag", Brokers: 3, Topics: 2, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, IdempotentProducers: 2, RecordsPerSec: 150, Consumers: 0, FaultPhaseNs: 10e9, ConvergeNs: 30e9,
		ReplicaLagTimeMaxMs: 300, Groups: 4, MembersPerGroup: 3, StaticPerMille: 400, ChurnTopics: 1},
	// topology: small's clients over 1, 3 or 5 brokers, three topics each
	// with its own replication factor (1, 2, 3 or 5) and
	// min.insync.replicas (1 to its factor), drawn per seed, brokers
	// joining and leaving (membership.go), and a churned topic, whose
	// re-creations may be placed on a broker that joined.
	"topology": {Name: "topology", Brokers: 3, Topics: 3, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9, ChurnTopics: 1,
		Topology: &Topology{BrokersChoices: []int{1, 3, 5}, ReplicationFactorChoices: []int16{1, 2, 3, 5}, Membership: true}},
	// hostile: small's cluster and clients, with two hostile clients
	// holding stalled requests and idle connections on every broker.
	"hostile": {Name: "hostile", Brokers: 3, Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9, HostileClients: 2},
	// acl: small's cluster and clients, both planes secured and the
	// authorizer on, with an ACL churn and ACL probes (acls.go).
	"acl": {Name: "acl", Brokers: 3, Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Producers: 3, RecordsPerSec: 150, Consumers: 1, FaultPhaseNs: 10e9, ConvergeNs: 30e9, Authorization: true},
}

// MixedShapes are the shapes a "mixed" sweep draws from, by seed. groups
// took the place of a second hot: it costs about 1.4 hot seeds, so the
// sweep's running time stays about the same.
var MixedShapes = []string{"small", "hot", "sync", "lag", "small", "groups"}

// ShapeFor resolves a shape name; "mixed" picks one of MixedShapes from the
// seed, so that a seed names its shape.
func ShapeFor(name string, seed uint64) (Shape, error) {
	if name == "mixed" {
		name = MixedShapes[seed%uint64(len(MixedShapes))]
	}
	s, ok := Shapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("unknown shape %q (have mixed, %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return drawTopology(s, seed), nil
}

// ShapeNames lists the shapes, sorted.
func ShapeNames() []string {
	var names []string
	for n := range Shapes { // order-independent: sorted below
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Bugs are a run's planted bugs: the replication, deduplication and group
// ones reach every partition and coordinator through broker.Config;
// LostFsync is the harness's disk lying.
type Bugs struct {
	Replica replica.Bugs
	// DedupOff: an idempotent producer's retried batch is appended again.
	DedupOff bool
	// Group are core/group's (group-double-assign).
	Group group.Bugs
	// LostFsync: every file Sync on a broker's disk reports success
	// without making anything durable (implemented in the harness's disk,
	// not in core/log).
	LostFsync bool
	// Quorum are the planted Raft bugs of the controller voters.
	Quorum quorum.Bugs
	// SessionLogStartUntold: the leaders' fetch sessions count a changed
	// log start offset as told without naming the partition
	// (broker.Bugs.SessionLogStartUntold): a follower learns a
	// DeleteRecords log start only once its HW moves. The quiet check
	// catches it (quiet.go).
	SessionLogStartUntold bool
	// OpenControlPlane: every listener serves every API
	// (broker.Bugs.OpenControlPlane); the forgery check catches it.
	OpenControlPlane bool
	// ControlPlaneAnyPrincipal: a secured plane admits any principal
	// (broker.Bugs.ControlPlaneAnyPrincipal); the forgery check catches
	// it in the seeds that secure the control plane.
	ControlPlaneAnyPrincipal bool
	// ACL are the authorizer's (acl-deny-ignored, acl-prefix-overmatch);
	// ACLStaleForever: brokers never apply ACL removals
	// (acl-stale-forever). The authorized and acl-agreement checks catch
	// them in the seeds with the authorizer on.
	ACL             acl.Bugs
	ACLStaleForever bool
}

// PlantedBug is a planted bug, the shape the simulator hunts it in, and
// the checker (models.Violation.Check) that must catch it: a bug caught
// only by another checker is not caught (make sim-bugs fails), since that
// checker's guarantee is what the bug breaks.
type PlantedBug struct {
	Name, Shape, Checker string
}

// PlantedBugs are the planted bugs, in the order make sim-bugs runs them.
// The shapes: lost-fsync shows only when the log syncs every batch;
// hw-truncation where failed fsyncs and power losses leave HW checkpoints
// behind (sync); isr-min-ignored when ISRs shrink to their leader alone
// often (lag: a short replica.lag.time.max.ms and congestion chaos);
// dedup-off where producers are idempotent;
// group-double-assign where coordinators also fail over often;
// raft-vote-twice where split votes happen (elections: pre-vote makes two
// candidates in one epoch rare elsewhere); session-log-start-untold in
// small (quick seeds with deletes on two partitions); the ACL bugs in acl
// (the authorizer on, with ACL churn and probes, in every seed); the
// others in the mixed sweep.
var PlantedBugs = []PlantedBug{
	{"hw-truncation", "sync", "acked-present"},
	{"early-ack", "mixed", "linearizability"},
	{"no-fencing", "mixed", "hw-linearizability"},
	{"isr-min-ignored", "lag", "acked-present"},
	{"lost-fsync", "sync", "synced-kept"},
	{"raft-vote-twice", "elections", "raft-vote-safety"},
	{"raft-commit-early", "mixed", "raft-commit"},
	{"group-double-assign", "groups-lag", "group-assignment"},
	{producer.BugDedupOff, "groups", "idempotence"},
	{"session-log-start-untold", "small", "quiet-convergence"},
	{"follower-past-hw", "mixed", "fetched-present"},
	{"hw-regress", "mixed", "hw-linearizability"},
	{"open-control-plane", "mixed", "forgery"},
	{"control-plane-any-principal", "mixed", "forgery"},
	{"acl-deny-ignored", "acl", "authorized"},
	{"acl-prefix-overmatch", "acl", "authorized"},
	{"acl-stale-forever", "acl", "acl-agreement"},
}

// BugNames are the planted bugs' names, as -bug takes them.
var BugNames = func() []string {
	var names []string
	for _, b := range PlantedBugs {
		names = append(names, b.Name)
	}
	return names
}()

// PlantedBugFor returns the planted bug named name.
func PlantedBugFor(name string) (PlantedBug, bool) {
	for _, b := range PlantedBugs {
		if b.Name == name {
			return b, true
		}
	}
	return PlantedBug{}, false
}

// ParseBug turns a bug name into the switches it sets; "" is no bug.
func ParseBug(name string) (Bugs, error) {
	var b Bugs
	switch name {
	case "":
	case "hw-truncation":
		b.Replica.HWTruncation = true
	case "early-ack":
		b.Replica.EarlyAck = true
	case "no-fencing":
		b.Replica.NoFencing = true
	case "isr-min-ignored":
		b.Replica.ISRMinIgnored = true
	case "lost-fsync":
		b.LostFsync = true
	case "group-double-assign":
		b.Group.GroupDoubleAssign = true
	case producer.BugDedupOff:
		b.DedupOff = true
	case "raft-vote-twice":
		b.Quorum.VoteTwice = true
	case "raft-commit-early":
		b.Quorum.CommitEarly = true
	case "session-log-start-untold":
		b.SessionLogStartUntold = true
	case "follower-past-hw":
		b.Replica.FollowerPastHW = true
	case "open-control-plane":
		b.OpenControlPlane = true
	case "control-plane-any-principal":
		b.ControlPlaneAnyPrincipal = true
	case "hw-regress":
		b.Replica.HWRegress = true
	case "acl-deny-ignored":
		b.ACL.DenyIgnored = true
	case "acl-prefix-overmatch":
		b.ACL.PrefixOvermatch = true
	case "acl-stale-forever":
		b.ACLStaleForever = true
	default:
		return b, fmt.Errorf("unknown bug %q (have %s)", name, strings.Join(BugNames, ", "))
	}
	return b, nil
}

// broker is the part of the bugs every broker's core runs with.
func (b Bugs) broker() broker.Bugs {
	return broker.Bugs{Replica: b.Replica, Quorum: b.Quorum, DedupOff: b.DedupOff, Group: b.Group,
		SessionLogStartUntold: b.SessionLogStartUntold, OpenControlPlane: b.OpenControlPlane,
		ControlPlaneAnyPrincipal: b.ControlPlaneAnyPrincipal, ACL: b.ACL, ACLStaleForever: b.ACLStaleForever}
}
