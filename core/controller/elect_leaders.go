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
//   - PREFERRED, as Kafka's PartitionChangeBuilder.electPreferredLeader:
//     ELECTION_NOT_NEEDED if the first replica of the assignment leads;
//     otherwise it becomes leader if it is valid (in the ISR, or in the
//     ELR when the ISR is empty, and registered, unfenced, not shutting
//     down); otherwise a valid current leader stays and the answer is
//     PREFERRED_LEADER_NOT_AVAILABLE; otherwise (no valid leader) the
//     partition gets the leader a clean election gives it, another valid
//     replica, PREFERRED_LEADER_NOT_AVAILABLE if there is none.
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
// TimeoutMillis is Kafka's deadline for the controller to start on the
// request (QuorumController queues it with that deadline; an event still
// queued at its deadline fails with REQUEST_TIMED_OUT, and once it runs
// the answer waits for the commit whatever the deadline). This controller
// starts on a request as it arrives, so only a TimeoutMillis of 0 or less
// is past due: REQUEST_TIMED_OUT, top-level and per partition, nothing
// elected. An empty (not null) topic list is answered empty at once, as
// Kafka's QuorumController.electLeaders does before queueing.
func (c *Controller) handleElectLeaders(req *kmsg.ElectLeadersRequest, reply func(kmsg.Response)) {
	if req.Topics != nil && len(req.Topics) == 0 {
		reply(req.ResponseKind())
		return
	}
	if req.TimeoutMillis <= 0 {
		reply(electLeadersErrorResponse(req, kerr.RequestTimedOut.Code,
			fmt.Sprintf("TimeoutMillis %d: the deadline passed before the controller started on the request", req.TimeoutMillis)))
		return
	}
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
		if cur.Leader == preferred {
			return fail(kerr.ElectionNotNeeded, "preferred replica %d already leads", preferred)
		}
		next, kind := c.preferredElection(topic.Name, toReplicaState(cur))
		if next.LeaderID == cur.Leader {
			return fail(kerr.PreferredLeaderNotAvailable,
				"preferred replica %d is not in the ISR %v or may not lead (fenced, unregistered or shutting down)", preferred, cur.ISR)
		}
		t.add(c.changeRecord(tp, cur, next, kind))
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

// preferredElection is the state after Kafka's preferred election
// (PartitionChangeBuilder.electPreferredLeader) of cur, whose preferred
// replica does not lead: the preferred replica if it is valid (in the ISR,
// or in the ELR when the ISR is empty, and acceptable); else cur unchanged
// if its leader is valid; else the clean election replica.Elect makes with
// the topic's policy and no unclean election, which takes the first valid
// replica in assignment order (not the preferred one, invalid), as Kafka
// does. A partition with a leader has it in the ISR, so the ELR matters
// only to a leaderless one, where replica.Elect's first valid replica is
// the preferred one whenever it is valid.
func (c *Controller) preferredElection(topicName string, cur replica.PartitionState) (replica.PartitionState, replica.ElectionKind) {
	valid := func(id int32) bool {
		inISR := slices.Contains(cur.ISR, id)
		return (inISR || (len(cur.ISR) == 0 && slices.Contains(cur.ELR, id))) && c.acceptable(id)
	}
	if cur.LeaderID != metadata.NoLeader && valid(cur.LeaderID) {
		preferred := cur.Replicas[0]
		if !valid(preferred) {
			return cur, replica.ElectionKept
		}
		next := cur
		next.LeaderID, next.LeaderEpoch, next.PartitionEpoch = preferred, cur.LeaderEpoch+1, cur.PartitionEpoch+1
		return next, replica.ElectionClean
	}
	pol := c.policy(topicName)
	pol.UncleanEnabled = false
	return replica.Elect(cur, pol, c.acceptable)
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
