package replica

import "github.com/twmb/franz-go/pkg/kerr"

// codeNotController answers an AlterPartition that is ahead of this
// controller's state: the leader should find the active controller.
var codeNotController = kerr.NotController.Code

// BrokerStatus is what a controller knows of a broker's registration.
type BrokerStatus struct {
	// Registered is false for a broker the controller does not know.
	Registered bool
	// Fenced is set while the broker has no live session (KIP-841).
	Fenced bool
	// ShuttingDown is set during a controlled shutdown (KIP-841).
	ShuttingDown bool
	// Epoch is the broker epoch of its current registration (KIP-903).
	Epoch int64
}

// HandleAlterPartition is the controller's side of an ISR proposal, with
// Kafka's checks in Kafka's order (ReplicationControlManager.
// validateAlterPartitionData): a request ahead of the controller →
// NOT_CONTROLLER; an older leader epoch → FENCED_LEADER_EPOCH; not from the
// leader → INVALID_REQUEST; an older partition epoch → INVALID_UPDATE_VERSION;
// an ISR that is malformed or lacks the leader → INVALID_REQUEST; a member
// not registered, fenced, shutting down or with another broker epoch →
// INELIGIBLE_REPLICA. A valid request is applied with ChangeISR (a new
// partition epoch, ELR maintained) unless the ISR is already the proposed
// one. It returns the partition state after the request and the response.
func HandleAlterPartition(cur PartitionState, req AlterPartitionRequest, pol ELRPolicy, broker func(id int32) BrokerStatus) (PartitionState, AlterPartitionResponse) {
	resp := AlterPartitionResponse{ProposalID: req.ProposalID}
	if code := validateAlterPartition(cur, req, broker); code != codeNone {
		resp.Error = code
		return cur.clone(), resp
	}
	next := cur.clone()
	if !equalIDs(sortedCopy(req.NewISR), next.ISR) {
		next = ChangeISR(cur, req.NewISR, nil, pol)
	}
	resp.LeaderEpoch, resp.PartitionEpoch, resp.ISR = next.LeaderEpoch, next.PartitionEpoch, sortedCopy(next.ISR)
	return next, resp
}

func validateAlterPartition(cur PartitionState, req AlterPartitionRequest, broker func(int32) BrokerStatus) int16 {
	switch {
	case req.LeaderEpoch > cur.LeaderEpoch || req.PartitionEpoch > cur.PartitionEpoch:
		return codeNotController
	case req.LeaderEpoch < cur.LeaderEpoch:
		return codeFencedLeaderEpoch
	case req.LeaderID != cur.LeaderID:
		return codeInvalidRequest
	case req.PartitionEpoch < cur.PartitionEpoch:
		return codeInvalidUpdateVersion
	}
	if _, dup := firstDuplicate(req.NewISR); dup {
		return codeInvalidRequest
	}
	if _, out := firstNotIn(req.NewISR, cur.Replicas); out || !containsID(req.NewISR, cur.LeaderID) {
		return codeInvalidRequest
	}
	if req.BrokerEpochs != nil && len(req.BrokerEpochs) != len(req.NewISR) {
		return codeInvalidRequest
	}
	for i, id := range req.NewISR {
		if !eligibleForISR(broker(id), req.BrokerEpochs, i) {
			return codeIneligibleReplica
		}
	}
	return codeNone
}

// eligibleForISR is Kafka's ineligibleReplicasForIsr for one member: the
// i-th broker epoch of the request, -1 or absent, skips the epoch check.
func eligibleForISR(b BrokerStatus, epochs []int64, i int) bool {
	if !b.Registered || b.Fenced || b.ShuttingDown {
		return false
	}
	return epochs == nil || epochs[i] == -1 || epochs[i] == b.Epoch
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
