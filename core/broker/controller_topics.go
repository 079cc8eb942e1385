package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// createTopics creates the topics of a CreateTopics request in one metadata
// batch and answers once it is committed (or at once with ValidateOnly).
func (c *controller) createTopics(req *kmsg.CreateTopicsRequest, done func(*kmsg.CreateTopicsResponse)) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	var records []metadata.Record
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		recs, code, msg := c.topicRecords(t, seen[t.Topic] > 1)
		rt.ErrorCode = code
		if msg != "" {
			rt.ErrorMessage = &msg
		}
		if code == 0 {
			topic := recs[0].(*metadata.TopicRecord)
			rt.TopicID = topic.ID
			rt.NumPartitions = int32(len(recs) - 1)
			rt.ReplicationFactor = int16(len(recs[1].(*metadata.PartitionRecord).Replicas))
			if !req.ValidateOnly {
				records = append(records, recs...)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(records) == 0 {
		done(resp)
		return
	}
	if err := c.propose(records, func() { done(resp) }); err != nil {
		for i := range resp.Topics {
			if resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].ErrorCode = kerr.UnknownServerError.Code
			}
		}
		done(resp)
	}
}

// topicRecords validates one topic and returns its TopicRecord followed by
// its PartitionRecords, placed round-robin over the unfenced brokers with
// each topic starting one broker further along (leaders spread, as Kafka's
// StripedReplicaPlacer does without racks).
func (c *controller) topicRecords(t kmsg.CreateTopicsRequestTopic, duplicate bool) ([]metadata.Record, int16, string) {
	b := c.n.cfg.Broker
	if duplicate {
		return nil, kerr.InvalidRequest.Code, "topic named more than once in the request"
	}
	if err := metadata.ValidateTopicName(t.Topic); err != nil || t.Topic == metadataTopic {
		return nil, kerr.InvalidTopicException.Code, "invalid topic name"
	}
	if _, exists := c.image.TopicByName(t.Topic); exists {
		return nil, kerr.TopicAlreadyExists.Code, "topic already exists"
	}
	if len(t.ReplicaAssignment) > 0 {
		return nil, kerr.InvalidReplicaAssignment.Code, "manual replica assignment is not supported yet"
	}
	partitions, rf := t.NumPartitions, t.ReplicationFactor
	if partitions == -1 {
		partitions = b.NumPartitions
	}
	if rf == -1 {
		rf = b.DefaultReplicationFactor
	}
	if partitions <= 0 || partitions > 1<<16 {
		return nil, kerr.InvalidPartitions.Code, "numPartitions must be between 1 and 65536"
	}
	var live []int32
	for _, id := range c.image.BrokerIDs() {
		if c.usable(id) {
			live = append(live, id)
		}
	}
	if rf <= 0 || int(rf) > len(live) {
		return nil, kerr.InvalidReplicationFactor.Code, "replicationFactor must be between 1 and the number of unfenced brokers"
	}
	id := metadata.TopicID(c.n.newID())
	for _, exists := c.image.TopicByID(id); exists || id.IsZero(); _, exists = c.image.TopicByID(id) {
		id = metadata.TopicID(c.n.newID())
	}
	records := []metadata.Record{&metadata.TopicRecord{Name: t.Topic, ID: id}}
	start := c.placementCursor
	c.placementCursor++
	for p := range partitions {
		replicas := make([]int32, rf)
		for j := range replicas {
			replicas[j] = live[(start+int(p)+j)%len(live)]
		}
		isr := sortedCopy(replicas)
		records = append(records, &metadata.PartitionRecord{
			TopicID: id, PartitionID: p, Replicas: replicas, ISR: isr, Leader: replicas[0],
		})
	}
	return records, 0, ""
}

func sortedCopy(ids []int32) []int32 {
	out := append([]int32(nil), ids...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
