package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/metadata"
)

// TestMalformedRequestsGetOneAnswer sends admin and ISR requests with
// arbitrary field values: the controller never panics, answers each exactly
// once, and its images keep their invariants.
func TestMalformedRequestsGetOneAnswer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t, DefaultConfig(100))
		epochs := h.startBrokers(3)
		h.createTopic("a", 2, 3, nil)
		// Mostly registered brokers 0-2, sometimes repeated, unknown or
		// negative, so that both accepted and rejected paths run.
		ids := rapid.SliceOfN(rapid.OneOf(rapid.Int32Range(0, 2), rapid.Int32Range(-1, 3)), 1, 3)
		ic := &invariantChecker{leaders: map[epochKey]int32{}, epochs: map[metadata.TopicPartition][2]int32{}}
		for range rapid.IntRange(1, 20).Draw(t, "requests") {
			var req kmsg.Request
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0:
				r := kmsg.NewPtrCreateTopicsRequest()
				r.Version = int16(rapid.IntRange(0, 7).Draw(t, "version"))
				topic := kmsg.NewCreateTopicsRequestTopic()
				topic.Topic = rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "", ".", "__cluster_metadata"}).Draw(t, "name")
				topic.NumPartitions = rapid.Int32Range(-2, 3).Draw(t, "partitions")
				topic.ReplicationFactor = int16(rapid.IntRange(-2, 4).Draw(t, "rf"))
				for i := range rapid.IntRange(0, 3).Draw(t, "assignments") {
					p := int32(i)
					if rapid.IntRange(0, 4).Draw(t, "badPartition") == 0 {
						p = rapid.Int32Range(-1, 3).Draw(t, "p")
					}
					topic.ReplicaAssignment = append(topic.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{
						Partition: p, Replicas: ids.Draw(t, "replicas")})
				}
				if len(topic.ReplicaAssignment) > 0 && rapid.IntRange(0, 3).Draw(t, "sizesGiven") > 0 {
					topic.NumPartitions, topic.ReplicationFactor = -1, -1
				}
				r.Topics = []kmsg.CreateTopicsRequestTopic{topic}
				if rapid.IntRange(0, 5).Draw(t, "twice") == 0 {
					r.Topics = append(r.Topics, topic)
				}
				req = r
			case 1:
				r := kmsg.NewPtrCreatePartitionsRequest()
				topic := kmsg.CreatePartitionsRequestTopic{Topic: "a", Count: rapid.Int32Range(-1, 5).Draw(t, "count")}
				if rapid.Bool().Draw(t, "manual") {
					for range rapid.IntRange(0, 3).Draw(t, "assignments") {
						topic.Assignment = append(topic.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: ids.Draw(t, "replicas")})
					}
				}
				r.Topics = []kmsg.CreatePartitionsRequestTopic{topic}
				req = r
			case 2:
				r := kmsg.NewPtrAlterPartitionRequest()
				r.Version = int16(rapid.IntRange(0, 3).Draw(t, "version"))
				r.BrokerID = rapid.Int32Range(-1, 3).Draw(t, "broker")
				if r.BrokerID >= 0 && r.BrokerID < 3 {
					r.BrokerEpoch = epochs[r.BrokerID]
				}
				topic := kmsg.NewAlterPartitionRequestTopic()
				topic.Topic = "a"
				if tp, ok := h.c.Image().TopicByName("a"); ok && rapid.Bool().Draw(t, "rightID") {
					topic.TopicID = tp.ID
				}
				p := kmsg.NewAlterPartitionRequestTopicPartition()
				p.Partition = rapid.Int32Range(-1, 3).Draw(t, "p")
				p.LeaderEpoch = rapid.Int32Range(-1, 2).Draw(t, "leaderEpoch")
				p.PartitionEpoch = rapid.Int32Range(-1, 3).Draw(t, "partitionEpoch")
				p.NewISR = ids.Draw(t, "isr")
				for _, id := range p.NewISR {
					p.NewEpochISR = append(p.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: -1})
				}
				topic.Partitions = []kmsg.AlterPartitionRequestTopicPartition{p}
				r.Topics = []kmsg.AlterPartitionRequestTopic{topic}
				req = r
			default:
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.Version = int16(rapid.IntRange(0, 6).Draw(t, "version"))
				r.TopicNames = []string{"a", "zz"}
				name := "b"
				r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}, {TopicID: [16]byte{9}}}
				req = r
			}
			replies := h.sendAsync(req)
			h.settle()
			if len(*replies) != 1 {
				t.Fatalf("%T got %d answers, want 1", req, len(*replies))
			}
			ic.check(t, h, true)
		}
	})
}
