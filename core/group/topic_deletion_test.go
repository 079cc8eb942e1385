package group

import (
	"slices"
	"testing"
)

// TestTopicDeletionRemovesEveryGroupsOffsets: deleting topic t tombstones
// t's offsets of a simple group, a Stable group and an Empty group, leaves
// other topics' offsets alone, takes effect when the tombstones commit, and
// a reload of the log agrees. Every group stays, the simple group left
// with nothing too (the next expiry check deletes it, as in Kafka).
func TestTopicDeletionRemovesEveryGroupsOffsets(t *testing.T) {
	h := expiryHarness(t)
	h.commitCommitted("s", "", -1, "t", 0, 3)
	h.commitCommitted("s", "", -1, "t", 1, 4)
	h.commitCommitted("k", "", -1, "t", 0, 8)
	h.commitCommitted("k", "", -1, "u", 0, 5)
	stable := oneMemberGroup(t, h, "c", consumerMetadata("t"))
	h.commitCommitted("c", stable, 1, "t", 0, 7)
	empty := oneMemberGroup(t, h, "e", consumerMetadata("t"))
	h.commitCommitted("e", empty, 1, "t", 2, 9)
	h.leave("e", empty)

	before := len(h.store.log)
	h.c.OnTopicDeleted("t")
	var tombstones []string
	for i := before; i < len(h.store.log); i++ {
		tombstones = append(tombstones, h.tombstonesOfBatch(i)...)
	}
	want := []string{"offset c/t/0", "offset e/t/2", "offset k/t/0", "offset s/t/0", "offset s/t/1"}
	if !slices.Equal(tombstones, want) {
		t.Fatalf("tombstones %q, want %q", tombstones, want)
	}
	if got := h.fetch("s", "t", 0); got != 3 {
		t.Fatalf("before the tombstones commit: offset %d, want 3", got)
	}
	h.store.commitAll()

	for _, x := range []*harness{h, h.reloaded(t)} {
		for _, c := range []struct {
			group     string
			topic     string
			partition int32
			want      int64
		}{{"s", "t", 0, -1}, {"s", "t", 1, -1}, {"k", "t", 0, -1}, {"k", "u", 0, 5}, {"c", "t", 0, -1}, {"e", "t", 2, -1}} {
			if got := x.fetch(c.group, c.topic, c.partition); got != c.want {
				t.Errorf("%s %s/%d: offset %d, want %d", c.group, c.topic, c.partition, got, c.want)
			}
		}
		if got, want := x.listed(), []string{"c", "e", "k", "s"}; !sameSet(got, want) {
			t.Errorf("groups %q, want %q", got, want)
		}
	}
}

// TestTopicDeletionWithACommitInFlight: a commit of the deleted topic
// still in flight when the deletion arrives is in the log before the
// tombstone, so no offset survives, whichever append completes first.
func TestTopicDeletionWithACommitInFlight(t *testing.T) {
	for _, tombstoneFirst := range []bool{false, true} {
		h := expiryHarness(t)
		h.commitCommitted("s", "", -1, "t", 0, 3)
		inFlight := h.commit("s", "", -1, "t", 0, 6)
		h.c.OnTopicDeleted("t")
		if len(h.store.pending) != 2 {
			t.Fatalf("%d appends pending, want the commit and the tombstone", len(h.store.pending))
		}
		if tombstoneFirst {
			slices.Reverse(h.store.pending)
		}
		h.store.commitAll()
		if code := commitCode(t, inFlight); code != 0 {
			t.Fatalf("in-flight commit: error %d", code)
		}
		if got := h.fetch("s", "t", 0); got != -1 {
			t.Errorf("tombstone first %v: offset %d, want -1", tombstoneFirst, got)
		}
		if got := h.reloaded(t).fetch("s", "t", 0); got != -1 {
			t.Errorf("tombstone first %v: reloaded offset %d, want -1", tombstoneFirst, got)
		}
	}
}

// TestTopicRecreatedAfterDeletionStartsFresh: after the deletion commits,
// commits of the re-created topic are kept as usual.
func TestTopicRecreatedAfterDeletionStartsFresh(t *testing.T) {
	h := expiryHarness(t)
	h.commitCommitted("s", "", -1, "t", 0, 3)
	h.c.OnTopicDeleted("t")
	h.store.commitAll()
	if got := h.fetch("s", "t", 0); got != -1 {
		t.Fatalf("after deletion: offset %d, want -1", got)
	}
	h.commitCommitted("s", "", -1, "t", 0, 1)
	if got := h.reloaded(t).fetch("s", "t", 0); got != 1 {
		t.Fatalf("re-created topic's commit after reload: offset %d, want 1", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
