package group

// OffsetFetch (key 9), versions 0..9.
//
// Answers the committed offsets: only those whose records the Store has
// reported committed. An offset never committed is -1 with no error. v2+
// may ask for every partition (null topics); v8+ asks for several groups.
// Group-level errors go in each partition (v0-1), the top-level error code
// (v2-7) or the group's error code (v8+).
//
// Skipped: RequireStable (v7+) has nothing to wait for without
// transactions; v9's member id and epoch belong to KIP-848 groups; v10
// names topics by id.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetFetchGroupsVersion is the first version with a list of groups.
const offsetFetchGroupsVersion = 8

// offsetFetchTopLevelErrorVersion is the first with a top-level error.
const offsetFetchTopLevelErrorVersion = 2

// fetchedPartition is one partition's answer.
type fetchedPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
}

// fetchedTopic is one topic's answers.
type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

func (c *Coordinator) handleOffsetFetch(r *kmsg.OffsetFetchRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= offsetFetchGroupsVersion {
		for _, rg := range r.Groups {
			topics := make(map[string][]int32, len(rg.Topics))
			var order []string
			for _, t := range rg.Topics {
				if _, dup := topics[t.Topic]; !dup {
					order = append(order, t.Topic)
				}
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
			all := rg.Topics == nil
			fetched, code := c.fetchOffsets(rg.Group, order, topics, all)
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group, out.ErrorCode = rg.Group, code
			for _, ft := range fetched {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = ft.topic
				for _, fp := range ft.partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					metadata := fp.metadata
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = fp.partition, fp.offset, fp.leaderEpoch, &metadata
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
			resp.Groups = append(resp.Groups, out)
		}
		reply(resp)
		return
	}
	topics := make(map[string][]int32, len(r.Topics))
	var order []string
	for _, t := range r.Topics {
		if _, dup := topics[t.Topic]; !dup {
			order = append(order, t.Topic)
		}
		topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
	}
	all := r.Topics == nil && r.Version >= offsetFetchTopLevelErrorVersion
	fetched, code := c.fetchOffsets(r.Group, order, topics, all)
	if code != 0 && r.Version >= offsetFetchTopLevelErrorVersion {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	for _, ft := range fetched {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.topic
		for _, fp := range ft.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			metadata := fp.metadata
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = fp.partition, fp.offset, fp.leaderEpoch, &metadata, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	reply(resp)
}

// fetchOffsets answers one group: the requested partitions in request
// order (or, with all, every committed one, sorted), and a group-level
// error. With an error the requested partitions come back at -1.
func (c *Coordinator) fetchOffsets(groupID string, order []string, topics map[string][]int32, all bool) ([]fetchedTopic, int16) {
	code := c.availability(groupID)
	g := c.groups[groupID]
	if code != 0 || g == nil || g.state == Dead {
		g = nil
	}
	if all {
		if g == nil {
			return nil, code
		}
		var out []fetchedTopic
		for _, tp := range sortedOffsetKeys(g.offsets) {
			if len(out) == 0 || out[len(out)-1].topic != tp.topic {
				out = append(out, fetchedTopic{topic: tp.topic})
			}
			v := g.offsets[tp]
			last := &out[len(out)-1]
			last.partitions = append(last.partitions, fetchedPartition{tp.partition, v.offset, v.leaderEpoch, v.metadata})
		}
		return out, code
	}
	out := make([]fetchedTopic, 0, len(order))
	for _, topic := range order {
		ft := fetchedTopic{topic: topic}
		for _, p := range topics[topic] {
			fp := fetchedPartition{partition: p, offset: -1, leaderEpoch: -1}
			if g != nil {
				if v, ok := g.offsets[topicPartition{topic, p}]; ok {
					fp = fetchedPartition{p, v.offset, v.leaderEpoch, v.metadata}
				}
			}
			ft.partitions = append(ft.partitions, fp)
		}
		out = append(out, ft)
	}
	return out, code
}
