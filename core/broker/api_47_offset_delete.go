package broker

// OffsetDelete (key 47): served by the group coordinator of the group's
// __consumer_offsets partition (core/group, which lists the versions and
// what they skip); NOT_COORDINATOR when this broker does not lead it.
//
// As Kafka's KafkaApis does, the broker first answers each partition its
// metadata image does not have (an unknown topic, or a partition beyond the
// topic's count) with UNKNOWN_TOPIC_OR_PARTITION and hands the coordinator
// only the rest; an error of the whole answer (GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, NOT_COORDINATOR) replaces those.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/group"
)

func (gc *groupCoordinators) handleOffsetDelete(conn env.ConnID, hdr env.RequestHeader, req *kmsg.OffsetDeleteRequest) {
	known, unknown := gc.splitUnknownPartitions(req, gc.acls.current)
	if len(unknown) == 0 {
		gc.handleGroupRequest(conn, hdr, req, req.Group)
		return
	}
	gc.coordinatorFor(req.Group).Handle(known, group.Client{ClientID: hdr.ClientID}, func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetDeleteResponse)
		if r.ErrorCode == 0 {
			r.Topics = mergedOffsetDeleteTopics(r.Topics, unknown)
		}
		gc.net.Reply(conn, hdr.CorrelationID, r)
	})
}

// splitUnknownPartitions returns req with only the partitions the metadata
// image has (req itself when it has them all), and the answers, each
// UNKNOWN_TOPIC_OR_PARTITION, of those it does not, in request order.
func (gc *groupCoordinators) splitUnknownPartitions(req *kmsg.OffsetDeleteRequest, g grants) (*kmsg.OffsetDeleteRequest, []kmsg.OffsetDeleteResponseTopic) {
	var unknown []kmsg.OffsetDeleteResponseTopic
	known := *req
	known.Topics = nil
	for _, t := range req.Topics {
		kt := t
		kt.Partitions = nil
		var ut *kmsg.OffsetDeleteResponseTopic
		code := kerr.UnknownTopicOrPartition.Code
		readable := g.topic(acl.Read, t.Topic)
		if !readable {
			code = codeTopicAuthorization
		}
		for _, p := range t.Partitions {
			if _, ok := gc.meta.image.PartitionByName(t.Topic, p.Partition); ok && readable {
				kt.Partitions = append(kt.Partitions, p)
				continue
			}
			if ut == nil {
				unknown = append(unknown, kmsg.OffsetDeleteResponseTopic{Topic: t.Topic})
				ut = &unknown[len(unknown)-1]
			}
			ut.Partitions = append(ut.Partitions, kmsg.OffsetDeleteResponseTopicPartition{
				Partition: p.Partition, ErrorCode: code,
			})
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	if len(unknown) == 0 {
		return req, nil
	}
	return &known, unknown
}

// mergedOffsetDeleteTopics adds the unknown partitions' answers to the
// coordinator's: to the topic's entry if the coordinator answered the
// topic's other partitions, else as a topic of their own.
func mergedOffsetDeleteTopics(answered, unknown []kmsg.OffsetDeleteResponseTopic) []kmsg.OffsetDeleteResponseTopic {
	for _, u := range unknown {
		merged := false
		for i := range answered {
			if answered[i].Topic == u.Topic {
				answered[i].Partitions = append(answered[i].Partitions, u.Partitions...)
				merged = true
				break
			}
		}
		if !merged {
			answered = append(answered, u)
		}
	}
	return answered
}
