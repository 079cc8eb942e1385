package group

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetDelete deletes groupID's offset of topic/partition and completes
// the append, returning the answer's error code.
func (h *harness) offsetDelete(groupID, topic string, partition int32) int16 {
	h.t.Helper()
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = groupID
	r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: partition}}}}
	reply := h.send(r)
	h.store.commitAll()
	return reply.one(h.t).(*kmsg.OffsetDeleteResponse).ErrorCode
}

// TestSimpleGroupOutlivesItsLastOffsetDelete: as in Kafka's group
// coordinator (OffsetMetadataManager.deleteOffsets writes only offset
// tombstones; the periodic cleanupGroupMetadata deletes an Empty group
// left without offsets), a simple group whose last offset OffsetDelete
// removes stays listed, Empty, in memory and after a reload, and answers a
// second OffsetDelete without GROUP_ID_NOT_FOUND; the next expiry check
// writes its GroupMetadata tombstone, after which it is gone, reload
// included.
func TestSimpleGroupOutlivesItsLastOffsetDelete(t *testing.T) {
	h := expiryHarness(t)
	h.commitCommitted("s", "", -1, "t", 0, 5)
	if code := h.offsetDelete("s", "t", 0); code != 0 {
		t.Fatalf("OffsetDelete: error %d", code)
	}
	for name, x := range map[string]*harness{"running": h, "reloaded": h.reloaded(t)} { // order-independent: each checked alone
		if got := x.fetch("s", "t", 0); got != -1 {
			t.Errorf("%s: offset after OffsetDelete %d, want -1", name, got)
		}
		if got := x.listed(); !slices.Equal(got, []string{"s"}) {
			t.Errorf("%s: groups after OffsetDelete %q, want [s]", name, got)
		}
		if got := describeGroup(x, "s").State; got != "Empty" {
			t.Errorf("%s: state after OffsetDelete %s, want Empty", name, got)
		}
	}
	if code := h.offsetDelete("s", "t", 0); code != 0 {
		t.Fatalf("second OffsetDelete: error %d, want none", code)
	}

	if n := h.expireAndCount(); n != 1 {
		t.Fatalf("expiry check: %d appends, want 1", n)
	}
	if got, want := h.tombstonesOfBatch(len(h.store.log)-1), []string{"group s"}; !slices.Equal(got, want) {
		t.Fatalf("expiry batch %v, want %v", got, want)
	}
	if got := h.listed(); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("groups while the tombstone is in flight %q, want [s]", got)
	}
	h.store.commitAll()
	if got := h.listed(); len(got) != 0 {
		t.Fatalf("groups after the expiry check: %q", got)
	}
	if got := h.reloaded(t).listed(); len(got) != 0 {
		t.Fatalf("groups after the expiry check and a reload: %q", got)
	}
}

// TestFailedFirstCommitLeavesNoGroup: a simple commit that creates its
// group and fails leaves nothing of the group (the log holds none of it),
// while a failed commit to a simple group the log already holds leaves
// the group in place.
func TestFailedFirstCommitLeavesNoGroup(t *testing.T) {
	h := expiryHarness(t)
	p := h.commit("new", "", -1, "t", 0, 1)
	h.store.failAll(errors.New("replication failed"))
	if code := commitCode(t, p); code == 0 {
		t.Fatal("commit succeeded on a failed append")
	}
	if got := h.listed(); len(got) != 0 {
		t.Fatalf("groups after a failed first commit: %q", got)
	}

	h.commitCommitted("s", "", -1, "t", 0, 5)
	if code := h.offsetDelete("s", "t", 0); code != 0 {
		t.Fatalf("OffsetDelete: error %d", code)
	}
	p = h.commit("s", "", -1, "t", 0, 6)
	h.store.failAll(errors.New("replication failed"))
	if code := commitCode(t, p); code == 0 {
		t.Fatal("commit succeeded on a failed append")
	}
	if got := h.listed(); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("groups after a failed commit to a kept group %q, want [s]", got)
	}
}
