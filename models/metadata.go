package models

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Metadata operations as linearizable registers (controller issue §4): the
// controller decides every topic and partition change on its latest state
// and answers only once the decision is committed, so the answers clients
// get must be explainable by one order of the changes, consistent with real
// time. Two registers are checked with Porcupine:
//
//   - per topic name, whether it exists (and its id), written by the admin
//     client's CreateTopics and DeleteTopics and read by their answers and
//     CreatePartitions' (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION);
//   - per partition (topic id, index), its state as a versioned register:
//     the partition epoch is the version, and an AlterPartition the
//     controller accepts is a compare-and-set from the partition and leader
//     epochs the leader sent to the state it answers. The controller also
//     changes partitions on its own (elections when a broker is fenced,
//     controlled shutdowns, rebalancing), which no client sees: the model
//     lets the version move forward unseen between observed operations, so
//     what it catches is an answer no order explains, such as two accepted
//     changes from one partition epoch, or an accepted change from an
//     epoch older than one already answered.
//
// An operation without a definite answer (timed out, a connection error,
// or an error such as NOT_CONTROLLER that a later controller may still
// commit past) may take effect at any time after its call: it gets return
// time infinity and applies where it can; for partitions it is left out,
// as the unseen changes already cover it. A rejected AlterPartition
// teaches nothing either (an unseen change explains any rejection).
// Porcupine's Unknown (timeout) is a failure.

// AlterPartitionOp is one AlterPartition exchange between a partition
// leader and the controller, for one partition.
type AlterPartitionOp struct {
	// TopicID and Partition name the partition; Broker sent the request.
	TopicID   [16]byte
	Partition int32
	Broker    int32
	// CallNs and ReturnNs as for Produce (NeverReturnedNs: no answer).
	CallNs, ReturnNs int64
	// The request: the epochs the leader knows and the ISR it asks for.
	ReqLeaderEpoch, ReqPartitionEpoch int32
	ReqISR                            []int32
	// The answer: the partition's error, and the state it reports.
	ErrorCode                   int16
	LeaderEpoch, PartitionEpoch int32
	ISR                         []int32
}

// topicState is the topic register's value.
type topicState struct {
	exists bool
	// id is the topic id, zero while unknown (the initial topics, or one
	// created by a request without an answer).
	id [16]byte
}

// topicInput is one admin operation on a topic and its answer.
type topicInput struct {
	kind AdminKind
	// definite: the answer is one of the codes below; otherwise the
	// outcome is unknown.
	definite bool
	code     int16
	id       [16]byte
}

var topicModel = porcupine.Model{
	Init: func() interface{} { return topicState{exists: true} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, in := state.(topicState), input.(topicInput)
		exists, missing := kerr.TopicAlreadyExists.Code, kerr.UnknownTopicOrPartition.Code
		switch {
		case !in.definite:
			// Takes effect where it can, as a request the controller
			// decided on this state would.
			switch {
			case in.kind == AdminCreateTopic && !s.exists:
				return true, topicState{exists: true}
			case in.kind == AdminDeleteTopic && s.exists:
				return true, topicState{}
			}
			return true, s
		case in.kind == AdminCreateTopic && in.code == 0:
			return !s.exists, topicState{exists: true, id: in.id}
		case in.kind == AdminCreateTopic && in.code == exists:
			return s.exists, s
		case in.kind == AdminDeleteTopic && in.code == 0:
			return s.exists, topicState{}
		case in.kind == AdminDeleteTopic && in.code == missing:
			return !s.exists, s
		case in.kind == AdminCreatePartitions && in.code == 0:
			return s.exists, s
		case in.kind == AdminCreatePartitions && in.code == missing:
			return !s.exists, s
		}
		return true, s
	},
	Equal: func(a, b interface{}) bool { return a.(topicState) == b.(topicState) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(topicInput)
		if !in.definite {
			return fmt.Sprintf("%v → unknown", in.kind)
		}
		return fmt.Sprintf("%v → %v", in.kind, kerr.ErrorForCode(in.code))
	},
	DescribeState: func(state interface{}) string {
		s := state.(topicState)
		if !s.exists {
			return "deleted"
		}
		return fmt.Sprintf("exists %x", s.id[:4])
	},
}

// topicDefinite reports whether an admin answer is definite for the model.
func topicDefinite(op AdminOp) bool {
	if op.ReturnNs == NeverReturnedNs || op.Error != "" {
		return false
	}
	switch op.ErrorCode {
	case 0, kerr.TopicAlreadyExists.Code, kerr.UnknownTopicOrPartition.Code:
		return true
	}
	return false
}

// partitionState is the partition register's value: the last state an
// accepted AlterPartition answered, with the version (partition epoch)
// that unseen changes may have moved forward since.
type partitionState struct {
	known                       bool
	leaderEpoch, partitionEpoch int32
}

var partitionModel = porcupine.Model{
	Init: func() interface{} { return partitionState{} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, op := state.(partitionState), input.(AlterPartitionOp)
		next := partitionState{known: true, leaderEpoch: op.LeaderEpoch, partitionEpoch: op.PartitionEpoch}
		if !s.known {
			return true, next
		}
		switch {
		case s.partitionEpoch > op.ReqPartitionEpoch:
			return false, s // the version had moved past what the CAS expected
		case s.partitionEpoch == op.ReqPartitionEpoch && s.leaderEpoch != op.ReqLeaderEpoch:
			return false, s // the same version, another leader epoch
		}
		return true, next
	},
	Equal: func(a, b interface{}) bool { return a.(partitionState) == b.(partitionState) },
	DescribeOperation: func(input, _ interface{}) string {
		op := input.(AlterPartitionOp)
		return fmt.Sprintf("broker %d: (leader epoch %d, partition epoch %d) ISR %v → (%d, %d) ISR %v",
			op.Broker, op.ReqLeaderEpoch, op.ReqPartitionEpoch, op.ReqISR, op.LeaderEpoch, op.PartitionEpoch, op.ISR)
	},
	DescribeState: func(state interface{}) string {
		s := state.(partitionState)
		if !s.known {
			return "unknown"
		}
		return fmt.Sprintf("leader epoch %d partition epoch ≥%d", s.leaderEpoch, s.partitionEpoch)
	},
}

// CheckMetadataRegisters checks the admin client's topic operations and
// the recorded AlterPartition exchanges against the registers above, each
// topic and partition on its own, within timeout per register.
func CheckMetadataRegisters(admin []AdminOp, alters []AlterPartitionOp, timeout time.Duration) []Violation {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var vs []Violation
	byTopic := map[string][]porcupine.Operation{}
	for i, op := range admin {
		if op.Kind != AdminCreateTopic && op.Kind != AdminDeleteTopic && op.Kind != AdminCreatePartitions {
			continue
		}
		in := topicInput{kind: op.Kind, definite: topicDefinite(op), code: op.ErrorCode, id: op.TopicID}
		ret := op.ReturnNs
		if !in.definite {
			ret = NeverReturnedNs
		}
		byTopic[op.Topic] = append(byTopic[op.Topic], porcupine.Operation{ClientId: i, Input: in, Call: op.CallNs, Return: ret})
	}
	topics := make([]string, 0, len(byTopic))
	for name := range byTopic { // order-independent: sorted below
		topics = append(topics, name)
	}
	sort.Strings(topics)
	for _, name := range topics {
		if v, bad := checkRegister(topicModel, byTopic[name], timeout); bad {
			vs = append(vs, Violation{Check: "metadata-topic", TP: TopicPartition{Topic: name, Partition: -1},
				Detail: fmt.Sprintf("topic %s: admin answers %s", name, v)})
		}
	}

	type partKey struct {
		id        [16]byte
		partition int32
	}
	byPart := map[partKey][]porcupine.Operation{}
	for i, op := range alters {
		if op.ReturnNs == NeverReturnedNs || op.ErrorCode != 0 {
			continue
		}
		k := partKey{op.TopicID, op.Partition}
		byPart[k] = append(byPart[k], porcupine.Operation{ClientId: i, Input: op, Call: op.CallNs, Return: op.ReturnNs})
	}
	keys := make([]partKey, 0, len(byPart))
	for k := range byPart { // order-independent: sorted below
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b partKey) int {
		for i := range a.id {
			if a.id[i] != b.id[i] {
				return int(a.id[i]) - int(b.id[i])
			}
		}
		return int(a.partition - b.partition)
	})
	for _, k := range keys {
		if v, bad := checkRegister(partitionModel, byPart[k], timeout); bad {
			vs = append(vs, Violation{Check: "metadata-partition",
				Detail: fmt.Sprintf("partition %x-%d: accepted AlterPartition answers %s", k.id[:4], k.partition, v)})
		}
	}
	return vs
}

// checkRegister runs Porcupine on one register's history; Unknown is a
// failure.
func checkRegister(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) (string, bool) {
	switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
	case porcupine.Ok:
		return "", false
	case porcupine.Unknown:
		return fmt.Sprintf("could not be checked within %v (%d operations): counted as a failure", timeout, len(ops)), true
	}
	var descs []string
	for _, op := range ops {
		ret := "∞"
		if op.Return != NeverReturnedNs {
			ret = fmt.Sprint(op.Return / 1e6)
		}
		descs = append(descs, fmt.Sprintf("[%d ms, %s ms] %s", op.Call/1e6, ret, model.DescribeOperation(op.Input, op.Output)))
	}
	return fmt.Sprintf("have no linearization: %v", descs), true
}
