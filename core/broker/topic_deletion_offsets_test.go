package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// simpleCommitReq commits offsets for a group without members (generation
// -1), offsets by "topic/partition".
func simpleCommitReq(groupID string, offsets map[string]int64, order []string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = groupID, -1
	for _, key := range order {
		var topic string
		var p int32
		if _, err := fmt.Sscanf(key, "%s %d", &topic, &p); err != nil {
			panic(err)
		}
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offsets[key]
		t.Partitions = append(t.Partitions, rp)
		req.Topics = append(req.Topics, t)
	}
	return req
}

// committedOffsets asks node coord for groupID's offsets of partition 0 of
// each topic, by topic; ok is false while the coordinator is not serving.
func (c *cluster) committedOffsets(coord int32, groupID string, topics ...string) (map[string]int64, bool) {
	c.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = groupID
	for _, topic := range topics {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, t)
	}
	r := c.request(coord, req).(*kmsg.OffsetFetchResponse)
	switch r.ErrorCode {
	case 0:
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		return nil, false
	default:
		c.t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	out := map[string]int64{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				c.t.Fatalf("OffsetFetch %s-%d: %v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[rt.Topic] = p.Offset
		}
	}
	return out, true
}

// TestDeletedTopicsOffsetsAreRemoved: a group commits offset 3 for
// events-0, events is deleted and created again with 5 records: the group
// has no offset for events-0 (it starts by its reset policy, not at 3, which
// would skip records 0-2), as Kafka removes a deleted topic's offsets, and
// keeps its offset of another topic. The coordinator hosts no replica of
// events, and the removal is in __consumer_offsets: the next coordinator
// loads it.
func TestDeletedTopicsOffsetsAreRemoved(t *testing.T) {
	c := groupCluster(t, 3)
	c.createTopic(1, "events", 1, 1)
	c.createTopic(1, "keep", 1, 3)
	c.waitCoordinator(1, "probe")
	eventsLeader := c.leaderOf("events", 0)
	groupID := ""
	for i := 0; groupID == ""; i++ {
		g := fmt.Sprint("group-", i)
		if coord := c.waitCoordinator(1, g); coord != 1 && coord != eventsLeader {
			groupID = g
		}
	}
	coord := c.waitCoordinator(1, groupID)
	c.waitServing(coord, groupID)

	commit := simpleCommitReq(groupID, map[string]int64{"events 0": 3, "keep 0": 9}, []string{"events 0", "keep 0"})
	for _, rt := range c.request(coord, commit).(*kmsg.OffsetCommitResponse).Topics {
		if code := rt.Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s: %v", rt.Topic, kerr.ErrorForCode(code))
		}
	}
	if got, _ := c.committedOffsets(coord, groupID, "events", "keep"); got["events"] != 3 || got["keep"] != 9 {
		t.Fatalf("committed offsets %v, want events 3, keep 9", got)
	}

	c.deleteTopic(1, "events")
	c.waitFor("events deleted everywhere", 10000, func() bool {
		for _, tn := range c.nodes {
			if _, ok := tn.node.meta.image.TopicByName("events"); ok {
				return false
			}
		}
		return true
	})
	c.createTopic(1, "events", 1, 1)
	if r := c.produce(c.leaderOf("events", 0), "events", 0, -1, recordBatch("a", "b", "c", "d", "e")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce to the new events: error %v, base offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}

	var got map[string]int64
	c.waitFor("the deleted topic's offset gone", 10000, func() bool {
		got, _ = c.committedOffsets(coord, groupID, "events", "keep")
		return got["events"] == -1
	})
	if got["keep"] != 9 {
		t.Fatalf("offset of keep-0 after deleting events: %d, want 9", got["keep"])
	}

	// The next coordinator loads the tombstone from __consumer_offsets.
	c.nodes[coord].proc.Crash()
	var successor int32
	c.waitFor("another coordinator", 30000, func() bool {
		fc := c.findCoordinator(1, groupID)
		successor = fc.NodeID
		return fc.ErrorCode == 0 && successor != coord
	})
	c.waitFor("the new coordinator serving", 30000, func() bool {
		var ok bool
		got, ok = c.committedOffsets(successor, groupID, "events", "keep")
		return ok
	})
	if got["events"] != -1 || got["keep"] != 9 {
		t.Fatalf("after failover, offsets %v, want events -1, keep 9", got)
	}
}

// TestSnapshotReportsDeletedTopics: a snapshot replacing the image deletes
// the topics it no longer has, and a topic re-created under its name (new
// id), in name order.
func TestSnapshotReportsDeletedTopics(t *testing.T) {
	image := func(topics map[string]byte) *metadata.Image {
		im := metadata.NewImage()
		offset := int64(0)
		for _, name := range slices.Sorted(maps.Keys(topics)) {
			if err := im.Apply(offset, &metadata.TopicRecord{Name: name, ID: metadata.TopicID{topics[name]}}); err != nil {
				t.Fatal(err)
			}
			offset++
		}
		return im
	}
	before := image(map[string]byte{"a": 1, "b": 2, "c": 3, "d": 4})
	after := image(map[string]byte{"b": 2, "c": 5, "e": 6})
	if got, want := topicsDeletedBetween(before, after), []string{"a", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("deleted %q, want %q", got, want)
	}
}
