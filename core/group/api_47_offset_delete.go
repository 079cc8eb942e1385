package group

// OffsetDelete (key 47), version 0.
//
// Deletes committed offsets of a group with no members by writing
// tombstones, answering once they are committed. A group left without
// offsets stays, Empty, until the next expiry check deletes it (expiry.go),
// as Kafka's OffsetMetadataManager.deleteOffsets leaves it to
// cleanupGroupMetadata. Skipped: Kafka lets a
// non-empty "consumer" group delete offsets of topics it is not subscribed
// to (GROUP_SUBSCRIBED_TO_TOPIC otherwise), which means parsing the
// consumer protocol's subscription; Strand answers NON_EMPTY_GROUP for any
// group with members.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

func (c *Coordinator) handleOffsetDelete(r *kmsg.OffsetDeleteRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if code := c.availability(r.Group); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	g := c.groups[r.Group]
	switch {
	case g == nil || g.state == Dead:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		reply(resp)
		return
	case g.state != Empty:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		reply(resp)
		return
	}
	var records []batch.Record
	var keys []topicPartition
	for _, t := range r.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition})
			tp := topicPartition{topic: t.Topic, partition: p.Partition}
			_, committed := g.offsets[tp]
			if committed || g.offsetsInFlight[tp] > 0 {
				records = append(records, batch.Record{Key: offsetKeyBytes(g.id, tp)})
				keys = append(keys, tp)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(records) == 0 {
		reply(resp)
		return
	}
	for _, k := range keys {
		g.offsetsInFlight[k]++
	}
	seq := c.appendSeq + 1 // the number append gives this write
	c.append(records, func(err error) {
		c.finishOffsetWrite(g, keys, seq, err, func(tp topicPartition, _ int) {
			delete(g.offsets, tp)
		})
		if err != nil {
			resp.ErrorCode = appendErrorCode(err, true)
			resp.Topics = nil
		}
		reply(resp)
	}, func() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		resp.Topics = nil
		reply(resp)
	})
}
