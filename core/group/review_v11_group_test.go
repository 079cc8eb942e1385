package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

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
