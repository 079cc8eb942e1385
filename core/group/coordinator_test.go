package group

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ignoreTags skips kmsg's unknown tagged fields, which have unexported state.
var ignoreTags = cmpopts.IgnoreTypes(kmsg.Tags{})

func joinResp(t tb, p *pendingReply) *kmsg.JoinGroupResponse {
	t.Helper()
	return p.one(t).(*kmsg.JoinGroupResponse)
}

func syncResp(t tb, p *pendingReply) *kmsg.SyncGroupResponse {
	t.Helper()
	return p.one(t).(*kmsg.SyncGroupResponse)
}

func describeGroup(h *harness, id string) kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{id}
	return h.send(r).one(h.t).(*kmsg.DescribeGroupsResponse).Groups[0]
}

// stableGroup forms generation 1 of group g with the given members (each
// joining with KIP-394), the first as leader, and syncs assignment "a-<id>".
func stableGroup(t *testing.T, h *harness, g string, n int) []string {
	t.Helper()
	var ids []string
	var joins []*pendingReply
	for i := 0; i < n; i++ {
		id, p := h.joinNew(g, joinOpts{})
		ids, joins = append(ids, id), append(joins, p)
	}
	h.clock.advance(0)
	leader := joinResp(t, joins[0])
	if leader.ErrorCode != 0 || leader.Generation != 1 || leader.LeaderID != ids[0] || len(leader.Members) != n {
		t.Fatalf("leader's join: error %d generation %d leader %s members %d", leader.ErrorCode, leader.Generation, leader.LeaderID, len(leader.Members))
	}
	assignment := map[string]string{}
	for _, id := range ids {
		assignment[id] = "a-" + id
	}
	var syncs []*pendingReply
	for i := n - 1; i >= 0; i-- {
		var a map[string]string
		if i == 0 {
			a = assignment
		}
		syncs = append(syncs, h.sync(g, ids[i], 1, a))
	}
	h.store.commitAll()
	for _, s := range syncs {
		if r := syncResp(t, s); r.ErrorCode != 0 {
			t.Fatalf("sync: error %d", r.ErrorCode)
		}
	}
	return ids
}

func TestJoinSyncWaitsForInitialDelayAndStore(t *testing.T) {
	cfg := testConfig()
	cfg.GroupInitialRebalanceDelayMs = 3000
	h := newHarness(t, cfg)

	first := h.join("g", joinOpts{})
	r := joinResp(t, first)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("first join without id: error %d id %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	a := r.MemberID
	joinA := h.join("g", joinOpts{memberID: a})
	b, joinB := h.joinNew("g", joinOpts{})
	h.clock.advance(2999)
	if joinA.answered() || joinB.answered() {
		t.Fatal("joins answered before the initial rebalance delay")
	}
	// B arrived during the delay: it is extended up to the rebalance
	// timeout (5000 ms).
	h.clock.advance(1)
	if joinA.answered() {
		t.Fatal("initial delay not extended for a newcomer")
	}
	h.clock.advance(2000)
	ra, rb := joinResp(t, joinA), joinResp(t, joinB)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("joins: %d/%d generations %d/%d", ra.ErrorCode, rb.ErrorCode, ra.Generation, rb.Generation)
	}
	if ra.LeaderID != a || rb.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader %s/%s, members %d/%d; want %s leading with 2 members listed to it alone", ra.LeaderID, rb.LeaderID, len(ra.Members), len(rb.Members), a)
	}
	if *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Errorf("protocol %q type %q", *ra.Protocol, *ra.ProtocolType)
	}

	syncB := h.sync("g", b, 1, nil)
	syncA := h.sync("g", a, 1, map[string]string{a: "pa", b: "pb"})
	if syncA.answered() || syncB.answered() {
		t.Fatal("SyncGroup answered before the group record was committed")
	}
	if got := describeGroup(h, "g").State; got != "CompletingRebalance" {
		t.Errorf("state while the record replicates = %s", got)
	}
	h.store.commitAll()
	if got, want := string(syncResp(t, syncA).MemberAssignment), "pa"; got != want {
		t.Errorf("leader's assignment %q, want %q", got, want)
	}
	if got, want := string(syncResp(t, syncB).MemberAssignment), "pb"; got != want {
		t.Errorf("follower's assignment %q, want %q", got, want)
	}
	d := describeGroup(h, "g")
	want := kmsg.DescribeGroupsResponseGroup{
		Group: "g", State: "Stable", ProtocolType: "consumer", Protocol: "range", AuthorizedOperations: -2147483648,
		Members: []kmsg.DescribeGroupsResponseGroupMember{
			{MemberID: a, ClientID: "client", ClientHost: "/10.0.0.1", ProtocolMetadata: []byte("m"), MemberAssignment: []byte("pa")},
			{MemberID: b, ClientID: "client", ClientHost: "/10.0.0.1", ProtocolMetadata: []byte("m"), MemberAssignment: []byte("pb")},
		},
	}
	if diff := cmp.Diff(want, d, ignoreTags); diff != "" {
		t.Errorf("DescribeGroups (-want +got):\n%s", diff)
	}
	if code := h.heartbeat("g", b, 1); code != 0 {
		t.Errorf("heartbeat: %d", code)
	}
}

func TestProtocolSelection(t *testing.T) {
	cases := []struct {
		name   string
		offers [][]string
		want   string
	}{
		{"only common protocol", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}, {"range"}}, "range"},
		{"most first-choice votes", [][]string{{"rr", "range"}, {"rr", "range"}, {"range", "rr"}}, "rr"},
		{"tie goes to the leader's preference", [][]string{{"x", "y"}, {"y", "x"}}, "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			var joins []*pendingReply
			for _, names := range c.offers {
				var ps []kmsg.JoinGroupRequestProtocol
				for _, n := range names {
					ps = append(ps, proto(n, n+"-meta"))
				}
				_, p := h.joinNew("g", joinOpts{protocols: ps})
				joins = append(joins, p)
			}
			h.clock.advance(0)
			for _, j := range joins {
				if got := *joinResp(t, j).Protocol; got != c.want {
					t.Errorf("selected %q, want %q", got, c.want)
				}
			}
			for _, m := range joinResp(t, joins[0]).Members {
				if got, want := string(m.ProtocolMetadata), c.want+"-meta"; got != want {
					t.Errorf("leader sees metadata %q for %s, want %q", got, m.MemberID, want)
				}
			}
		})
	}
}

func TestInconsistentProtocolAndBadJoins(t *testing.T) {
	h := newHarness(t, testConfig())
	stableGroup(t, h, "g", 1)
	cases := []struct {
		name string
		o    joinOpts
		mut  func(*kmsg.JoinGroupRequest)
		want int16
	}{
		{"no common protocol", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{proto("sticky", "")}}, nil, kerr.InconsistentGroupProtocol.Code},
		{"other protocol type", joinOpts{}, func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, kerr.InconsistentGroupProtocol.Code},
		{"session timeout too short", joinOpts{sessionMs: 50}, nil, kerr.InvalidSessionTimeout.Code},
		{"unknown member id", joinOpts{memberID: "nobody"}, nil, kerr.UnknownMemberID.Code},
		{"empty group id", joinOpts{}, func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID.Code},
	}
	for _, c := range cases {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group, r.MemberID, r.ProtocolType = 5, "g", c.o.memberID, "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 5000
		if c.o.sessionMs != 0 {
			r.SessionTimeoutMillis = c.o.sessionMs
		}
		r.Protocols = c.o.protocols
		if r.Protocols == nil {
			r.Protocols = []kmsg.JoinGroupRequestProtocol{proto("range", "m")}
		}
		if c.mut != nil {
			c.mut(r)
		}
		if got := joinResp(t, h.send(r)).ErrorCode; got != c.want {
			t.Errorf("%s: error %d, want %d", c.name, got, c.want)
		}
	}
	if got := describeGroup(h, "g").State; got != "Stable" {
		t.Errorf("refused joins moved the group to %s", got)
	}
}

func TestRebalanceOnJoinLeaveAndTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	a := stableGroup(t, h, "g", 1)[0]

	// A newcomer makes the group rebalance; the member learns it from its
	// heartbeat and rejoins.
	b, joinB := h.joinNew("g", joinOpts{})
	if code := h.heartbeat("g", a, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	if code := syncResp(t, h.sync("g", a, 1, nil)).ErrorCode; code != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync during rebalance: %d", code)
	}
	joinA := h.join("g", joinOpts{memberID: a})
	ra, rb := joinResp(t, joinA), joinResp(t, joinB)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a {
		t.Fatalf("generations %d/%d leader %s", ra.Generation, rb.Generation, ra.LeaderID)
	}
	if code := h.heartbeat("g", a, 1); code != kerr.IllegalGeneration.Code {
		t.Errorf("heartbeat with the old generation: %d, want ILLEGAL_GENERATION", code)
	}
	h.sync("g", b, 2, nil)
	h.sync("g", a, 2, map[string]string{a: "1", b: "2"})
	h.store.commitAll()

	// A leaves: B rebalances alone and becomes leader.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Group, lr.MemberID = "g", a
	if code := h.send(lr).one(t).(*kmsg.LeaveGroupResponse).ErrorCode; code != 0 {
		t.Fatalf("leave: %d", code)
	}
	rb = joinResp(t, h.join("g", joinOpts{memberID: b}))
	if rb.Generation != 3 || rb.LeaderID != b || len(rb.Members) != 1 {
		t.Fatalf("after leave: generation %d leader %s members %d", rb.Generation, rb.LeaderID, len(rb.Members))
	}
	h.sync("g", b, 3, map[string]string{b: "all"})
	h.store.commitAll()

	// B goes silent: after its session timeout the group is Empty, at a
	// new generation, and that is persisted.
	logBefore := len(h.store.log)
	h.clock.advance(9999)
	if got := describeGroup(h, "g").State; got != "Stable" {
		t.Fatalf("state before the session timeout: %s", got)
	}
	h.clock.advance(1)
	d := describeGroup(h, "g")
	if d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after the session timeout: %s with %d members", d.State, len(d.Members))
	}
	if len(h.store.log) != logBefore+1 {
		t.Fatalf("empty generation not persisted: %d batches, want %d", len(h.store.log), logBefore+1)
	}
	if code := h.heartbeat("g", b, 3); code != kerr.UnknownMemberID.Code {
		t.Errorf("expired member's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
}

func TestMemberThatDoesNotRejoinIsRemovedAtRebalanceTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := stableGroup(t, h, "g", 2)
	a, b := ids[0], ids[1]
	joinA := h.join("g", joinOpts{memberID: a, protocols: []kmsg.JoinGroupRequestProtocol{proto("range", "new")}})
	// B keeps heartbeating but never rejoins.
	for i := 0; i < 4; i++ {
		h.clock.advance(1000)
		h.heartbeat("g", b, 1)
	}
	if joinA.answered() {
		t.Fatal("join phase ended before the rebalance timeout")
	}
	h.clock.advance(1000)
	ra := joinResp(t, joinA)
	if ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("generation %d with %d members, want 2 with 1", ra.Generation, len(ra.Members))
	}
	if code := h.heartbeat("g", b, 1); code != kerr.UnknownMemberID.Code {
		t.Errorf("removed member's heartbeat: %d", code)
	}
}

func TestFailedGroupAppendRebalances(t *testing.T) {
	h := newHarness(t, testConfig())
	a, joinA := h.joinNew("g", joinOpts{})
	h.clock.advance(0)
	joinResp(t, joinA)
	syncA := h.sync("g", a, 1, map[string]string{a: "x"})
	h.store.failAll(fmt.Errorf("replication: %w", kerr.NotLeaderForPartition))
	if code := syncResp(t, syncA).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("sync after a failed append: %d, want NOT_COORDINATOR", code)
	}
	if got := describeGroup(h, "g").State; got != "PreparingRebalance" {
		t.Errorf("state after a failed append: %s, want PreparingRebalance", got)
	}
}

func TestOffsetCommitIsVisibleOnlyOnceCommitted(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := stableGroup(t, h, "g", 1)
	a := ids[0]
	p := h.commit("g", a, 1, "t", 0, 10)
	if p.answered() {
		t.Fatal("commit answered before its record was committed")
	}
	if got := h.fetch("g", "t", 0); got != -1 {
		t.Fatalf("fetch while the commit replicates = %d, want -1", got)
	}
	h.store.commitAll()
	if code := commitCode(t, p); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if got := h.fetch("g", "t", 0); got != 10 {
		t.Fatalf("fetch = %d, want 10", got)
	}
	failed := h.commit("g", a, 1, "t", 0, 20)
	h.store.failAll(errors.New("disk on fire"))
	if code := commitCode(t, failed); code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("failed commit: %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	if got := h.fetch("g", "t", 0); got != 10 {
		t.Errorf("fetch after a failed commit = %d, want 10", got)
	}

	cases := []struct {
		name       string
		group      string
		member     string
		generation int32
		want       int16
	}{
		{"stale generation", "g", a, 0, kerr.IllegalGeneration.Code},
		{"unknown member", "g", "x", 1, kerr.UnknownMemberID.Code},
		{"simple commit to a group with members", "g", "", -1, kerr.UnknownMemberID.Code},
		{"generation for a group that does not exist", "nope", "m", 3, kerr.IllegalGeneration.Code},
	}
	for _, c := range cases {
		if got := commitCode(t, h.commit(c.group, c.member, c.generation, "t", 0, 5)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	simple := h.commit("simple", "", -1, "t", 3, 7)
	h.store.commitAll()
	if code := commitCode(t, simple); code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	if got := h.fetch("simple", "t", 3); got != 7 {
		t.Errorf("simple group's offset = %d, want 7", got)
	}

	big := kmsg.NewPtrOffsetCommitRequest()
	big.Version, big.Group, big.Generation = 2, "simple", -1
	meta := string(make([]byte, 4097))
	pp := kmsg.NewOffsetCommitRequestTopicPartition()
	pp.Metadata = &meta
	big.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{pp}}}
	if code := commitCode(t, h.send(big)); code != kerr.OffsetMetadataTooLarge.Code {
		t.Errorf("4097-byte metadata: %d, want OFFSET_METADATA_TOO_LARGE", code)
	}
}

func TestCommitDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	a, joinA := h.joinNew("g", joinOpts{})
	h.clock.advance(0)
	joinResp(t, joinA)
	if code := commitCode(t, h.commit("g", a, 1, "t", 0, 1)); code != kerr.RebalanceInProgress.Code {
		t.Errorf("commit before the assignment: %d, want REBALANCE_IN_PROGRESS", code)
	}
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	joinA := h.join("g", joinOpts{instanceID: "i1"})
	_, joinB := h.joinNew("g", joinOpts{})
	h.clock.advance(0)
	ra, rb := joinResp(t, joinA), joinResp(t, joinB)
	if ra.ErrorCode != 0 {
		t.Fatalf("static member's first join: %d (a static member needs no MEMBER_ID_REQUIRED)", ra.ErrorCode)
	}
	a, b := ra.MemberID, rb.MemberID
	h.sync("g", b, 1, nil)
	h.sync("g", a, 1, map[string]string{a: "pa", b: "pb"})
	h.store.commitAll()

	// The static member restarts: same instance id, no member id, same
	// metadata. It gets a new id in the same generation, after the record.
	rejoin := h.join("g", joinOpts{instanceID: "i1"})
	if rejoin.answered() {
		t.Fatal("static rejoin answered before its record was committed")
	}
	h.store.commitAll()
	rr := joinResp(t, rejoin)
	if rr.ErrorCode != 0 || rr.Generation != 1 || rr.MemberID == a {
		t.Fatalf("static rejoin: error %d generation %d id %s (old %s)", rr.ErrorCode, rr.Generation, rr.MemberID, a)
	}
	if rr.LeaderID != a {
		t.Errorf("v5 static leader rejoin: leader %s, want the old id %s so it does not reassign", rr.LeaderID, a)
	}
	if code := syncResp(t, h.sync("g", rr.MemberID, 1, nil)); code.ErrorCode != 0 || string(code.MemberAssignment) != "pa" {
		t.Errorf("rejoined static member's sync: error %d assignment %q, want pa", code.ErrorCode, code.MemberAssignment)
	}
	inst := "i1"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = 4, "g", a, 1, &inst
	if code := h.send(hb).one(t).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Errorf("old static member id's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	if got := describeGroup(h, "g").State; got != "Stable" {
		t.Errorf("state after a static rejoin: %s, want Stable", got)
	}
	if code := h.heartbeat("g", b, 1); code != 0 {
		t.Errorf("other member's heartbeat after a static rejoin: %d, want none (no rebalance)", code)
	}

	// With new metadata the rejoin rebalances.
	changed := h.join("g", joinOpts{instanceID: "i1", protocols: []kmsg.JoinGroupRequestProtocol{proto("range", "other")}})
	if code := h.heartbeat("g", b, 1); code != kerr.RebalanceInProgress.Code {
		t.Errorf("heartbeat after a static rejoin with new metadata: %d, want REBALANCE_IN_PROGRESS", code)
	}
	h.join("g", joinOpts{memberID: b})
	if r := joinResp(t, changed); r.Generation != 2 {
		t.Errorf("generation after a static rejoin with new metadata: %d, want 2", r.Generation)
	}
}

func TestLoadingUnloadAndNotCoordinator(t *testing.T) {
	h := newHarness(t, testConfig())
	a := stableGroup(t, h, "g", 1)[0]
	_, pendingJoin := h.joinNew("g", joinOpts{})
	pendingCommit := h.commit("g", a, 1, "t", 0, 5) // allowed while PreparingRebalance
	if pendingJoin.answered() || pendingCommit.answered() {
		t.Fatal("join or commit answered early")
	}
	h.c.Unload()
	if code := joinResp(t, pendingJoin).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("parked join at unload: %d, want NOT_COORDINATOR", code)
	}
	if code := commitCode(t, pendingCommit); code != kerr.NotCoordinator.Code {
		t.Errorf("in-flight commit at unload: %d, want NOT_COORDINATOR", code)
	}
	if code := h.heartbeat("g", a, 1); code != kerr.NotCoordinator.Code {
		t.Errorf("unloaded heartbeat: %d", code)
	}
	h.store.commitAll() // the old incarnation's append completes: ignored
	h.c.BeginLoad()
	if code := h.heartbeat("g", a, 1); code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("heartbeat while loading: %d", code)
	}
	if code := commitCode(t, h.commit("g", a, 1, "t", 0, 5)); code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("commit while loading: %d", code)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	if code := h.send(lg).one(t).(*kmsg.ListGroupsResponse).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("list while loading: %d", code)
	}
}

func TestUnloadAnswersInFlightCommit(t *testing.T) {
	h := newHarness(t, testConfig())
	a := stableGroup(t, h, "g", 1)[0]
	p := h.commit("g", a, 1, "t", 0, 5)
	h.c.Unload()
	if code := commitCode(t, p); code != kerr.NotCoordinator.Code {
		t.Errorf("in-flight commit at unload: %d", code)
	}
	h.store.commitAll()
	if len(p.resps) != 1 {
		t.Errorf("in-flight commit answered %d times", len(p.resps))
	}
}

func TestNotThisCoordinatorsGroup(t *testing.T) {
	h := newHarness(t, DefaultConfig(47, 50)) // "a" hashes to 47 of 50
	if code := h.heartbeat("ab", "m", 1); code != kerr.NotCoordinator.Code {
		t.Errorf("group of partition 5 at coordinator 47: %d, want NOT_COORDINATOR", code)
	}
	if code := h.heartbeat("a", "m", 1); code != kerr.UnknownMemberID.Code {
		t.Errorf("group of partition 47: %d, want UNKNOWN_MEMBER_ID", code)
	}
}

func TestFailoverRestoresGroupsAndOffsets(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := stableGroup(t, h, "g", 2)
	for i, off := range []int64{3, 9, 12} {
		h.commit("g", ids[0], 1, "t", int32(i%2), off)
	}
	h.commit("simple", "", -1, "u", 0, 100)
	h.store.commitAll()
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "simple"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	delReply := h.send(del)
	h.store.commitAll()
	if code := delReply.one(t).(*kmsg.OffsetDeleteResponse).ErrorCode; code != 0 {
		t.Fatalf("offset delete: %d", code)
	}
	before := describeGroup(h, "g")

	// A new coordinator (another broker) loads the partition's log.
	clock := &manualClock{}
	c2, err := New(testConfig(), clock, &memStore{}, counterIDs())
	if err != nil {
		t.Fatal(err)
	}
	c2.BeginLoad()
	if err := c2.Load(h.store.records(t)); err != nil {
		t.Fatal(err)
	}
	c2.FinishLoad()
	h2 := &harness{t: t, clock: clock, store: &memStore{}, c: c2}
	if diff := cmp.Diff(before, describeGroup(h2, "g"), ignoreTags); diff != "" {
		t.Errorf("group after failover differs (-before +after):\n%s", diff)
	}
	for p, want := range map[int32]int64{0: 12, 1: 9} {
		if got := h2.fetch("g", "t", p); got != want {
			t.Errorf("offset of t/%d after failover = %d, want %d", p, got, want)
		}
	}
	if got := h2.fetch("simple", "u", 0); got != -1 {
		t.Errorf("deleted offset after failover = %d, want -1", got)
	}
	if code := h2.heartbeat("g", ids[1], 1); code != 0 {
		t.Errorf("member's heartbeat at the new coordinator: %d", code)
	}
	// Loaded members still time out if they are gone.
	clock.advance(10000)
	if got := describeGroup(h2, "g").State; got != "Empty" {
		t.Errorf("after the loaded members' sessions: %s, want Empty", got)
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, testConfig())
	stableGroup(t, h, "busy", 1)
	h.commit("idle", "", -1, "t", 0, 1)
	h.store.commitAll()
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Groups = []string{"busy", "idle", "missing"}
	p := h.send(r)
	if p.answered() {
		t.Fatal("DeleteGroups answered before the tombstones were committed")
	}
	if got := describeGroup(h, "idle").State; got != "Dead" {
		t.Errorf("group being deleted: %s, want Dead", got)
	}
	h.store.commitAll()
	var got []int16
	for _, g := range p.one(t).(*kmsg.DeleteGroupsResponse).Groups {
		got = append(got, g.ErrorCode)
	}
	want := []int16{kerr.NonEmptyGroup.Code, 0, kerr.GroupIDNotFound.Code}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DeleteGroups codes (-want +got):\n%s", diff)
	}
	if got := h.fetch("idle", "t", 0); got != -1 {
		t.Errorf("offset of a deleted group = %d", got)
	}
	recs := h.store.records(t)
	last := recs[len(recs)-1]
	if last.Value != nil || string(last.Key) != string(groupKeyBytes("idle")) {
		t.Errorf("last record is not the group's tombstone: key %x value %x", last.Key, last.Value)
	}
}

func TestListGroupsFilters(t *testing.T) {
	h := newHarness(t, testConfig())
	stableGroup(t, h, "s", 1)
	h.commit("e", "", -1, "t", 0, 1)
	h.store.commitAll()
	list := func(states []string) []string {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = 5
		r.StatesFilter = states
		var out []string
		for _, g := range h.send(r).one(t).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group+":"+g.GroupState)
		}
		return out
	}
	if diff := cmp.Diff([]string{"e:Empty", "s:Stable"}, list(nil)); diff != "" {
		t.Errorf("all groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s:Stable"}, list([]string{"stable"})); diff != "" {
		t.Errorf("stable groups (-want +got):\n%s", diff)
	}
}

func TestGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.GroupMaxSize = 2
	h := newHarness(t, cfg)
	stableGroup(t, h, "g", 2)
	if code := joinResp(t, h.join("g", joinOpts{})).ErrorCode; code != kerr.GroupMaxSizeReached.Code {
		t.Errorf("third member: %d, want GROUP_MAX_SIZE_REACHED", code)
	}
}

func TestOldJoinVersionNeedsNoMemberID(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.join("g", joinOpts{version: 2})
	h.clock.advance(0)
	r := joinResp(t, p)
	if r.ErrorCode != 0 || r.MemberID == "" || r.Generation != 1 {
		t.Errorf("JoinGroup v2 without id: error %d id %q generation %d", r.ErrorCode, r.MemberID, r.Generation)
	}
}

func TestStateTransitionTable(t *testing.T) {
	allowed := map[[2]State]bool{
		{PreparingRebalance, Empty}: true, {Stable, PreparingRebalance}: true,
		{CompletingRebalance, PreparingRebalance}: true, {Empty, PreparingRebalance}: true,
		{PreparingRebalance, CompletingRebalance}: true, {CompletingRebalance, Stable}: true,
		{Stable, Dead}: true, {PreparingRebalance, Dead}: true, {CompletingRebalance, Dead}: true,
		{Empty, Dead}: true, {Dead, Dead}: true,
	}
	for from := Empty; from <= Dead; from++ {
		for to := Empty; to <= Dead; to++ {
			if got := CanTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanTransition(%v, %v) = %v", from, to, got)
			}
		}
	}
	g := newGroup("x")
	defer func() {
		if recover() == nil {
			t.Error("Empty -> Stable did not panic")
		}
	}()
	g.transition(Stable, 0)
}

func TestOffsetFetchVersions(t *testing.T) {
	cfg := DefaultConfig(47, 50) // "a" is partition 47's, "ab" partition 5's
	cfg.GroupInitialRebalanceDelayMs = 0
	h := newHarness(t, cfg)
	h.commit("a", "", -1, "t", 1, 11)
	h.commit("a", "", -1, "s", 0, 22)
	h.store.commitAll()

	v8 := kmsg.NewPtrOffsetFetchRequest()
	v8.Version = 8
	v8.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "a", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1, 2}}}},
		{Group: "a"}, // null topics: every committed offset
		{Group: "ab", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1}}}},
	}
	resp := h.send(v8).one(t).(*kmsg.OffsetFetchResponse)
	type row struct {
		Group, Topic string
		Partition    int32
		Offset       int64
		Code         int16
	}
	var got []row
	for _, g := range resp.Groups {
		got = append(got, row{Group: g.Group, Code: g.ErrorCode, Offset: -9})
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				got = append(got, row{g.Group, tp.Topic, p.Partition, p.Offset, p.ErrorCode})
			}
		}
	}
	want := []row{
		{Group: "a", Offset: -9}, {"a", "t", 1, 11, 0}, {"a", "t", 2, -1, 0},
		{Group: "a", Offset: -9}, {"a", "s", 0, 22, 0}, {"a", "t", 1, 11, 0},
		{Group: "ab", Offset: -9, Code: kerr.NotCoordinator.Code}, {"ab", "t", 1, -1, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OffsetFetch v8 (-want +got):\n%s", diff)
	}

	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group = 1, "ab"
	v1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	r1 := h.send(v1).one(t).(*kmsg.OffsetFetchResponse)
	if code := r1.Topics[0].Partitions[0].ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("v1 group error goes per partition: %d", code)
	}
	v3 := kmsg.NewPtrOffsetFetchRequest()
	v3.Version, v3.Group = 3, "ab"
	if r3 := h.send(v3).one(t).(*kmsg.OffsetFetchResponse); r3.ErrorCode != kerr.NotCoordinator.Code || len(r3.Topics) != 0 {
		t.Errorf("v3 group error: top-level %d with %d topics", r3.ErrorCode, len(r3.Topics))
	}
}

func TestLeaveByInstanceIDAndDescribeUnknown(t *testing.T) {
	h := newHarness(t, testConfig())
	joinA := h.join("g", joinOpts{instanceID: "i1"})
	h.clock.advance(0)
	a := joinResp(t, joinA).MemberID
	h.sync("g", a, 1, map[string]string{a: "x"})
	h.store.commitAll()
	inst, other := "i1", "i9"
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 4, "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}, {InstanceID: &other}}
	resp := h.send(lr).one(t).(*kmsg.LeaveGroupResponse)
	if len(resp.Members) != 2 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave by instance id: %+v", resp.Members)
	}
	// The only member left: the group ends its rebalance empty.
	if got := describeGroup(h, "g").State; got != "Empty" {
		t.Errorf("after the static member left: %s, want Empty", got)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version, d.Groups = 6, []string{"nope"}
	if g := h.send(d).one(t).(*kmsg.DescribeGroupsResponse).Groups[0]; g.State != "Dead" || g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe v6 of an unknown group: %s %d", g.State, g.ErrorCode)
	}
	h.c.Unload()
	if code := h.send(kmsg.NewPtrListGroupsRequest()).one(t).(*kmsg.ListGroupsResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("list at an unloaded coordinator: %d", code)
	}
}

// TestRepeatedIDSourceDoesNotCollide: a coordinator whose id source starts
// over (a node restarted with the same seed) must not hand out a member id
// the loaded group already holds.
func TestRepeatedIDSourceDoesNotCollide(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := stableGroup(t, h, "g", 1)
	c2, err := New(testConfig(), h.clock, &memStore{}, counterIDs()) // same ids again
	if err != nil {
		t.Fatal(err)
	}
	c2.BeginLoad()
	if err := c2.Load(h.store.records(t)); err != nil {
		t.Fatal(err)
	}
	c2.FinishLoad()
	h2 := &harness{t: t, clock: h.clock, store: &memStore{}, c: c2}
	r := joinResp(t, h2.join("g", joinOpts{}))
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == ids[0] {
		t.Errorf("new member got error %d id %s; the loaded member is %s", r.ErrorCode, r.MemberID, ids[0])
	}
}

func TestPendingMemberIDExpires(t *testing.T) {
	h := newHarness(t, testConfig())
	r := joinResp(t, h.join("g", joinOpts{sessionMs: 1000}))
	h.clock.advance(1000)
	if code := joinResp(t, h.join("g", joinOpts{memberID: r.MemberID})).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Errorf("join with an expired KIP-394 id: %d, want UNKNOWN_MEMBER_ID", code)
	}
	r = joinResp(t, h.join("g", joinOpts{sessionMs: 1000}))
	h.clock.advance(999)
	second := h.join("g", joinOpts{memberID: r.MemberID})
	h.clock.advance(0) // the initial rebalance delay is 0 here
	if got := joinResp(t, second); got.ErrorCode != 0 || got.MemberID != r.MemberID {
		t.Errorf("KIP-394 id used before its session timeout: error %d id %s", got.ErrorCode, got.MemberID)
	}
}

func TestCommitsKeepTheSessionAlive(t *testing.T) {
	h := newHarness(t, testConfig())
	a := stableGroup(t, h, "g", 1)[0]
	for i := 0; i < 5; i++ {
		h.clock.advance(6000)
		h.commit("g", a, 1, "t", 0, int64(i))
		h.store.commitAll()
	}
	if got := describeGroup(h, "g").State; got != "Stable" {
		t.Errorf("a member that only commits: group %s after 30 s, want Stable", got)
	}
	h.clock.advance(10000)
	if got := describeGroup(h, "g").State; got != "Empty" {
		t.Errorf("after a silent session: %s, want Empty", got)
	}
}
