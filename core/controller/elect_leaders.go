package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/core/replica"
)

// ElectLeaders election types (KIP-460). v0 requests carry no type and
// mean preferred.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// handleElectLeaders runs the leader elections an operator asked for
// (kafka-leader-election.sh, kadm's ElectLeaders), as Kafka's
// ReplicationControlManager.electLeaders: every partition's election is
// decided from the latest image, the changes go in one batch, and the
// answer waits for their commit.
//
//   - PREFERRED moves leadership to the first replica of the assignment if
//     it is in the ISR and may lead (registered, unfenced, not shutting
//     down); ELECTION_NOT_NEEDED if it already leads,
//     PREFERRED_LEADER_NOT_AVAILABLE otherwise.
//   - UNCLEAN elects a leader for a partition without one, by
//     replica.Elect's rule with unclean election allowed whatever the
//     topic's unclean.leader.election.enable says (the ISR, the ELR and the
//     last known ELR first, then any live replica: records may be lost);
//     ELECTION_NOT_NEEDED if the partition has a leader,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE if no replica may lead.
//
// A null topic list means every partition, and then, as in Kafka, the
// partitions answered ELECTION_NOT_NEEDED are left out of the response.
// An unknown topic or partition gets UNKNOWN_TOPIC_OR_PARTITION; an
// unknown election type INVALID_REQUEST for the whole request.
//
// Kafka's PREFERRED election on a leaderless partition whose preferred
// replica cannot lead elects another ISR member; Strand's controller never
// leaves a partition leaderless while an ISR member may lead, so answering
// PREFERRED_LEADER_NOT_AVAILABLE there loses nothing.
func (c *Controller) handleElectLeaders(req *kmsg.ElectLeadersRequest, reply func(kmsg.Response)) {
	if !c.Active() {
		reply(notControllerResponse(req))
		return
	}
	electionType := req.ElectionType
	if req.Version < 1 {
		electionType = electionPreferred
	}
	if electionType != electionPreferred && electionType != electionUnclean {
		reply(electLeadersErrorResponse(req, kerr.InvalidRequest.Code,
			fmt.Sprintf("election type %d: must be 0 (preferred) or 1 (unclean)", electionType)))
		return
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	t := c.begin()
	if req.Topics == nil {
		resp.Topics = c.electEveryLeader(t, electionType)
	} else {
		for _, rt := range req.Topics {
			out := kmsg.NewElectLeadersResponseTopic()
			out.Topic = rt.Topic
			for _, p := range rt.Partitions {
				out.Partitions = append(out.Partitions, c.electLeader(t, rt.Topic, p, electionType))
			}
			resp.Topics = append(resp.Topics, out)
		}
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// electEveryLeader runs the election on every partition, in topic and
// partition order, and returns the results other than ELECTION_NOT_NEEDED.
func (c *Controller) electEveryLeader(t *txn, electionType int8) []kmsg.ElectLeadersResponseTopic {
	var out []kmsg.ElectLeadersResponseTopic
	for _, p := range c.partitionsWhere(func(metadata.PartitionState) bool { return true }) {
		result := c.electLeader(t, p.tp.Topic, p.tp.Partition, electionType)
		if result.ErrorCode == kerr.ElectionNotNeeded.Code {
			continue
		}
		if n := len(out); n == 0 || out[n-1].Topic != p.tp.Topic {
			topic := kmsg.NewElectLeadersResponseTopic()
			topic.Topic = p.tp.Topic
			out = append(out, topic)
		}
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, result)
	}
	return out
}

// electLeader runs one partition's election, adding its change to t, and
// returns the partition's result.
func (c *Controller) electLeader(t *txn, topicName string, partition int32, electionType int8) kmsg.ElectLeadersResponseTopicPartition {
	out := kmsg.NewElectLeadersResponseTopicPartition()
	out.Partition = partition
	fail := func(code *kerr.Error, format string, args ...any) kmsg.ElectLeadersResponseTopicPartition {
		msg := fmt.Sprintf(format, args...)
		out.ErrorCode, out.ErrorMessage = code.Code, &msg
		return out
	}
	topic, ok := c.latest.TopicByName(topicName)
	if !ok {
		return fail(kerr.UnknownTopicOrPartition, "topic %q does not exist", topicName)
	}
	cur, ok := c.latest.Partition(topic.ID, partition)
	if !ok {
		return fail(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", topicName, partition)
	}
	tp := metadata.TopicPartition{Topic: topic.Name, TopicID: topic.ID, Partition: partition}
	if electionType == electionPreferred {
		preferred := cur.Replicas[0]
		switch {
		case cur.Leader == preferred:
			return fail(kerr.ElectionNotNeeded, "preferred replica %d already leads", preferred)
		case !slices.Contains(cur.ISR, preferred) || !c.acceptable(preferred):
			return fail(kerr.PreferredLeaderNotAvailable,
				"preferred replica %d is not in the ISR %v or may not lead (fenced, unregistered or shutting down)", preferred, cur.ISR)
		}
		now := toReplicaState(cur)
		next := now
		next.LeaderID, next.LeaderEpoch, next.PartitionEpoch = preferred, now.LeaderEpoch+1, now.PartitionEpoch+1
		t.add(c.changeRecord(tp, cur, next, replica.ElectionClean))
		return out
	}
	if cur.Leader != metadata.NoLeader {
		return fail(kerr.ElectionNotNeeded, "partition has leader %d", cur.Leader)
	}
	pol := c.policy(topic.Name)
	pol.UncleanEnabled = true
	next, kind := replica.Elect(toReplicaState(cur), pol, c.acceptable)
	if next.LeaderID == metadata.NoLeader {
		return fail(kerr.EligibleLeadersNotAvailable, "no replica of %v is registered, unfenced and not shutting down", cur.Replicas)
	}
	t.add(c.changeRecord(tp, cur, next, kind))
	return out
}

// electLeadersErrorResponse answers every partition named in req, and the
// request as a whole from v1, with code.
func electLeadersErrorResponse(req *kmsg.ElectLeadersRequest, code int16, message string) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		out := kmsg.NewElectLeadersResponseTopic()
		out.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if message != "" {
				rp.ErrorMessage = &message
			}
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}
