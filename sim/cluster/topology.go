package cluster

import (
	"fmt"

	"strand/core/metadata"
	"strand/sim/sched"
	"strand/sim/workload"
)

// Topology draws, per seed, the cluster's size and each topic's
// replication: the shape "topology" runs 1, 3 or 5 brokers, and gives each
// topic a replication factor of 1, 2, 3 or 5 (at most the brokers) and a
// min.insync.replicas from 1 to that factor, so that the fault budget,
// kept per partition, differs between the topics of one run.
type Topology struct {
	// BrokersChoices are the cluster sizes drawn from, evenly.
	BrokersChoices []int
	// ReplicationFactorChoices are the replication factors drawn from,
	// evenly among those at most the brokers.
	ReplicationFactorChoices []int16
	// Membership draws brokers joining and leaving (drawMembership).
	Membership bool
}

// topologyStream is the stream the topology is drawn from, so that the
// draw reshuffles none of the run's other streams.
const topologyStream = "topology"

// drawTopology returns shape with its Brokers and its topics' replication
// drawn from the seed, when the shape asks for it; otherwise shape. The
// brokers' default min.insync.replicas (the offsets topic's, and any topic
// without its own) is the smallest of 2 and the brokers.
func drawTopology(shape Shape, seed uint64) Shape {
	t := shape.Topology
	if t == nil {
		return shape
	}
	r := sched.NewStreams(seed).Get(topologyStream)
	shape.Brokers = t.BrokersChoices[r.IntN(len(t.BrokersChoices))]
	var factors []int16
	for _, rf := range t.ReplicationFactorChoices {
		if int(rf) <= shape.Brokers {
			factors = append(factors, rf)
		}
	}
	shape.TopicReplication = nil
	for i := 0; i < shape.Topics; i++ {
		rf := factors[r.IntN(len(factors))]
		shape.TopicReplication = append(shape.TopicReplication,
			workload.TopicReplication{ReplicationFactor: rf, MinInsyncReplicas: 1 + r.IntN(int(rf))})
	}
	shape.ReplicationFactor = shape.TopicReplication[0].ReplicationFactor
	shape.MinInsyncReplicas = min(2, shape.Brokers)
	if t.Membership {
		shape.Membership = drawMembership(shape, seed)
	}
	return shape
}

// topicName is the name of the shape's i-th topic.
func topicName(i int) string { return fmt.Sprintf("t%d", i) }

// topicReplication is the replication the workload asks for, per topic
// with its own.
func (s Shape) topicReplication() map[string]workload.TopicReplication {
	if len(s.TopicReplication) == 0 {
		return nil
	}
	byTopic := map[string]workload.TopicReplication{}
	for i, tr := range s.TopicReplication {
		byTopic[topicName(i)] = tr
	}
	return byTopic
}

// minInsync is topic's min.insync.replicas: its own, or the brokers'.
func (s Shape) minInsync(topic string) int {
	for i, tr := range s.TopicReplication {
		if topicName(i) == topic && tr.MinInsyncReplicas > 0 {
			return tr.MinInsyncReplicas
		}
	}
	return s.MinInsyncReplicas
}

// checkReplication returns what differs between the replication the shape
// asked for and what the metadata image holds: each topic with its own
// must have that many replicas of every partition and that
// min.insync.replicas; "" when nothing differs.
func (s Shape) checkReplication(im *metadata.Image) string {
	for i, tr := range s.TopicReplication {
		name := topicName(i)
		for p := int32(0); p < s.Partitions; p++ {
			st, ok := im.PartitionByName(name, p)
			if !ok || len(st.Replicas) != int(tr.ReplicationFactor) {
				return fmt.Sprintf("%s-%d has replicas %v, want %d", name, p, st.Replicas, tr.ReplicationFactor)
			}
		}
		got, _ := im.Config(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: name}, "min.insync.replicas")
		if want := fmt.Sprint(tr.MinInsyncReplicas); got != want {
			return fmt.Sprintf("%s has min.insync.replicas %q, want %s", name, got, want)
		}
	}
	return ""
}
