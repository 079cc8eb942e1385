package models

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AdminKind names an admin operation on a topic.
type AdminKind string

// The admin operations of the topic churn.
const (
	AdminCreateTopic      AdminKind = "CreateTopics"
	AdminDeleteTopic      AdminKind = "DeleteTopics"
	AdminCreatePartitions AdminKind = "CreatePartitions"
)

// AdminOp is one admin request on one topic, as the admin client saw it.
type AdminOp struct {
	Client int
	Kind   AdminKind
	Topic  string
	// Partitions is the partition count asked for (CreateTopics,
	// CreatePartitions).
	Partitions int32
	// CallNs and ReturnNs as for Produce; ReturnNs is NeverReturnedNs if
	// the request timed out.
	CallNs, ReturnNs int64
	ErrorCode        int16
	// Error is a connection error, if the request got no answer.
	Error string
	// TopicID is the id a successful CreateTopics answered.
	TopicID [16]byte
}

// CheckTopicChurn checks one admin client's sequential operations on
// topics that are deleted and re-created:
//   - every successful creation of a topic gets a topic id never used
//     before, for any topic: a re-created topic is a new topic;
//   - the answers agree with what the client knows: while the topic is
//     known to exist (a creation succeeded or answered
//     TOPIC_ALREADY_EXISTS, no deletion since), a creation must not
//     succeed and a deletion must not answer UNKNOWN_TOPIC_OR_PARTITION;
//     while it is known to be deleted, a creation must not answer
//     TOPIC_ALREADY_EXISTS and a deletion must not succeed. A request
//     without a definite answer (timed out, a connection error, any other
//     error code) makes the topic's state unknown until the next definite
//     answer, since it may still take effect; and it stays pending after
//     that answer, since a forwarded request can reach the controller late
//     (the broker answered REQUEST_TIMED_OUT, the forward was still in the
//     network), as in Kafka. A definite answer that contradicts the known
//     state is accepted only if a pending request of the right kind (a
//     deletion for a topic known to exist, a creation for one known to be
//     deleted) explains it, and that request is then used up: each takes
//     effect at most once.
//
// ops must be in call order, one at a time (the churn loop waits for each
// answer).
func CheckTopicChurn(ops []AdminOp) []Violation {
	type state int8
	const (
		unknown state = iota
		exists
		deleted
	)
	states := map[string]state{}
	// pending counts, per topic and kind, the requests without a definite
	// answer that have not yet been seen to take effect.
	type pendingKey struct {
		topic string
		kind  AdminKind
	}
	pending := map[pendingKey]int{}
	// lateEffect reports whether a pending request of kind on op's topic
	// explains an answer contradicting the known state, using it up.
	lateEffect := func(op AdminOp, kind AdminKind) bool {
		k := pendingKey{op.Topic, kind}
		if pending[k] == 0 {
			return false
		}
		pending[k]--
		return true
	}
	ids := map[[16]byte]AdminOp{}
	var out []Violation
	bad := func(op AdminOp, format string, args ...any) {
		out = append(out, Violation{Check: "topic-churn", TP: TopicPartition{Topic: op.Topic, Partition: -1},
			Detail: fmt.Sprintf("%s at t=%dns: ", op.Kind, op.CallNs) + fmt.Sprintf(format, args...)})
	}
	for _, op := range ops {
		st := states[op.Topic]
		definite := op.ReturnNs != NeverReturnedNs && op.Error == ""
		switch {
		case !definite:
			states[op.Topic] = unknown
			pending[pendingKey{op.Topic, op.Kind}]++
		case op.Kind == AdminCreateTopic && op.ErrorCode == 0:
			if st == exists && !lateEffect(op, AdminDeleteTopic) {
				bad(op, "succeeded while the topic existed")
			}
			if prev, used := ids[op.TopicID]; used {
				bad(op, "topic id %x was already given to %s at t=%dns", op.TopicID, prev.Topic, prev.CallNs)
			}
			ids[op.TopicID] = op
			states[op.Topic] = exists
		case op.Kind == AdminCreateTopic && op.ErrorCode == kerr.TopicAlreadyExists.Code:
			if st == deleted && !lateEffect(op, AdminCreateTopic) {
				bad(op, "TOPIC_ALREADY_EXISTS after the topic was deleted")
			}
			states[op.Topic] = exists
		case op.Kind == AdminDeleteTopic && op.ErrorCode == 0:
			if st == deleted && !lateEffect(op, AdminCreateTopic) {
				bad(op, "succeeded on a topic already deleted")
			}
			states[op.Topic] = deleted
		case op.Kind == AdminDeleteTopic && op.ErrorCode == kerr.UnknownTopicOrPartition.Code:
			if st == exists && !lateEffect(op, AdminDeleteTopic) {
				bad(op, "UNKNOWN_TOPIC_OR_PARTITION while the topic existed")
			}
			states[op.Topic] = deleted
		case op.Kind == AdminCreatePartitions && op.ErrorCode == 0:
			if st == deleted && !lateEffect(op, AdminCreateTopic) {
				bad(op, "succeeded on a deleted topic")
			}
			states[op.Topic] = exists
		case op.ErrorCode != 0 && op.Kind != AdminCreatePartitions:
			// NOT_CONTROLLER, REQUEST_TIMED_OUT, …: the request may
			// still take effect.
			states[op.Topic] = unknown
			pending[pendingKey{op.Topic, op.Kind}]++
		}
	}
	return out
}
