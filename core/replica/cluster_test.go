package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The mini-cluster: three replicas of one partition, the controller-side
// functions of this package as the controller, and a chooser that decides
// every step (produce, fetch, time, AlterPartition round trips, metadata
// pushes, crashes within the fault budget, fencing, flushes). It is not the
// simulator (sim/ owns that, with the network, disk and checkers); it checks
// at the pure level that no acks=all record is lost within the fault budget
// (CLARIFICATIONS.md, "The fault budget") and that replicas converge after
// healing, and that the planted bugs break one or the other.

// chooser draws the mini-cluster's decisions.
type chooser interface{ intn(n int, label string) int }

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(n int, label string) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

type seededChooser struct{ r *rand.Rand }

func (c seededChooser) intn(n int, _ string) int { return c.r.IntN(n) }

type simNode struct {
	*node
	up bool
	// flushed is the LEO at the last flush: an unclean crash keeps only that.
	flushed int64
	// hwCheckpoint is the HW the node had when it went down.
	hwCheckpoint int64
	// reply is the controller's AlterPartition answer, not yet delivered.
	reply *AlterPartitionResponse
}

type miniCluster struct {
	ch      chooser
	cfg     Config
	pol     ELRPolicy
	ctrl    PartitionState
	brokers []BrokerStatus // by id-1
	nodes   []*simNode     // by id-1
	nowMs   int64
	nextReq uint64
	pending map[uint64]ackedRecord // acks=all produces awaiting their answer
	acked   map[string]int64       // acknowledged value → offset
	// uncleanLeft counts the unclean crashes still within the fault budget:
	// min.insync.replicas − 1 for the whole run.
	uncleanLeft int
}

type ackedRecord struct {
	value  string
	offset int64
}

func newMiniCluster(ch chooser, bugs Bugs) *miniCluster {
	c := &miniCluster{
		ch:          ch,
		cfg:         Config{MinInsyncReplicas: 2, ReplicaLagTimeMaxMs: 100, AckWaitersMax: 8, Bugs: bugs},
		pol:         ELRPolicy{MinInsyncReplicas: 2, ELREnabled: true},
		ctrl:        state(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2, 3}),
		pending:     map[uint64]ackedRecord{},
		acked:       map[string]int64{},
		uncleanLeft: 1,
	}
	for id := int32(1); id <= 3; id++ {
		c.brokers = append(c.brokers, BrokerStatus{Registered: true, Epoch: 1})
		c.nodes = append(c.nodes, &simNode{node: newNode(id, nil, 0, c.nodeConfig(1)), up: true})
	}
	for _, n := range c.nodes {
		c.push(n)
	}
	return c
}

func (c *miniCluster) nodeConfig(brokerEpoch int64) Config {
	cfg := c.cfg
	cfg.BrokerEpoch = brokerEpoch
	return cfg
}

func (c *miniCluster) node(id int32) *simNode { return c.nodes[id-1] }

func (c *miniCluster) pick(label string) *simNode { return c.nodes[c.ch.intn(len(c.nodes), label)] }

// run plays steps random steps, heals, and returns the first violation.
func (c *miniCluster) run(steps int) error {
	for i := range steps {
		c.step()
		c.collectAcks()
		if err := c.checkAcked(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	c.heal()
	c.collectAcks()
	return c.checkConverged()
}

// step draws one event. Faults are rare next to replication traffic, so
// the partition spends most of its time healthy and acknowledges records.
func (c *miniCluster) step() {
	switch op := c.ch.intn(64, "op"); {
	case op < 16:
		c.produce(c.producerTarget())
	case op < 38:
		c.fetch(c.pick("fetcher"))
	case op < 42:
		c.tick(int64(c.ch.intn(60, "elapsed ms")))
	case op < 46:
		c.sendAlterPartition(c.pick("proposer"))
	case op < 50:
		c.deliverReply(c.pick("reply to"))
	case op < 56:
		for _, n := range c.nodes {
			c.push(n)
		}
	case op < 59:
		c.push(c.pick("pushed to alone"))
	case op == 59:
		c.crash(c.pick("crashed"))
	case op < 62:
		c.restartOne()
	case op == 62:
		n := c.pick("flushed")
		n.flushed = n.log.LogEndOffset()
	default:
		c.toggleFence(c.pick("fenced or reconnected"))
	}
}

// producerTarget is mostly the leader the controller names, as a client
// with fresh metadata would pick, and sometimes any replica.
func (c *miniCluster) producerTarget() *simNode {
	if c.ctrl.LeaderID != NoLeader && c.ch.intn(4, "fresh metadata") > 0 {
		return c.node(c.ctrl.LeaderID)
	}
	return c.pick("producer target")
}

// restartOne restarts one of the replicas that are down, if any.
func (c *miniCluster) restartOne() {
	var down []*simNode
	for _, n := range c.nodes {
		if !n.up {
			down = append(down, n)
		}
	}
	if len(down) > 0 {
		c.restart(down[c.ch.intn(len(down), "restarted")])
	}
}

// produce sends one record, acks=all three times in four, else acks=1
// (whose records the checks do not follow).
func (c *miniCluster) produce(n *simNode) {
	acks := AcksAll
	if c.ch.intn(4, "acks=1") == 0 {
		acks = AcksLeader
	}
	if !n.up {
		return
	}
	epoch, err := n.p.AdmitProduce(acks)
	if err != nil {
		return
	}
	c.nextReq++
	value := fmt.Sprintf("v%d", c.nextReq)
	n.log.append(epoch, value)
	if acks == AcksAll {
		c.pending[c.nextReq] = ackedRecord{value, n.log.LogEndOffset() - 1}
	}
	if err := n.p.OnLeaderAppend(LeaderAppend{LastOffset: n.log.LogEndOffset() - 1, Acks: acks, RequestID: c.nextReq, DeadlineMs: c.nowMs + 1000}, c.nowMs); err != nil {
		panic(err)
	}
}

func (c *miniCluster) fetch(n *simNode) {
	leaderID, _, ok := n.p.NextFetch()
	if n.up && ok && c.node(leaderID).up {
		fetchOnce(n.node, c.node(leaderID).node, c.nowMs)
	}
}

func (c *miniCluster) tick(elapsedMs int64) {
	c.nowMs += elapsedMs
	for _, n := range c.nodes {
		if n.up {
			n.p.MaybeShrinkISR(c.nowMs)
			n.p.ExpireAcks(c.nowMs)
		}
	}
}

// sendAlterPartition carries a pending proposal to the controller, unless
// the node is cut off from it (fenced).
func (c *miniCluster) sendAlterPartition(n *simNode) {
	if !n.up || c.brokers[n.id-1].Fenced {
		return
	}
	if req, ok := n.p.PendingAlterPartition(); ok {
		var resp AlterPartitionResponse
		c.ctrl, resp = HandleAlterPartition(c.ctrl, *req, c.pol, func(id int32) BrokerStatus { return c.brokers[id-1] })
		n.reply = &resp
	}
}

func (c *miniCluster) deliverReply(n *simNode) {
	if n.up && n.reply != nil {
		if err := n.p.OnAlterPartitionResponse(*n.reply, c.nowMs); err != nil {
			panic(err)
		}
		n.reply = nil
	}
}

// push delivers the controller's current state to n.
func (c *miniCluster) push(n *simNode) {
	if !n.up || c.brokers[n.id-1].Fenced {
		return
	}
	if t, err := n.p.ApplyState(c.ctrl, c.nowMs); err == nil && t.TruncateToOffset != NoOffset {
		n.log.truncateTo(t.TruncateToOffset)
	}
}

// crash takes n down; within the budget it may be unclean, losing every
// record it had not flushed. The controller fences it at once and learns of
// an unclean shutdown (in Kafka: when it registers again).
func (c *miniCluster) crash(n *simNode) {
	if !n.up {
		return
	}
	n.up, n.hwCheckpoint, n.reply = false, n.p.HighWatermark(), nil
	unclean := c.uncleanLeft > 0 && c.ch.intn(2, "unclean") == 1
	if unclean {
		c.uncleanLeft--
		n.log.truncateTo(min(n.flushed, n.log.LogEndOffset()))
	}
	c.brokers[n.id-1].Fenced = true
	c.removeFromISR(n.id, unclean)
}

func (c *miniCluster) removeFromISR(id int32, unclean bool) {
	var uncleanIDs []int32
	if unclean {
		uncleanIDs = []int32{id}
		c.ctrl, _ = RecordUncleanShutdown(c.ctrl, id)
	}
	if containsID(c.ctrl.ISR, id) {
		c.ctrl = ChangeISR(c.ctrl, withoutIDs(c.ctrl.ISR, []int32{id}), uncleanIDs, c.pol)
	}
	if c.ctrl.LeaderID == id || c.ctrl.LeaderID == NoLeader {
		c.elect()
	}
}

func (c *miniCluster) elect() {
	c.ctrl, _ = Elect(c.ctrl, c.pol, func(id int32) bool { return c.brokers[id-1].Registered && !c.brokers[id-1].Fenced })
}

func (c *miniCluster) restart(n *simNode) {
	if n.up {
		return
	}
	b := &c.brokers[n.id-1]
	b.Epoch++
	b.Fenced = false
	n.node = newNode(n.id, n.log, n.hwCheckpoint, c.nodeConfig(b.Epoch))
	n.up = true
	if c.ctrl.LeaderID == NoLeader {
		c.elect()
	}
	c.push(n)
}

// toggleFence cuts a live node off from the controller, or reconnects it.
func (c *miniCluster) toggleFence(n *simNode) {
	if !n.up {
		return
	}
	b := &c.brokers[n.id-1]
	if b.Fenced = !b.Fenced; b.Fenced {
		c.removeFromISR(n.id, false)
	} else if c.ctrl.LeaderID == NoLeader {
		c.elect()
	}
}

func (c *miniCluster) collectAcks() {
	for _, n := range c.nodes {
		if !n.up {
			continue
		}
		for _, r := range n.p.TakeAckResults() {
			if rec, ok := c.pending[r.RequestID]; ok && r.Error == codeNone {
				c.acked[rec.value] = rec.offset
			}
			delete(c.pending, r.RequestID)
		}
	}
}

// checkAcked: the leader the controller names, once it leads that epoch,
// holds every acknowledged record at its offset.
func (c *miniCluster) checkAcked() error {
	if c.ctrl.LeaderID == NoLeader {
		return nil
	}
	l := c.node(c.ctrl.LeaderID)
	if !l.up || l.p.Role() != RoleLeader || l.p.LeaderEpoch() != c.ctrl.LeaderEpoch {
		return nil
	}
	return c.holdsAcked(l)
}

func (c *miniCluster) holdsAcked(n *simNode) error {
	for _, value := range sortedKeys(c.acked) {
		offset := c.acked[value]
		if offset >= n.log.LogEndOffset() || n.log.entries[offset-n.log.start].value != value {
			return fmt.Errorf("acknowledged %s at offset %d is missing from replica %d, which holds %v", value, offset, n.id, values(n.log))
		}
	}
	return nil
}

// heal restarts and reconnects everything, then lets replication settle.
func (c *miniCluster) heal() {
	for _, n := range c.nodes {
		c.restart(n)
		c.brokers[n.id-1].Fenced = false
	}
	for range 60 {
		if c.ctrl.LeaderID == NoLeader {
			c.elect()
		}
		for _, n := range c.nodes {
			c.push(n)
			c.sendAlterPartition(n)
			c.deliverReply(n)
			c.fetch(n)
			c.fetch(n)
		}
		c.tick(10)
	}
}

func (c *miniCluster) checkConverged() error {
	if c.ctrl.LeaderID == NoLeader {
		return fmt.Errorf("no leader after healing: %+v", c.ctrl)
	}
	leader := c.node(c.ctrl.LeaderID)
	for _, n := range c.nodes {
		if !slices.Equal(n.log.entries, leader.log.entries) {
			return fmt.Errorf("after healing replica %d holds %v, leader %d holds %v", n.id, values(n.log), leader.id, values(leader.log))
		}
	}
	return c.holdsAcked(leader)
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestPropMiniClusterKeepsAckedRecords: with the correct protocol, no
// acks=all record is lost within the fault budget, and replicas converge.
func TestPropMiniClusterKeepsAckedRecords(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := newMiniCluster(rapidChooser{rt}, Bugs{})
		if err := c.run(rapid.IntRange(10, 150).Draw(rt, "steps")); err != nil {
			rt.Fatal(err)
		}
	})
}

// TestMiniClusterSeeds sweeps seeds with the correct protocol, and finds,
// for each planted bug, a seed on which it loses an acknowledged record or
// keeps replicas apart: the checks can fail, and each bug is caught.
func TestMiniClusterSeeds(t *testing.T) {
	const seedsMax = 3000
	for seed := uint64(1); seed <= 300; seed++ {
		if err := newMiniCluster(seededChooser{rand.New(rand.NewPCG(seed, 0))}, Bugs{}).run(150); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	bugs := map[string]Bugs{
		"hw-truncation":   {HWTruncation: true},
		"early-ack":       {EarlyAck: true},
		"no-fencing":      {NoFencing: true},
		"isr-min-ignored": {ISRMinIgnored: true},
	}
	for _, name := range sortedKeys(map[string]int64{"hw-truncation": 0, "early-ack": 0, "no-fencing": 0, "isr-min-ignored": 0}) {
		caught := false
		for seed := uint64(1); seed <= seedsMax && !caught; seed++ {
			if err := newMiniCluster(seededChooser{rand.New(rand.NewPCG(seed, 0))}, bugs[name]).run(150); err != nil {
				t.Logf("%s caught at seed %d: %v", name, seed, err)
				caught = true
			}
		}
		if !caught {
			t.Errorf("%s not caught in %d seeds", name, seedsMax)
		}
	}
}
