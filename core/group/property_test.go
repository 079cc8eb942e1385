package group

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// topicPartitions is the size of the one topic the simulated members share.
const topicPartitions = 6

// assignmentChecker is the simulator's group invariant, kept here to test
// the coordinator against it: within one generation, no partition is
// assigned to two members; and a member commits successfully only with a
// generation it was given.
type assignmentChecker struct {
	// owners[generation][partition] is the member that was assigned it.
	owners map[int32]map[int32]string
	// joined[member][generation]: the member got a JoinGroup answer for it.
	joined map[string]map[int32]bool
}

func newAssignmentChecker() *assignmentChecker {
	return &assignmentChecker{owners: map[int32]map[int32]string{}, joined: map[string]map[int32]bool{}}
}

func (a *assignmentChecker) joinedGeneration(member string, generation int32) {
	if a.joined[member] == nil {
		a.joined[member] = map[int32]bool{}
	}
	a.joined[member][generation] = true
}

// assigned records member's assignment in generation; an error names a
// partition already held by another member in that generation.
func (a *assignmentChecker) assigned(member string, generation int32, partitions []int32) error {
	if a.owners[generation] == nil {
		a.owners[generation] = map[int32]string{}
	}
	for _, p := range partitions {
		if other, ok := a.owners[generation][p]; ok && other != member {
			return fmt.Errorf("generation %d: partition %d assigned to %s and to %s", generation, p, other, member)
		}
		a.owners[generation][p] = member
	}
	return nil
}

func (a *assignmentChecker) committed(member string, generation int32) error {
	if generation >= 0 && !a.joined[member][generation] {
		return fmt.Errorf("member %s committed with generation %d it never joined", member, generation)
	}
	return nil
}

// encodeAssignment and decodeAssignment are the simulated members' own
// assignment format: one byte per partition. The coordinator never looks.
func encodeAssignment(ps []int32) string {
	b := make([]byte, len(ps))
	for i, p := range ps {
		b[i] = byte(p)
	}
	return string(b)
}

func decodeAssignment(b []byte) []int32 {
	out := make([]int32, len(b))
	for i, p := range b {
		out[i] = int32(p)
	}
	return out
}

// roundRobin is the leader's assignor: partitions dealt to members in the
// order the JoinGroup answer lists them.
func roundRobin(members []string) map[string]string {
	byMember := map[string][]int32{}
	for p := int32(0); p < topicPartitions; p++ {
		m := members[int(p)%len(members)]
		byMember[m] = append(byMember[m], p)
	}
	out := map[string]string{}
	for _, m := range members {
		out[m] = encodeAssignment(byMember[m])
	}
	return out
}

// simMember is a simulated consumer-group client: dynamic, or static with
// an instance id (KIP-345).
type simMember struct {
	name       string
	instanceID string
	memberID   string
	generation int32
	members    []string // the JoinGroup member list, if it leads
	join       *pendingReply
	sync       *pendingReply
	syncGen    int32
	heartbeats []*pendingReply
	leave      *pendingReply
	commits    []*simCommit
	// synced: it holds an assignment for generation; mustRejoin: a
	// heartbeat said the group is rebalancing.
	synced, mustRejoin bool
}

// owner is who the assignment checker holds responsible for m's
// partitions: a static member's partitions move with its instance id when
// it rejoins under a new member id within a generation, as KIP-345 intends.
func (m *simMember) owner() string {
	if m.instanceID != "" {
		return "instance " + m.instanceID
	}
	return m.memberID
}

type simCommit struct {
	reply      *pendingReply
	memberID   string
	generation int32
	partition  int32
	offset     int64
}

// world is one property-test run: members, coordinator incarnations, the
// log, and what the checkers know.
type world struct {
	t        *rapid.T
	h        *harness
	members  []*simMember
	all      []*pendingReply
	check    *assignmentChecker
	maxGen   int32 // highest generation answered by this incarnation
	orderErr error
	acked    map[int32]int64   // last acknowledged commit per partition
	possible map[int32][]int64 // commits with unknown outcome since then
}

// send sends req and checks, as each JoinGroup answer arrives, that this
// coordinator never answers a generation older than one it answered before.
func (w *world) send(req kmsg.Request) *pendingReply {
	p := &pendingReply{}
	coordinator := w.h.c
	w.h.c.Handle(req, Client{ClientID: "client", ClientHost: "/10.0.0.1"}, func(r kmsg.Response) {
		if jr, ok := r.(*kmsg.JoinGroupResponse); ok && jr.ErrorCode == 0 && coordinator == w.h.c {
			if jr.Generation < w.maxGen && w.orderErr == nil {
				w.orderErr = fmt.Errorf("JoinGroup answered generation %d after %d", jr.Generation, w.maxGen)
			}
			w.maxGen = max(w.maxGen, jr.Generation)
		}
		p.reply(r)
	})
	w.all = append(w.all, p)
	return p
}

func (w *world) sendJoin(m *simMember) {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.ProtocolType = 5, "g", m.memberID, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 3000, 2000
	r.Protocols = []kmsg.JoinGroupRequestProtocol{proto("roundrobin", m.name)}
	if m.instanceID != "" {
		inst := m.instanceID
		r.InstanceID = &inst
	}
	m.join = w.send(r)
}

func (w *world) sendSync(m *simMember) {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 3, "g", m.memberID, m.generation
	if len(m.members) > 0 {
		a := roundRobin(m.members)
		for _, id := range m.members {
			r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a[id])})
		}
	}
	m.syncGen = m.generation
	m.sync = w.send(r)
}

func (w *world) sendHeartbeat(m *simMember) {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = "g", m.memberID, m.generation
	m.heartbeats = append(m.heartbeats, w.send(r))
}

// round has every member do its next sensible step, so the protocol makes
// progress between the random disturbances.
func (w *world) round(commitAppends bool, advanceMs int64) {
	for _, m := range w.members {
		switch {
		case m.join != nil || m.sync != nil:
		case m.memberID == "" || m.generation < 0 || m.mustRejoin:
			w.sendJoin(m)
		case !m.synced:
			w.sendSync(m)
		default:
			w.sendHeartbeat(m)
		}
	}
	w.process()
	if commitAppends {
		w.h.store.commitAll()
	}
	w.h.clock.advance(advanceMs)
	w.process()
}

// process handles every answer that has arrived.
func (w *world) process() {
	if w.orderErr != nil {
		w.t.Fatal(w.orderErr)
	}
	for _, m := range w.members {
		if m.join != nil && m.join.answered() {
			r := m.join.one(w.t).(*kmsg.JoinGroupResponse)
			m.join = nil
			switch r.ErrorCode {
			case 0:
				m.memberID, m.generation, m.members = r.MemberID, r.Generation, nil
				m.synced, m.mustRejoin = false, false
				if r.LeaderID == r.MemberID {
					for _, jm := range r.Members {
						m.members = append(m.members, jm.MemberID)
					}
				}
				w.check.joinedGeneration(m.memberID, m.generation)
			case kerr.MemberIDRequired.Code:
				m.memberID = r.MemberID
			case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				m.memberID, m.generation = "", -1
			}
		}
		if m.sync != nil && m.sync.answered() {
			r := m.sync.one(w.t).(*kmsg.SyncGroupResponse)
			m.sync = nil
			if r.ErrorCode == kerr.RebalanceInProgress.Code {
				m.mustRejoin = true
			}
			if r.ErrorCode == 0 {
				m.synced = m.syncGen == m.generation
				if err := w.check.assigned(m.owner(), m.syncGen, decodeAssignment(r.MemberAssignment)); err != nil {
					w.t.Fatal(err)
				}
			}
		}
		kept := m.heartbeats[:0]
		for _, hb := range m.heartbeats {
			if !hb.answered() {
				kept = append(kept, hb)
				continue
			}
			switch hb.one(w.t).(*kmsg.HeartbeatResponse).ErrorCode {
			case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				m.memberID, m.generation = "", -1
			case kerr.IllegalGeneration.Code:
				m.generation = -1
			case kerr.RebalanceInProgress.Code:
				m.mustRejoin = true
			}
		}
		m.heartbeats = kept
		if m.leave != nil && m.leave.answered() {
			m.leave = nil
		}
		keptCommits := m.commits[:0]
		for _, c := range m.commits {
			if !c.reply.answered() {
				keptCommits = append(keptCommits, c)
				continue
			}
			code := c.reply.one(w.t).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
			switch code {
			case 0:
				if err := w.check.committed(c.memberID, c.generation); err != nil {
					w.t.Fatal(err)
				}
				w.acked[c.partition] = c.offset
				w.possible[c.partition] = nil
			case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
				// Unknown outcome: the record may be in the log.
				w.possible[c.partition] = append(w.possible[c.partition], c.offset)
			}
		}
		m.commits = keptCommits
	}
}

// failover moves the partition to a new coordinator: the old one unloads
// (answering what it parked), appends still pending may or may not survive
// in the new leader's log, and the new coordinator loads the log.
func (w *world) failover(keepPending bool) {
	old := w.h
	old.c.Unload()
	log := old.store.log
	pending := len(old.store.pending)
	old.store.commitAll() // completions reach the unloaded coordinator: ignored
	if !keepPending {
		log = log[:len(log)-pending]
	}
	store := &memStore{log: append([][]byte{}, log...)}
	c, err := New(w.h.cfg, old.clock, store, w.h.c.newID)
	if err != nil {
		w.t.Fatal(err)
	}
	w.h = &harness{t: w.t, clock: old.clock, store: store, c: c, cfg: old.cfg}
	c.BeginLoad()
	if err := c.Load(store.records(w.t)); err != nil {
		w.t.Fatal(err)
	}
	c.FinishLoad()
	w.maxGen = 0
}

var statRuns, statAssigned, statGens int

// TestPropertyCoordinatorKeepsInvariants drives several simulated members
// through random joins, syncs, heartbeats, leaves, commits, fetches, time,
// store completions and failures, and coordinator failovers. The
// coordinator asserts its own invariants (a panic fails the run); the test
// checks the simulator's: no partition assigned to two members within a
// generation, commits only with a joined generation, every request answered
// exactly once, generations never answered out of order, and OffsetFetch
// showing the last acknowledged commit (or one whose outcome is unknown)
// through failovers.
func TestPropertyCoordinatorKeepsInvariants(t *testing.T) {
	rapid.Check(t, coordinatorProperty(Bugs{}))
	t.Logf("runs %d generations-with-assignments %d partition-assignments %d", statRuns, statGens, statAssigned)
}

// coordinatorProperty is one run of the property test with bugs planted.
func coordinatorProperty(bugs Bugs) func(*rapid.T) {
	return func(rt *rapid.T) {
		cfg := testConfig()
		cfg.Bugs = bugs
		cfg.GroupMinSessionTimeoutMs = 1000
		cfg.GroupInitialRebalanceDelayMs = int32(rapid.IntRange(0, 500).Draw(rt, "initialDelayMs"))
		cfg.GroupMaxSize = int32(rapid.IntRange(2, 5).Draw(rt, "groupMaxSize"))
		w := &world{t: rt, h: newHarness(rt, cfg), check: newAssignmentChecker(), acked: map[int32]int64{}, possible: map[int32][]int64{}}
		for i := 0; i < rapid.IntRange(1, 4).Draw(rt, "members"); i++ {
			m := &simMember{name: fmt.Sprintf("c%d", i), generation: -1}
			if rapid.Bool().Draw(rt, "static") {
				m.instanceID = fmt.Sprintf("i%d", i)
			}
			w.members = append(w.members, m)
		}
		for i := int32(0); i < topicPartitions; i++ {
			w.acked[i] = -1
		}
		pick := func() *simMember { return rapid.SampledFrom(w.members).Draw(rt, "member") }
		rt.Repeat(map[string]func(*rapid.T){
			"join": func(rt *rapid.T) {
				if m := pick(); m.join == nil {
					w.sendJoin(m)
				}
			},
			"restart": func(rt *rapid.T) {
				// The client process restarts: a static member comes back
				// with its instance id and no member id.
				m := pick()
				if m.join != nil || m.sync != nil {
					rt.Skip("busy")
				}
				m.memberID, m.generation, m.members, m.synced = "", -1, nil, false
				w.sendJoin(m)
			},
			"sync": func(rt *rapid.T) {
				m := pick()
				if m.sync != nil || m.join != nil || m.generation < 0 {
					rt.Skip("nothing to sync")
				}
				w.sendSync(m)
			},
			"heartbeat": func(rt *rapid.T) {
				m := pick()
				if m.memberID == "" {
					rt.Skip("not a member")
				}
				w.sendHeartbeat(m)
			},
			"round": func(rt *rapid.T) {
				for i := rapid.IntRange(1, 10).Draw(rt, "rounds"); i > 0; i-- {
					w.round(rapid.Bool().Draw(rt, "commitAppends"), int64(rapid.IntRange(0, 600).Draw(rt, "ms")))
				}
			},
			"advance": func(rt *rapid.T) {
				w.h.clock.advance(int64(rapid.IntRange(0, 4000).Draw(rt, "ms")))
			},
			"storeCommit": func(rt *rapid.T) {
				n := rapid.IntRange(0, len(w.h.store.pending)).Draw(rt, "appends")
				for i := 0; i < n; i++ {
					done := w.h.store.pending[0]
					w.h.store.pending = w.h.store.pending[1:]
					done(nil)
				}
			},
			"storeFail": func(rt *rapid.T) {
				// Only the newest append fails: it is cut from the log, as
				// a leader's unreplicated suffix is.
				if n := len(w.h.store.pending); n > 0 {
					done := w.h.store.pending[n-1]
					w.h.store.pending = w.h.store.pending[:n-1]
					w.h.store.log = w.h.store.log[:len(w.h.store.log)-1]
					done(fmt.Errorf("append: %w", kerr.NotEnoughReplicas))
				}
			},
			"failover": func(rt *rapid.T) {
				w.failover(rapid.Bool().Draw(rt, "keepPending"))
			},
			"": func(rt *rapid.T) { w.process() },
		})
		w.process()
		statRuns++
		for _, g := range w.check.owners {
			statAssigned += len(g)
		}
		statGens += len(w.check.owners)
		w.h.c.Unload()
		w.h.store.commitAll()
		for i, p := range w.all {
			if len(p.resps) != 1 {
				rt.Fatalf("request %d answered %d times", i, len(p.resps))
			}
		}
	}
}

// failureRecorder is a rapid.TB that notes a failure instead of failing:
// the planted-bug test expects one.
type failureRecorder struct {
	*testing.T
	failed  bool
	message string
}

func (f *failureRecorder) Fatalf(format string, args ...any) {
	f.failed, f.message = true, fmt.Sprintf(format, args...)
}
func (f *failureRecorder) Fatal(args ...any)                 { f.failed, f.message = true, fmt.Sprint(args...) }
func (f *failureRecorder) Errorf(format string, args ...any) { f.Fatalf(format, args...) }
func (f *failureRecorder) Error(args ...any)                 { f.Fatal(args...) }
func (f *failureRecorder) FailNow()                          { f.failed = true }
func (f *failureRecorder) Fail()                             { f.failed = true }
func (f *failureRecorder) Failed() bool                      { return f.failed }

// TestPropertyCatchesPlantedDoubleAssign proves the property test can fail:
// with group-double-assign planted, its assignment checker must find a
// partition assigned to two members within one generation.
func TestPropertyCatchesPlantedDoubleAssign(t *testing.T) {
	for name, value := range map[string]string{"rapid.nofailfile": "true", "rapid.shrinktime": "2s", "rapid.checks": "2000", "rapid.steps": "100"} {
		previous := flag.Lookup(name).Value.String()
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, previous) })
	}
	rec := &failureRecorder{T: t}
	rapid.Check(rec, coordinatorProperty(Bugs{GroupDoubleAssign: true}))
	if !rec.failed {
		t.Fatal("the property test passed with group-double-assign planted")
	}
	if !strings.Contains(rec.message, "assigned to") {
		t.Errorf("the planted bug was caught by something other than the assignment checker: %s", rec.message)
	}
}

// TestPropertyReloadedCoordinatorKeepsAgreeing extends the memory-equals-log
// property past the reload: simple groups (where whether the log still
// holds a group decides if it is forgotten) go through commits, OffsetDeletes,
// topic deletions, expiry passes and failed appends; then the running
// coordinator and one loaded from its log get the same further requests,
// and must keep answering alike, also once reloaded again. A flag that
// differs between memory and a reload (group.inLog) shows only in what
// happens next, which the single comparison after one reload cannot see.
func TestPropertyReloadedCoordinatorKeepsAgreeing(t *testing.T) {
	groups := []string{"a", "s"}
	topics := []string{"t", "u"}
	rapid.Check(t, func(rt *rapid.T) {
		h := expiryHarness(&testing.T{})
		h.t = rt
		// step draws one request and sends it to every harness of hs.
		step := func(rt *rapid.T, hs []*harness, failAllowed bool) {
			action := rapid.SampledFrom([]string{"commit", "commit", "offsetDelete", "deleteTopic", "expire", "advance", "storeCommit", "storeFail"}).Draw(rt, "action")
			switch action {
			case "commit":
				g := rapid.SampledFrom(groups).Draw(rt, "group")
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
				offset := int64(rapid.IntRange(0, 1000).Draw(rt, "offset"))
				for _, x := range hs {
					x.commit(g, "", -1, topic, p, offset)
				}
			case "offsetDelete":
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = rapid.SampledFrom(groups).Draw(rt, "group")
				p := kmsg.OffsetDeleteRequestTopicPartition{Partition: int32(rapid.IntRange(0, 1).Draw(rt, "partition"))}
				r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: rapid.SampledFrom(topics).Draw(rt, "topic"), Partitions: []kmsg.OffsetDeleteRequestTopicPartition{p}}}
				for _, x := range hs {
					x.send(r)
				}
			case "deleteTopic":
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				for _, x := range hs {
					x.c.OnTopicDeleted(topic)
				}
			case "expire":
				for _, x := range hs {
					x.c.ExpireOffsets()
				}
			case "advance":
				// The harnesses share one clock.
				h.clock.advance(int64(rapid.IntRange(0, 3*expiryRetentionMs/2).Draw(rt, "ms")))
			case "storeCommit":
				for _, x := range hs {
					x.store.commitAll()
				}
			case "storeFail":
				if !failAllowed {
					return
				}
				// Only the newest append fails, cut from the log as a
				// leader's unreplicated suffix is.
				if n := len(h.store.pending); n > 0 {
					done := h.store.pending[n-1]
					h.store.pending = h.store.pending[:n-1]
					h.store.log = h.store.log[:len(h.store.log)-1]
					done(fmt.Errorf("append: %w", kerr.NotEnoughReplicas))
				}
			}
		}
		compare := func(rt *rapid.T, when string, x, y *harness) {
			for _, g := range groups {
				d, dy := describeGroup(x, g), describeGroup(y, g)
				if d.State != dy.State || d.ProtocolType != dy.ProtocolType {
					rt.Fatalf("%s: group %s: %s %q against %s %q", when, g, d.State, d.ProtocolType, dy.State, dy.ProtocolType)
				}
				for _, topic := range topics {
					for p := range int32(2) {
						if a, b := x.fetch(g, topic, p), y.fetch(g, topic, p); a != b {
							rt.Fatalf("%s: group %s %s-%d: offset %d against %d", when, g, topic, p, a, b)
						}
					}
				}
			}
		}
		for range rapid.IntRange(0, 25).Draw(rt, "before") {
			step(rt, []*harness{h}, true)
		}
		h.store.commitAll()
		r := h.reloaded(rt)
		compare(rt, "after the reload", h, r)
		for range rapid.IntRange(0, 25).Draw(rt, "after") {
			step(rt, []*harness{h, r}, false)
		}
		h.store.commitAll()
		r.store.commitAll()
		compare(rt, "running and reloaded, after the same requests", h, r)
		compare(rt, "running against its own reload", h, h.reloaded(rt))
		compare(rt, "reloaded against its own reload", r, r.reloaded(rt))
	})
}
