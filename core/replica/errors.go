package replica

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes this package answers with, taken from kerr so they
// cannot drift from the protocol. 0 means no error.
var (
	codeNone                         int16 = 0
	codeOffsetOutOfRange                   = kerr.OffsetOutOfRange.Code
	codeNotLeaderOrFollower                = kerr.NotLeaderForPartition.Code // NOT_LEADER_OR_FOLLOWER since Kafka 2.6
	codeRequestTimedOut                    = kerr.RequestTimedOut.Code
	codeNotEnoughReplicas                  = kerr.NotEnoughReplicas.Code
	codeNotEnoughReplicasAfterAppend       = kerr.NotEnoughReplicasAfterAppend.Code
	codeInvalidRequiredAcks                = kerr.InvalidRequiredAcks.Code
	codeFencedLeaderEpoch                  = kerr.FencedLeaderEpoch.Code
	codeUnknownLeaderEpoch                 = kerr.UnknownLeaderEpoch.Code
	codeOperationNotAttempted              = kerr.OperationNotAttempted.Code
	codeIneligibleReplica                  = kerr.IneligibleReplica.Code
	codeUnknownTopicOrPartition            = kerr.UnknownTopicOrPartition.Code
	codeUnknownTopicID                     = kerr.UnknownTopicID.Code
	codeInvalidUpdateVersion               = kerr.InvalidUpdateVersion.Code
	codeInvalidRequest                     = kerr.InvalidRequest.Code
	codeNewLeaderElected                   = kerr.NewLeaderElected.Code
)

// Error is a rejection this package returns to the broker: the Kafka error
// code to answer with and why. Callers take it apart with errors.As.
type Error struct {
	// Code is the Kafka error code (kerr) for the response.
	Code int16
	// Reason names the field or condition at fault, with the values.
	Reason string
}

// Error puts the Kafka error name first, so a log line says what the client saw.
func (e *Error) Error() string {
	if ke := kerr.ErrorForCode(e.Code); ke != nil {
		return ke.Error() + ": " + e.Reason
	}
	return fmt.Sprintf("error code %d: %s", e.Code, e.Reason)
}

func errorf(code int16, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}
