package batch

import "github.com/twmb/franz-go/pkg/kerr"

// Error is every rejection this package returns: the header or record field
// at fault, why, and the Kafka error code a broker answers the producer with.
// Callers take it apart with errors.As.
type Error struct {
	// Field names the faulty field as Kafka's protocol guide spells it
	// ("crc", "lastOffsetDelta"), or "records[i].field" for a record.
	Field string
	// Reason says what is wrong, with the offending values.
	Reason string
	// Code is the Kafka error code (kerr) for the produce response.
	Code int16
}

// Error names the field first, so a log line says where the fault is.
func (e *Error) Error() string { return "batch field " + e.Field + ": " + e.Reason }

// Kafka error codes, taken from kerr so they cannot drift from the protocol.
var (
	// codeCorrupt is for damage to the batch framing: length, magic, CRC.
	codeCorrupt = kerr.CorruptMessage.Code
	// codeInvalidRecord is for a well framed batch whose content breaks a rule.
	codeInvalidRecord = kerr.InvalidRecord.Code
	// codeUnsupportedCompression is for a codec id Kafka does not define.
	codeUnsupportedCompression = kerr.UnsupportedCompressionType.Code
	// codeInvalidTimestamp is for a timestamp outside the topic's bounds.
	codeInvalidTimestamp = kerr.InvalidTimestamp.Code
	// codeTooLarge is for a batch larger than the configured maximum.
	codeTooLarge = kerr.MessageTooLarge.Code
)

func errCorrupt(field, reason string) *Error { return &Error{field, reason, codeCorrupt} }

func errInvalid(field, reason string) *Error { return &Error{field, reason, codeInvalidRecord} }
