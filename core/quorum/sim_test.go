package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/sim/sched"
)

const msNs = int64(1_000_000)

// simNode is one voter in the harness: the Raft, and the durable state a
// crash keeps (hard state and log as of the last completed Sync).
type simNode struct {
	id      int32
	node    *sched.Node
	raft    *Raft
	hard    HardState
	snap    *Snapshot
	durable []Entry // after snap
	syncing bool
	// applied are the committed entries this incarnation applied, in order.
	applied []Entry
	// timer fires at timerAtMs, at or before the Raft's next deadline, and
	// moves only to an earlier one, as the driver's does (Node.armTimer).
	timer     sched.Handle
	timerAtMs int64
	// draws counts the Raft's random draws (election jitter).
	draws int
}

// chaosStats count what a sweep exercised, so that a test can demand that
// its paths ran.
type chaosStats struct {
	leaders, snapshotsTaken, snapshotsInstalled, restarts int
}

// simFaults are the fault rates of one run, drawn from the seed.
type simFaults struct {
	delayMsMax     int64
	dropPerMille   int
	crashes        bool
	partitions     bool
	pauses         bool
	syncDelayMsMax int64
	snapshots      bool
}

// cluster is a deterministic multi-voter harness over sim/sched: messages
// cross as encoded kmsg requests and responses with seeded delays, drops and
// partitions; syncs take seeded time; crashes lose everything not synced.
type cluster struct {
	t        testing.TB
	s        *sched.Scheduler
	nodes    []*simNode
	voters   []int32
	bugs     Bugs
	netRng   *rand.Rand
	diskRng  *rand.Rand
	faults   simFaults
	blocked  map[[2]int32]bool
	streams  *sched.Streams
	proposed int
	stats    *chaosStats

	// Checker state.
	leaderOfEpoch map[int32]int32
	// votes: (voter, epoch) -> the candidate it granted its vote to.
	votes map[[2]int32]int32
	// durableVotes: (voter, epoch) -> the candidate its durable hard
	// state names.
	durableVotes map[[2]int32]int32
	committed    map[int64]Entry
	// committedBy: offset -> the entry and the lowest epoch whose leader
	// counted it committed. Raft's leader completeness: a leader of any
	// later epoch holds it.
	committedBy map[int64]epochEntry
	violation   string
	// onLeader, if set, is told of every new leader.
	onLeader func(id int32, epoch int32, nowNs int64)
}

func newCluster(t testing.TB, seed uint64, voters int, bugs Bugs, faults simFaults) *cluster {
	streams := sched.NewStreams(seed)
	c := &cluster{
		stats: &chaosStats{},
		t:     t, s: sched.New(sched.Options{}), bugs: bugs, faults: faults, streams: streams,
		netRng: streams.Get("quorum/net"), diskRng: streams.Get("quorum/disk"),
		blocked: map[[2]int32]bool{}, leaderOfEpoch: map[int32]int32{}, votes: map[[2]int32]int32{}, durableVotes: map[[2]int32]int32{}, committed: map[int64]Entry{}, committedBy: map[int64]epochEntry{},
	}
	for i := range voters {
		c.voters = append(c.voters, int32(i+1))
	}
	for _, id := range c.voters {
		n := &simNode{id: id, node: c.s.NewNode(id), hard: HardState{VotedFor: -1}}
		c.nodes = append(c.nodes, n)
		c.start(n)
	}
	return c
}

func (c *cluster) nowMs() int64 { return c.s.NowNs() / msNs }

func (c *cluster) node(id int32) *simNode { return c.nodes[id-1] }

// start (re)starts n's Raft from its durable state and its ticks: at its
// deadlines, as the driver ticks, and at seeded moments in between, each of
// which must change nothing if it comes before the deadline.
func (c *cluster) start(n *simNode) {
	rng := c.streams.Getf("quorum/raft/%d/%d", n.id, n.node.Incarnation())
	cfg := DefaultConfig(n.id, c.voters, func(limit int64) int64 {
		n.draws++
		return rng.Int64N(limit)
	})
	cfg.Bugs = c.bugs
	cfg.Observer = c
	r, err := New(cfg, n.hard, n.snap, slices.Clone(n.durable), c.nowMs())
	if err != nil {
		c.t.Fatalf("restart node %d: %v", n.id, err)
	}
	n.raft, n.syncing, n.applied = r, false, nil
	if n.snap != nil {
		c.loadSnapshot(n, n.snap)
	}
	n.timer = sched.Handle{}
	c.armTimer(n)
	tickRng := c.streams.Getf("quorum/ticks/%d/%d", n.id, n.node.Incarnation())
	var tick func()
	tick = func() {
		c.tick(n)
		n.node.After((1+tickRng.Int64N(20))*msNs, tick)
	}
	n.node.After(10*msNs, tick)
}

// armTimer makes n's timer fire by its Raft's next deadline, as
// Node.armTimer does.
func (c *cluster) armTimer(n *simNode) {
	deadlineMs := n.raft.NextDeadlineMs()
	if deadlineMs == NoDeadlineMs || (n.timer.Pending() && deadlineMs >= n.timerAtMs) {
		return
	}
	n.timer.Cancel()
	n.timer, n.timerAtMs = n.node.After(deadlineMs*msNs-c.s.NowNs(), func() {
		n.timer = sched.Handle{}
		c.tick(n)
	}), deadlineMs
}

// tick ticks n's Raft; a Tick before the Raft's deadline must change
// nothing, draw nothing and send nothing.
func (c *cluster) tick(n *simNode) {
	nowMs := c.nowMs()
	if deadlineMs := n.raft.NextDeadlineMs(); nowMs < deadlineMs {
		before, draws := tickEffectsOf(n.raft), n.draws
		n.raft.Tick(nowMs)
		if after := tickEffectsOf(n.raft); after != before || n.draws != draws {
			c.fail("node %d ticked at %d ms, before its deadline %d ms, changed its state (%d random draws)\nbefore %+v\nafter  %+v",
				n.id, nowMs, deadlineMs, n.draws-draws, before, after)
			return
		}
	} else {
		n.raft.Tick(nowMs)
	}
	c.after(n)
}

// after runs the Ready loop of n and the checks that follow any input.
var (
	debugTrace func(format string, args ...any)
	debugReady func(id int32, nowMs int64, rd Ready)
)

func (c *cluster) after(n *simNode) {
	c.checkLeader(n)
	c.recordCommits(n)
	if debugTrace != nil {
		debugTrace("%d ms node %d %v epoch %d leader %d", c.nowMs(), n.id, n.raft.Role(), n.raft.Epoch(), n.raft.LeaderID())
	}
	for !n.syncing && n.raft.HasReady() {
		rd := n.raft.Ready()
		if debugReady != nil {
			debugReady(n.id, c.nowMs(), rd)
		}
		if rd.HardState == nil && rd.TruncateTo < 0 && len(rd.Entries) == 0 && rd.Snapshot == nil {
			c.complete(n, rd)
			continue
		}
		n.syncing = true
		delay := 1 + c.diskRng.Int64N(c.faults.syncDelayMsMax)
		// Written now (to the page cache), durable when the Sync completes:
		// a crash in between drops this event, so the data is lost.
		n.node.After(delay*msNs, func() {
			if rd.HardState != nil {
				n.hard = *rd.HardState
				if n.hard.VotedFor >= 0 {
					c.VotePersisted(n.id, n.hard.Epoch, n.hard.VotedFor)
				}
			}
			if rd.Snapshot != nil && rd.SnapshotInstall {
				n.durable = nil
			}
			base := int64(0)
			if n.snap != nil {
				base = n.snap.EndOffset
			}
			if rd.SnapshotInstall {
				base = rd.Snapshot.EndOffset
			}
			if rd.TruncateTo >= 0 && rd.TruncateTo-base < int64(len(n.durable)) {
				keep := max(rd.TruncateTo-base, 0)
				n.durable = n.durable[:keep:keep]
			}
			for _, e := range rd.Entries {
				if e.Offset < base {
					continue // below a snapshot installed in the same Ready
				}
				if e.Offset != base+int64(len(n.durable)) {
					c.fail("node %d persisted entry at %d onto a durable log [%d, %d); ready truncate %d entries %d.. snapshot %+v install %v", n.id, e.Offset, base, base+int64(len(n.durable)), rd.TruncateTo, rd.Entries[0].Offset, rd.Snapshot, rd.SnapshotInstall)
					return
				}
				n.durable = append(n.durable, e)
			}
			if s := rd.Snapshot; s != nil {
				// Durable snapshot: the entries behind it go.
				for len(n.durable) > 0 && n.durable[0].Offset < s.EndOffset {
					n.durable = n.durable[1:]
				}
				if len(n.durable) > 0 && n.durable[0].Offset != s.EndOffset {
					n.durable = nil
				}
				n.snap = s
			}
			n.syncing = false
			c.complete(n, rd)
			c.after(n)
		})
	}
	c.armTimer(n)
}

// complete sends rd's messages, applies its committed entries, advances.
func (c *cluster) complete(n *simNode, rd Ready) {
	for _, m := range rd.Messages {
		c.send(m)
	}
	if rd.SnapshotInstall {
		c.stats.snapshotsInstalled++
		c.loadSnapshot(n, rd.Snapshot)
	}
	for _, e := range rd.Committed {
		c.apply(n, e)
	}
	n.raft.Advance(c.nowMs(), rd)
}

func (c *cluster) fail(format string, args ...any) {
	if c.violation == "" {
		c.violation = fmt.Sprintf("at %d ms: ", c.nowMs()) + fmt.Sprintf(format, args...)
		c.s.Halt(c.violation)
	}
}

// send delivers m through the kmsg codec, as bytes, after a seeded delay.
func (c *cluster) send(m Message) {
	if m.To < 1 || int(m.To) > len(c.nodes) {
		c.fail("message %v to unknown node %d", m.Type, m.To)
		return
	}
	c.checkVote(m)
	if c.blocked[[2]int32{m.From, m.To}] || c.netRng.IntN(1000) < c.faults.dropPerMille {
		return
	}
	to := c.node(m.To)
	wire := c.roundTrip(m)
	delay := 1 + c.netRng.Int64N(c.faults.delayMsMax)
	to.node.After(delay*msNs, func() {
		if debugTrace != nil && wire.Type != MsgFetch && wire.Type != MsgFetchResp {
			debugTrace("%d ms %d->%d %+v", c.nowMs(), wire.From, wire.To, wire)
		}
		to.raft.Step(c.nowMs(), wire)
		c.after(to)
	})
}

// roundTrip encodes m as its Kafka RPC, to bytes and back.
func (c *cluster) roundTrip(m Message) Message {
	if !m.Type.IsResponse() {
		req, err := EncodeRequest(m)
		if err != nil {
			c.t.Fatalf("encode %v: %v", m.Type, err)
		}
		decoded := kmsg.RequestForKey(req.Key())
		decoded.SetVersion(req.GetVersion())
		if err := decoded.ReadFrom(req.AppendTo(nil)); err != nil {
			c.t.Fatalf("decode %v: %v", m.Type, err)
		}
		out, err := DecodeRequest(m.To, decoded)
		if err != nil {
			c.t.Fatalf("decode %v: %v", m.Type, err)
		}
		out.Ref = m.Ref // the driver's correlation travels beside the message
		return out
	}
	resp, err := EncodeResponse(m)
	if err != nil {
		c.t.Fatalf("encode %v: %v", m.Type, err)
	}
	decoded := kmsg.ResponseForKey(resp.Key())
	decoded.SetVersion(resp.GetVersion())
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		c.t.Fatalf("decode %v: %v", m.Type, err)
	}
	req := Message{Type: requestOf(m.Type), From: m.To, To: m.From, Ref: m.Ref, PreVote: m.PreVote}
	out, err := DecodeResponse(req, decoded)
	if err != nil {
		c.t.Fatalf("decode %v: %v", m.Type, err)
	}
	return out
}

func requestOf(t MsgType) MsgType {
	switch t {
	case MsgVoteResp:
		return MsgVote
	case MsgBeginEpochResp:
		return MsgBeginEpoch
	case MsgFetchSnapshotResp:
		return MsgFetchSnapshot
	case MsgEndEpochResp:
		return MsgEndEpoch
	}
	return MsgFetch
}

// --- Checkers -------------------------------------------------------------

// checkLeader: election safety (one leader per epoch) and leader
// completeness (a new leader holds every entry known committed).
func (c *cluster) checkLeader(n *simNode) {
	r := n.raft
	if r.Role() != Leader {
		return
	}
	epoch := r.Epoch()
	prev, seen := c.leaderOfEpoch[epoch]
	if seen && prev != n.id {
		c.fail("election safety: nodes %d and %d both lead epoch %d", prev, n.id, epoch)
		return
	}
	if seen {
		return
	}
	c.leaderOfEpoch[epoch] = n.id
	c.stats.leaders++
	if c.onLeader != nil {
		c.onLeader(n.id, epoch, c.s.NowNs())
	}
	offsets := make([]int64, 0, len(c.committedBy))
	for o := range c.committedBy { // order-independent: sorted below
		offsets = append(offsets, o)
	}
	slices.Sort(offsets)
	for _, o := range offsets {
		want := c.committedBy[o]
		if want.epoch >= epoch || o < r.LogStartOffset() {
			continue // not required yet, or in the leader's snapshot, checked as it was applied
		}
		if o >= r.EndOffset() || !sameEntry(r.Entries(o, o+1)[0], want.entry) {
			c.fail("leader completeness: leader %d of epoch %d lacks entry %d (epoch %d) committed in epoch %d", n.id, epoch, o, want.entry.Epoch, want.epoch)
			return
		}
	}
}

type epochEntry struct {
	entry Entry
	epoch int32
}

// recordCommits notes what a leader counts committed, and in which epoch.
func (c *cluster) recordCommits(n *simNode) {
	r := n.raft
	if r.Role() != Leader {
		return
	}
	for o := r.CommittedOffset() - 1; o >= r.LogStartOffset(); o-- {
		prev, ok := c.committedBy[o]
		if ok && prev.epoch <= r.Epoch() {
			break // recorded already, and everything below it too
		}
		c.committedBy[o] = epochEntry{entry: r.Entries(o, o+1)[0], epoch: r.Epoch()}
	}
}

// checkVote: a voter grants at most one vote per epoch, across its
// restarts: the rule election safety rests on, checked on every granted
// vote that leaves a node.
func (c *cluster) checkVote(m Message) {
	if m.Type != MsgVoteResp || m.PreVote || !m.Granted {
		return
	}
	key := [2]int32{m.From, m.Epoch}
	if prev, ok := c.votes[key]; ok && prev != m.To {
		c.fail("vote safety: node %d voted for %d and for %d in epoch %d", m.From, prev, m.To, m.Epoch)
		return
	}
	c.votes[key] = m.To
}

// VotePersisted implements Observer: a voter's durable vote, its vote for
// itself as a candidate included, names one candidate per epoch. (The
// harness persists Readies itself, so it calls this, not the driver.)
func (c *cluster) VotePersisted(voter, epoch, votedFor int32) {
	key := [2]int32{voter, epoch}
	if prev, ok := c.durableVotes[key]; ok && prev != votedFor {
		c.fail("vote safety: node %d's durable vote in epoch %d went from %d to %d", voter, epoch, prev, votedFor)
		return
	}
	c.durableVotes[key] = votedFor
}

// BecameLeader implements Observer; checkLeader does the checking.
func (c *cluster) BecameLeader(int32, int32) {}

// Applied implements Observer; apply does the checking.
func (c *cluster) Applied(int32, []Entry) {}

// Committed implements Observer: the commit rule, checked as the leader
// moves its commit offset: a majority of voters holds the entry below it.
func (c *cluster) Committed(leader, epoch int32, prev, offset int64) {
	l := c.node(leader).raft
	if l == nil || offset <= 0 {
		return
	}
	last := l.Entries(offset-1, offset)[0]
	have := 0
	for _, n := range c.nodes {
		r := n.raft
		if r == nil {
			continue
		}
		if offset-1 < r.LogStartOffset() ||
			(offset-1 < r.EndOffset() && sameEntry(r.Entries(offset-1, offset)[0], last)) {
			have++
		}
	}
	if have < len(c.voters)/2+1 {
		c.fail("commit rule: leader %d of epoch %d commits offset %d held by %d of %d voters", leader, epoch, offset-1, have, len(c.voters))
	}
}

// encodeState is the harness's state machine snapshot: every applied
// entry, so that installing one can be checked entry by entry.
func encodeState(applied []Entry) []byte {
	var out []byte
	for _, e := range applied {
		out = binary.BigEndian.AppendUint32(out, uint32(e.Epoch))
		out = binary.BigEndian.AppendUint32(out, uint32(len(e.Data)))
		out = append(out, e.Data...)
	}
	return out
}

func decodeState(b []byte) ([]Entry, error) {
	var out []Entry
	for len(b) > 0 {
		if len(b) < 8 || int(binary.BigEndian.Uint32(b[4:])) > len(b)-8 {
			return nil, fmt.Errorf("snapshot state cut at entry %d", len(out))
		}
		n := int(binary.BigEndian.Uint32(b[4:]))
		var data []byte
		if n > 0 {
			data = b[8 : 8+n]
		}
		out = append(out, Entry{Offset: int64(len(out)), Epoch: int32(binary.BigEndian.Uint32(b)), Data: data})
		b = b[8+n:]
	}
	return out, nil
}

// loadSnapshot replaces n's state machine with snap's, checking every
// entry in it against what was committed (state machine safety).
func (c *cluster) loadSnapshot(n *simNode, snap *Snapshot) {
	entries, err := decodeState(snap.Data)
	if err != nil || int64(len(entries)) != snap.EndOffset {
		c.fail("node %d loads snapshot %d-%d holding %d entries: %v", n.id, snap.EndOffset, snap.Epoch, len(entries), err)
		return
	}
	n.applied = nil
	for _, e := range entries {
		c.apply(n, e)
	}
}

// takeSnapshots has every node snapshot its applied state now and then.
func (c *cluster) takeSnapshots(rng *rand.Rand) {
	for _, n := range c.nodes {
		if n.node.Up() && !n.node.Paused() && int64(len(n.applied)) > n.raft.LogStartOffset()+5 {
			err := n.raft.TakeSnapshot(int64(len(n.applied)), encodeState(n.applied))
			if err == nil {
				c.stats.snapshotsTaken++
			}
			if err != nil && !errors.Is(err, ErrSnapshotPending) {
				c.fail("node %d snapshot: %v", n.id, err)
				return
			}
			c.after(n)
		}
	}
	c.s.After((300+rng.Int64N(2000))*msNs, func() { c.takeSnapshots(rng) })
}

// apply: state machine safety: every node applies the same entry at an
// offset, in order.
func (c *cluster) apply(n *simNode, e Entry) {
	if e.Offset != int64(len(n.applied)) {
		c.fail("node %d applies offset %d after %d entries", n.id, e.Offset, len(n.applied))
		return
	}
	n.applied = append(n.applied, e)
	if prev, ok := c.committed[e.Offset]; ok && !sameEntry(prev, e) {
		c.fail("state machine safety: offset %d applied as epoch %d %q and epoch %d %q", e.Offset, prev.Epoch, prev.Data, e.Epoch, e.Data)
		return
	}
	c.committed[e.Offset] = e
}

// checkLogMatching: if two logs hold an entry with the same offset and
// epoch, they are identical up to it.
func (c *cluster) checkLogMatching() {
	for i, a := range c.nodes {
		for _, b := range c.nodes[i+1:] {
			from := max(a.raft.LogStartOffset(), b.raft.LogStartOffset())
			to := min(a.raft.EndOffset(), b.raft.EndOffset())
			if from >= to {
				continue
			}
			la, lb := a.raft.Entries(from, to), b.raft.Entries(from, to)
			last := -1
			for i := range la {
				if la[i].Epoch == lb[i].Epoch {
					last = i
				}
			}
			for i := 0; i <= last; i++ {
				if !sameEntry(la[i], lb[i]) {
					c.fail("log matching: nodes %d and %d agree on offset %d (epoch %d) but differ at %d", a.id, b.id, la[last].Offset, la[last].Epoch, la[i].Offset)
					return
				}
			}
		}
	}
}

func sameEntry(a, b Entry) bool {
	return a.Offset == b.Offset && a.Epoch == b.Epoch && bytes.Equal(a.Data, b.Data)
}

// --- Workload and faults ----------------------------------------------------

// propose offers a new entry to every node that believes it leads.
func (c *cluster) propose() {
	for _, n := range c.nodes {
		if n.node.Up() && !n.node.Paused() && n.raft.Role() == Leader {
			c.proposed++
			if _, err := n.raft.Propose(c.nowMs(), fmt.Appendf(nil, "p%d-n%d", c.proposed, n.id)); err != nil {
				c.fail("leader %d refused a proposal: %v", n.id, err)
			}
			c.after(n)
		}
	}
}

func (c *cluster) startWorkload(rng *rand.Rand, untilNs int64) {
	var next func()
	next = func() {
		if c.s.NowNs() >= untilNs {
			return
		}
		c.propose()
		c.s.After((20+rng.Int64N(200))*msNs, next)
	}
	c.s.After(100*msNs, next)
	var check func()
	check = func() {
		c.checkLogMatching()
		c.s.After(250*msNs, check)
	}
	c.s.After(250*msNs, check)
}

// startFaults injects crashes, partitions and pauses until untilNs.
func (c *cluster) startFaults(rng *rand.Rand, untilNs int64) {
	var next func()
	next = func() {
		if c.s.NowNs() >= untilNs {
			return
		}
		victim := c.nodes[rng.IntN(len(c.nodes))]
		if rng.IntN(2) == 0 { // half the faults hit a leader: more elections
			for _, n := range c.nodes {
				if n.node.Up() && n.raft.Role() == Leader {
					victim = n
				}
			}
		}
		switch rng.IntN(4) {
		case 0:
			if c.faults.crashes && victim.node.Up() {
				victim.node.Crash()
				downMs := 50 + rng.Int64N(3000)
				c.s.After(downMs*msNs, func() { c.restart(victim) })
			}
		case 1:
			if c.faults.partitions {
				c.partition(rng)
				c.s.After((100+rng.Int64N(4000))*msNs, func() { clear(c.blocked) })
			}
		case 2:
			if c.faults.pauses && victim.node.Up() {
				victim.node.PauseFor((10 + rng.Int64N(3000)) * msNs)
			}
		case 3: // a controlled shutdown's resignation
			if victim.node.Up() && !victim.node.Paused() {
				victim.raft.Resign(c.nowMs())
				c.after(victim)
			}
		}
		c.s.After((200+rng.Int64N(1500))*msNs, next)
	}
	c.s.After(500*msNs, next)
}

func (c *cluster) restart(n *simNode) {
	if !n.node.Up() {
		c.stats.restarts++
		n.node.Restart()
		c.start(n)
	}
}

// partition blocks every link between a random side and the rest, one way
// or both.
func (c *cluster) partition(rng *rand.Rand) {
	side := map[int32]bool{}
	for _, n := range c.nodes {
		side[n.id] = rng.IntN(2) == 0
	}
	oneWay := rng.IntN(4) == 0
	for _, a := range c.voters {
		for _, b := range c.voters {
			if side[a] && !side[b] {
				c.blocked[[2]int32{a, b}] = true
				if !oneWay {
					c.blocked[[2]int32{b, a}] = true
				}
			}
		}
	}
}

// heal ends every fault: partitions cleared, crashed nodes restarted, paused
// ones resumed, no more drops.
func (c *cluster) heal() {
	clear(c.blocked)
	c.faults.dropPerMille = 0
	for _, n := range c.nodes {
		if n.node.Paused() {
			n.node.Resume()
		}
		c.restart(n)
	}
}

func drawFaults(rng *rand.Rand) simFaults {
	return simFaults{
		delayMsMax: 1 + rng.Int64N([]int64{5, 60, 400}[rng.IntN(3)]), dropPerMille: rng.IntN(30),
		crashes: rng.IntN(4) != 0, partitions: rng.IntN(4) != 0, pauses: rng.IntN(3) != 0,
		syncDelayMsMax: 1 + rng.Int64N(20), snapshots: rng.IntN(3) != 0,
	}
}

// runChaos runs one seed: faults for faultMs, then healing; it returns the
// first violation ("" if none). With liveness, it also demands that after
// healing a leader emerges and a new entry reaches every node.
func runChaos(t testing.TB, seed uint64, voters int, bugs Bugs, liveness bool, stats *chaosStats) string {
	streams := sched.NewStreams(seed)
	faults := drawFaults(streams.Get("quorum/faults/draw"))
	c := newCluster(t, seed, voters, bugs, faults)
	if stats != nil {
		c.stats = stats
	}
	const faultMs, healMs = 15_000, 12_000
	c.startWorkload(streams.Get("quorum/workload"), (faultMs+healMs-3000)*msNs)
	c.startFaults(streams.Get("quorum/faults"), faultMs*msNs)
	if faults.snapshots {
		c.takeSnapshots(streams.Get("quorum/snapshots"))
	}
	c.s.Run(faultMs * msNs)
	if c.violation != "" {
		return c.violation
	}
	c.heal()
	c.s.Run((faultMs + healMs) * msNs)
	if c.violation != "" || !liveness {
		return c.violation
	}
	c.checkLogMatching()
	// Liveness: a leader of the highest epoch that has committed an entry
	// of its epoch; every node has committed and applied exactly what it
	// has, 3 s after the last proposal.
	var leader *simNode
	for _, n := range c.nodes {
		if n.raft.Role() == Leader && (leader == nil || n.raft.Epoch() > leader.raft.Epoch()) {
			leader = n
		}
	}
	if leader == nil {
		return fmt.Sprintf("liveness: no leader %d ms after healing", healMs)
	}
	commit := leader.raft.CommittedOffset()
	if commit == 0 || epochAt(leader.raft, commit-1) != leader.raft.Epoch() {
		return fmt.Sprintf("liveness: leader %d of epoch %d has committed nothing of its epoch (commit %d)", leader.id, leader.raft.Epoch(), commit)
	}
	for _, n := range c.nodes {
		if n.raft.CommittedOffset() != commit || int64(len(n.applied)) != commit {
			return fmt.Sprintf("liveness: node %d (%v epoch %d leader %d end %d up %v) committed %d, applied %d; leader %d (epoch %d end %d) committed %d",
				n.id, n.raft.Role(), n.raft.Epoch(), n.raft.LeaderID(), n.raft.EndOffset(), n.node.Up(), n.raft.CommittedOffset(), len(n.applied), leader.id, leader.raft.Epoch(), leader.raft.EndOffset(), commit)
		}
	}
	return c.violation
}

func newStreams(seed uint64) *sched.Streams { return sched.NewStreams(seed) }

// epochAt is the epoch of the entry at offset, held or the last in r's snapshot.
func epochAt(r *Raft, offset int64) int32 {
	if offset < r.LogStartOffset() {
		return r.LatestSnapshot().Epoch
	}
	return r.Entries(offset, offset+1)[0].Epoch
}
