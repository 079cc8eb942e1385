package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is Check's rejection of a produced batch. Code is the Kafka error the
// broker answers the partition with; errors.Is(err, kerr.X) matches it.
type Error struct {
	ProducerID int64
	Code       *kerr.Error
	Reason     string
	// Cause is a sentinel of this package (ErrTooManyProducers), or nil.
	Cause error
}

func (e *Error) Error() string {
	return fmt.Sprintf("producer %d: %s: %s", e.ProducerID, e.Code.Message, e.Reason)
}

// Unwrap exposes the Kafka error code and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Code}
	}
	return []error{e.Code, e.Cause}
}

// ErrTooManyProducers is wrapped by the Error a new producer gets when its
// partition already keeps Config.ProducersMax producers. Kafka has no such
// bound, so no error code is exact: the broker answers POLICY_VIOLATION, which
// clients do not retry, rather than let a client retry for a day.
var ErrTooManyProducers = errors.New("too many producer ids in this partition")

// CodeTooManyProducers is the Kafka error for ErrTooManyProducers.
var CodeTooManyProducers = kerr.PolicyViolation
