package broker

// InitProducerId (key 22), versions 0..4 (api_versions.go): kgo and
// librdkafka send it for their default idempotent producer, at the highest
// version both sides know. v5 belongs to KIP-890's transactions.
//
// Served: a null transactional id, as Kafka's TransactionCoordinator serves
// it: always a fresh producer id at epoch 0, whatever ProducerID and
// ProducerEpoch (v3+, KIP-360) carry. Ids come from this broker's
// producer.IDBlock, fed with blocks by the active controller
// (AllocateProducerIds, key 67, sent through toController as the other
// controller RPCs). A request finding no id waits for the block in flight
// (at most requestTimeoutMs); if none comes, it gets
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry. Each block is
// requested once 90% of the previous one is used, so waits are rare.
//
// Skipped: transactions. A non-empty transactional id gets
// COORDINATOR_NOT_AVAILABLE, what Kafka answers while the transaction
// coordinator is unavailable (its __transaction_state cannot be created):
// clients know it, retry it, and fail the transactional producer's
// initialisation with a timeout naming the coordinator. A non-retriable
// code would fail faster but misleads: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// points at ACLs, INVALID_REQUEST at the client library.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/producer"
)

// initProducerWaitsMax bounds the InitProducerId requests waiting for a
// block of producer ids; more get COORDINATOR_LOAD_IN_PROGRESS at once.
const initProducerWaitsMax = 1000

// producerIDManager hands out producer ids for InitProducerId (Kafka's
// ProducerIdManager): from blocks the active controller allocates to this
// broker.
type producerIDManager struct {
	*nodeEnv
	// meta has the broker epoch the controller checks; controllerRole
	// carries AllocateProducerIds to it.
	meta           *metadataFollower
	controllerRole *controllerRole
	// producerIDs are the producer ids the controller allocated to this
	// broker (AllocateProducerIds); initProducerWaits are the
	// InitProducerId requests waiting for a block.
	producerIDs               producer.IDBlock
	producerIDRequestInFlight bool
	initProducerWaits         []initProducerWait
}

// initProducerWait is an InitProducerId request waiting for a block.
type initProducerWait struct {
	conn env.ConnID
	corr int32
	resp *kmsg.InitProducerIDResponse
}

func (pid *producerIDManager) handleInitProducerID(conn env.ConnID, hdr env.RequestHeader, req *kmsg.InitProducerIDRequest) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		// As FindCoordinator's transaction keys: refused for good
		// (transactionsUnsupported; InitProducerId has no message field).
		resp.ErrorCode = kerr.InvalidRequest.Code
		pid.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	if id, ok := pid.producerIDs.Next(); ok {
		resp.ProducerID, resp.ProducerEpoch = id, 0
		pid.net.Reply(conn, hdr.CorrelationID, resp)
		pid.maybeRequestProducerIDs()
		return
	}
	if len(pid.initProducerWaits) >= initProducerWaitsMax {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		pid.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	pid.initProducerWaits = append(pid.initProducerWaits, initProducerWait{conn: conn, corr: hdr.CorrelationID, resp: resp})
	pid.maybeRequestProducerIDs()
	if !pid.producerIDsRequested() {
		// Not registered yet, or backing off after a failure.
		pid.answerInitProducerWaits()
	}
}

// producerIDsRequested reports whether an AllocateProducerIds is in flight.
func (pid *producerIDManager) producerIDsRequested() bool { return pid.producerIDRequestInFlight }

// maybeRequestProducerIDs sends AllocateProducerIds to the active
// controller when the IDBlock asks for a block (none left, or 90% of the
// current one used) and this incarnation is registered: the controller
// checks the broker epoch.
func (pid *producerIDManager) maybeRequestProducerIDs() {
	if pid.meta.brokerEpoch < 0 || !pid.producerIDs.ShouldRequest(pid.nowMs()) {
		return
	}
	pid.producerIDs.RequestStarted()
	pid.producerIDRequestInFlight = true
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = pid.id, pid.meta.brokerEpoch
	pid.controllerRole.toController(req, func(r kmsg.Response, err error) {
		pid.producerIDRequestInFlight = false
		resp, _ := r.(*kmsg.AllocateProducerIDsResponse)
		switch {
		case err != nil || resp == nil || resp.ErrorCode != 0:
			pid.producerIDs.RequestFailed(pid.nowMs())
		default:
			_ = pid.producerIDs.AddBlock(resp.ProducerIDStart, resp.ProducerIDLen, pid.nowMs()) // a bad block counts as a failure
		}
		pid.answerInitProducerWaits()
	})
}

// answerInitProducerWaits hands ids to the waiting requests, in arrival
// order, and answers the rest COORDINATOR_LOAD_IN_PROGRESS unless a block
// is on its way.
func (pid *producerIDManager) answerInitProducerWaits() {
	waits := pid.initProducerWaits
	pid.initProducerWaits = nil
	for i, w := range waits {
		id, ok := pid.producerIDs.Next()
		if !ok {
			pid.maybeRequestProducerIDs()
			if pid.producerIDsRequested() {
				pid.initProducerWaits = append(pid.initProducerWaits, waits[i:]...)
				return
			}
			w.resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			pid.net.Reply(w.conn, w.corr, w.resp)
			continue
		}
		w.resp.ProducerID, w.resp.ProducerEpoch = id, 0
		pid.net.Reply(w.conn, w.corr, w.resp)
	}
	pid.maybeRequestProducerIDs()
}
