package broker

// FindCoordinator (key 10), versions 0..4.
//
// Served: group coordinators. A group's coordinator is the leader of its
// __consumer_offsets partition (group.PartitionFor); COORDINATOR_NOT_AVAILABLE
// while that partition has no usable leader, and while the topic does not
// exist yet: the first FindCoordinator asks the controller to create it
// (coordinators.go). v4 answers a batch of CoordinatorKeys (KIP-699).
// The endpoint is the leader's first advertised listener, as Metadata gives.
//
// Skipped: transaction coordinators (key type 1) answer INVALID_REQUEST
// with a message saying Strand has no transactions (not the retriable
// COORDINATOR_NOT_AVAILABLE, which left a transactional producer retrying
// until its timeout); other key types get INVALID_REQUEST naming key_type.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/group"
)

// Kafka's coordinator key types.
const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

// transactionsUnsupported is the error message of the requests only a
// transaction coordinator would serve.
const transactionsUnsupported = "transactions are not supported: Strand has no transaction coordinator (idempotent producing works without a transactional.id)"

// batchedCoordinatorKeysVersion is the first version with CoordinatorKeys.
const batchedCoordinatorKeysVersion = 4

func (gc *groupCoordinators) handleFindCoordinator(conn env.ConnID, hdr env.RequestHeader, req *kmsg.FindCoordinatorRequest) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	g := gc.acls.current
	if req.Version < batchedCoordinatorKeysVersion {
		c := gc.findAuthorizedCoordinator(g, gc.clientListener(hdr), req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		gc.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, gc.findAuthorizedCoordinator(g, gc.clientListener(hdr), req.CoordinatorType, key))
	}
	gc.net.Reply(conn, hdr.CorrelationID, resp)
}

// findAuthorizedCoordinator is findCoordinator once the principal may
// DESCRIBE the key: the group, or the transactional id.
func (gc *groupCoordinators) findAuthorizedCoordinator(g grants, listener string, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	refused := func(code int16) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
		return c
	}
	switch {
	case keyType == coordinatorKeyGroup && !g.group(acl.Describe, key):
		return refused(codeGroupAuthorization)
	case keyType == coordinatorKeyTransaction && !g.allows(acl.Describe, acl.TransactionalID, key):
		return refused(codeTxnIDAuthorization)
	}
	return gc.findCoordinator(listener, keyType, key)
}

// findCoordinator answers for one key, with the coordinator's endpoint on
// listener.
func (gc *groupCoordinators) findCoordinator(listener string, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	failWith := func(err *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = err.Code, &msg
		return c
	}
	fail := func(err *kerr.Error) kmsg.FindCoordinatorResponseCoordinator { return failWith(err, err.Message) }
	switch keyType {
	case coordinatorKeyGroup:
	case coordinatorKeyTransaction:
		// Not retriable: a transactional producer fails at once with the
		// reason, instead of retrying COORDINATOR_NOT_AVAILABLE until its
		// timeout.
		return failWith(kerr.InvalidRequest, transactionsUnsupported)
	default:
		return failWith(kerr.InvalidRequest, fmt.Sprintf("FindCoordinator: unknown key_type %d (0 is a group, 1 a transaction)", keyType))
	}
	if _, ok := gc.meta.image.TopicByName(offsetsTopic); !ok {
		gc.ensureOffsetsTopic()
		return fail(kerr.CoordinatorNotAvailable)
	}
	s, ok := gc.meta.image.PartitionByName(offsetsTopic, group.PartitionFor(key, gc.offsetsPartitions()))
	if !ok || s.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	b, ok := gc.meta.image.Broker(s.Leader)
	e, hasEndpoint := gc.meta.image.BrokerEndpoint(s.Leader, listener)
	if !ok || b.Fenced || !hasEndpoint {
		return fail(kerr.CoordinatorNotAvailable)
	}
	c.NodeID, c.Host, c.Port = s.Leader, e.Host, int32(e.Port)
	return c
}
