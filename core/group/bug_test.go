package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// doubleAssignScenario plays the failover that group-double-assign turns
// into a double assignment, and returns what the assignment checker says:
//
//  1. A, B, C form generation 1 (committed).
//  2. C leaves; A and B rejoin: generation 2. A, the leader, syncs an
//     assignment for {A, B}; B syncs. The group record is appended but not
//     yet replicated.
//  3. The coordinator fails over and the unreplicated record is lost: the
//     new coordinator loads generation 1 {A, B, C}.
//  4. A and B learn (ILLEGAL_GENERATION) and rejoin; C is gone, so after
//     the rebalance timeout generation 2 forms again, now {A, B} with A
//     leading, but dealt in a different order by the new leader's view.
//
// Correct: the first generation 2 never handed out an assignment (the
// SyncGroups were parked until the record committed, and the failover
// answered them NOT_COORDINATOR). With the bug, generation 2 has two
// assignments.
func doubleAssignScenario(t *testing.T, bugs Bugs) error {
	cfg := testConfig()
	cfg.Bugs = bugs
	h := newHarness(t, cfg)
	check := newAssignmentChecker()
	ids := stableGroup(t, h, "g", 3)
	a, b, c := ids[0], ids[1], ids[2]

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", c
	h.send(leave)
	joinB := h.join("g", joinOpts{memberID: b})
	joinA := h.join("g", joinOpts{memberID: a})
	ra, rb := joinResp(t, joinA), joinResp(t, joinB)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a {
		t.Fatalf("second generation: %d/%d leader %s", ra.Generation, rb.Generation, ra.LeaderID)
	}
	first := map[string]string{a: encodeAssignment([]int32{0, 1, 2}), b: encodeAssignment([]int32{3, 4, 5})}
	syncB := h.sync("g", b, 2, nil)
	syncA := h.sync("g", a, 2, first)
	for id, p := range map[string]*pendingReply{a: syncA, b: syncB} {
		if p.answered() {
			if r := syncResp(t, p); r.ErrorCode == 0 {
				if err := check.assigned(id, 2, decodeAssignment(r.MemberAssignment)); err != nil {
					return err
				}
			}
		}
	}

	// Failover: the pending group record is lost.
	h.c.Unload()
	h.store.log = h.store.log[:len(h.store.log)-len(h.store.pending)]
	h.store.pending = nil
	c2, err := New(cfg, h.clock, h.store, counterIDs())
	if err != nil {
		t.Fatal(err)
	}
	c2.BeginLoad()
	if err := c2.Load(h.store.records(t)); err != nil {
		t.Fatal(err)
	}
	c2.FinishLoad()
	h.c = c2
	if code := h.heartbeat("g", a, 2); code != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat with the lost generation: %d, want ILLEGAL_GENERATION", code)
	}
	joinA = h.join("g", joinOpts{memberID: a})
	joinB = h.join("g", joinOpts{memberID: b})
	h.clock.advance(5000) // C never rejoins: removed at the rebalance timeout
	ra, _ = joinResp(t, joinA), joinResp(t, joinB)
	if ra.Generation != 2 || len(ra.Members) != 2 {
		t.Fatalf("generation after failover: %d with %d members, want 2 with 2", ra.Generation, len(ra.Members))
	}
	second := map[string]string{a: encodeAssignment([]int32{3, 4, 5}), b: encodeAssignment([]int32{0, 1, 2})}
	syncB = h.sync("g", b, 2, nil)
	syncA = h.sync("g", a, 2, second)
	h.store.commitAll()
	for _, s := range []struct {
		id string
		p  *pendingReply
	}{{a, syncA}, {b, syncB}} {
		r := syncResp(t, s.p)
		if r.ErrorCode != 0 {
			t.Fatalf("sync after failover: %d", r.ErrorCode)
		}
		if err := check.assigned(s.id, 2, decodeAssignment(r.MemberAssignment)); err != nil {
			return err
		}
	}
	return nil
}

func TestDoubleAssignScenarioIsSafeWithoutTheBug(t *testing.T) {
	if err := doubleAssignScenario(t, Bugs{}); err != nil {
		t.Fatalf("correct coordinator: %v", err)
	}
}

func TestPlantedDoubleAssignIsCaughtInScenario(t *testing.T) {
	if err := doubleAssignScenario(t, Bugs{GroupDoubleAssign: true}); err == nil {
		t.Fatal("group-double-assign planted, but no partition was assigned twice in one generation")
	}
}
