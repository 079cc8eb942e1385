package log

import "errors"

// Errors the broker maps to Kafka error codes. They are wrapped with context;
// compare with errors.Is.
var (
	// ErrOffsetOutOfRange: a fetch offset below the log start offset or
	// beyond the log end offset (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrInvalidBatch: the bytes handed to an append are not exactly one
	// valid batch (leader) or a run of valid batches (follower)
	// (CORRUPT_MESSAGE). The wrapped batch error names the field.
	ErrInvalidBatch = errors.New("invalid record batch")
	// ErrUnexpectedOffset: a follower append does not start at the log end
	// offset, or its batches are not contiguous.
	ErrUnexpectedOffset = errors.New("unexpected append offset")
	// ErrBatchTooLarge: a batch is larger than a segment may ever be
	// (RECORD_LIST_TOO_LARGE).
	ErrBatchTooLarge = errors.New("record batch larger than segment.bytes")
	// ErrRecoveryPointPending: after a truncation below the recovery point
	// that recovery-point-offset-checkpoint may still hold, appends wait
	// until the lowered checkpoint is durable (SPEC.md §3.4). Retriable.
	ErrRecoveryPointPending = errors.New("waiting for the lowered recovery-point checkpoint")
)
