package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSecondTombstoneDoesNotResetAReformedGroup is a minimal case of
// TestPropertyExpiryKeepsMemoryEqualToTheLog: two expiry passes append two
// GroupMetadata tombstones for the same Empty group while the first is in
// flight; a simple commit keeps the group alive through the first, whose
// completion resets it to generation 0; the group is then re-formed and
// emptied, reaching generation 2 again, and its records follow the
// tombstones in the log. The second tombstone completing then finds
// "Empty, generation 2" and must not take it for "nothing written since",
// which would forget the protocol type a reload keeps.
func TestSecondTombstoneDoesNotResetAReformedGroup(t *testing.T) {
	h := expiryHarness(t)
	metadata := consumerMetadata("t")
	formAndEmpty := func() {
		first := h.join("a", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{proto("range", metadata)}, sessionMs: 1_000_000}).one(t).(*kmsg.JoinGroupResponse)
		join := h.join("a", joinOpts{memberID: first.MemberID, protocols: []kmsg.JoinGroupRequestProtocol{proto("range", metadata)}, sessionMs: 1_000_000})
		h.clock.advance(0)
		r := joinResp(t, join)
		if r.ErrorCode != 0 {
			t.Fatalf("join: error %d", r.ErrorCode)
		}
		h.sync("a", r.MemberID, r.Generation, map[string]string{r.MemberID: "a"})
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group, leave.MemberID = "a", r.MemberID
		h.send(leave)
	}
	completeAppends := func(n int) {
		for ; n > 0; n-- {
			done := h.store.pending[0]
			h.store.pending = h.store.pending[1:]
			done(nil)
		}
	}
	formAndEmpty() // generation 1, then 2 (Empty), both appends in flight
	h.c.ExpireOffsets()
	h.c.ExpireOffsets()
	h.commit("a", "", -1, "t", 0, 0) // keeps the group alive as a simple group
	completeAppends(3)               // generations 1 and 2, the first tombstone
	formAndEmpty()                   // generation 1, then 2 again
	h.store.commitAll()

	running, loaded := describeGroup(h, "a"), describeGroup(h.reloaded(t), "a")
	if running.State != loaded.State || running.ProtocolType != loaded.ProtocolType {
		t.Fatalf("running %s %q, loaded from the log %s %q", running.State, running.ProtocolType, loaded.State, loaded.ProtocolType)
	}
	if running.ProtocolType != consumerProtocolType {
		t.Fatalf("protocol type %q after the group re-formed, want %q", running.ProtocolType, consumerProtocolType)
	}
}
