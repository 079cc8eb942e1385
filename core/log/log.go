package log

import (
	"errors"
	"fmt"
	"log/slog"

	"strand/core/env"
	"strand/core/log/checkpoint"
)

// EpochCheckpointName is the leader epoch file inside a log's directory.
const EpochCheckpointName = "leader-epoch-checkpoint"

// Log is one partition replica's log. It is driven by the node's event loop:
// no method may be called concurrently, and disk completions come back on the
// same loop.
type Log struct {
	disk env.Disk
	dir  string
	cfg  Config

	// segments are sorted by base offset and contiguous; the last one is
	// the active segment, the only one appended to. Never empty.
	segments       []*segment
	logStartOffset int64
	// recoveryPoint: every batch below it is durable.
	recoveryPoint int64

	epochs      *EpochCache
	epochWriter *checkpoint.Writer
	// epochVersionWritten is the cache version last handed to epochWriter.
	epochVersionWritten uint64

	flush flushState
	// clean is the log cleaner's state (cleaner.go).
	clean cleanerState

	// checkpointTrust, when the log belongs to a Manager, returns the
	// highest recovery point that recovery-point-offset-checkpoint on disk
	// may hold for this log: a restart trusts every batch below it
	// unverified. checkpointLowered asks the Manager to write the lowered
	// recovery point now. Both nil for a log without a Manager.
	checkpointTrust   func() int64
	checkpointLowered func()

	// failed, once set, is returned (it wraps env.ErrIO) by every call.
	failed error
	// onFailure, if set, hears the log fail, once (SetFailureListener).
	onFailure func(err error)
	// scratch is reused for header reads; never retained by results.
	scratch []byte
	// readHints are where recent reads ended (read.go).
	readHints readHints
	// logger receives the operator log lines (SetLogger); the zero Log
	// discards them.
	logger env.Log
}

// SetLogger gives the log somewhere to write its operator log lines: a
// storage failure taking it offline, segments deleted by retention. The
// owner binds the topic and partition. Logging never changes what the log
// does.
func (l *Log) SetLogger(logger env.Log) { l.logger = logger }

// SetFailureListener registers fn to run once, when the log fails (on the
// event loop, from inside whatever call failed it, or from Manager.Fail):
// the owner answers at once what waits on the log (acks, parked fetches)
// instead of letting it time out. fn must not call back into the log to
// change it.
func (l *Log) SetFailureListener(fn func(err error)) { l.onFailure = fn }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config is the log's configuration.
func (l *Log) Config() Config { return l.cfg }

// LogStartOffset is the first offset a fetch may ask for.
func (l *Log) LogStartOffset() int64 { return l.logStartOffset }

// LogEndOffset (LEO) is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.active().nextOffset }

// RecoveryPoint is the durable offset: every batch below it has been synced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint }

// SizeBytes is the total size of the segment files.
func (l *Log) SizeBytes() int64 {
	var total int64
	for _, s := range l.segments {
		total += s.bytes
	}
	return total
}

// SegmentCount is the number of segments, the active one included.
func (l *Log) SegmentCount() int { return len(l.segments) }

// SegmentBaseOffsets lists the segments' base offsets, oldest first.
func (l *Log) SegmentBaseOffsets() []int64 {
	bases := make([]int64, len(l.segments))
	for i, s := range l.segments {
		bases[i] = s.baseOffset
	}
	return bases
}

// Epochs is the leader epoch cache. Callers may read it; changes go through
// the Log so that they are persisted.
func (l *Log) Epochs() *EpochCache { return l.epochs }

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the epoch cache.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.EndOffsetFor(epoch, l.LogEndOffset())
}

// AssignEpochStartOffset records that leader epoch starts at startOffset,
// with Kafka's assign semantics (see EpochCache), and persists the cache. A
// new leader calls it with its epoch and its LEO, as Kafka's makeLeader does.
func (l *Log) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	if l.failed != nil {
		return l.failed
	}
	if epoch < 0 || startOffset < l.logStartOffset || startOffset > l.LogEndOffset() {
		return fmt.Errorf("assign epoch %d at %d in %s: must be a valid epoch at an offset in [%d, %d]",
			epoch, startOffset, l.dir, l.logStartOffset, l.LogEndOffset())
	}
	if l.epochs.assign(epoch, startOffset) {
		l.persistEpochs(nil)
	}
	return nil
}

// checkTrustedAppend refuses an append that would put unsynced batches below
// a recovery point the checkpoint on disk may still hold: after a truncation
// below it, a crash would make the restarted log trust them unverified.
// Kafka writes the lowered checkpoint synchronously inside the truncation;
// Strand's writes are asynchronous, so appends wait for it instead.
func (l *Log) checkTrustedAppend() error {
	if l.checkpointTrust == nil || l.LogEndOffset() >= l.checkpointTrust() {
		return nil
	}
	l.checkpointLowered()
	return fmt.Errorf("append to %s at %d, below the checkpointed recovery point %d: %w",
		l.dir, l.LogEndOffset(), l.checkpointTrust(), ErrRecoveryPointPending)
}

// Err returns the error that failed the log, or nil while it is healthy.
func (l *Log) Err() error { return l.failed }

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// fail puts the log in the failed state for good and returns the error every
// later call will see. Kafka takes the whole directory offline on any I/O
// failure; Strand fails only this log (its directory goes offline when one
// of the directory's own files fails, Manager.Fail), but the broker treats
// either the same way: it asks to be fenced, and a clean shutdown writes no
// clean-shutdown marker (SPEC.md §3.5).
func (l *Log) fail(cause error) error { return l.takeOffline(cause, true) }

// takeOffline is fail; logged false leaves the ERROR line to the caller,
// Manager.Fail, which writes one for its whole directory.
func (l *Log) takeOffline(cause error, logged bool) error {
	if l.failed != nil {
		return l.failed
	}
	l.failed = fmt.Errorf("log %s is offline after a storage failure: %w: %w", l.dir, env.ErrIO, cause)
	if logged {
		l.logger.Error("storage failure: the log is offline; requests on it get KAFKA_STORAGE_ERROR",
			slog.String("dir", l.dir), slog.Int64("log_end_offset", l.LogEndOffset()), slog.Any("err", cause))
	}
	if l.onFailure != nil {
		l.onFailure(l.failed)
	}
	return l.failed
}

// Close closes every file and abandons a leader-epoch-checkpoint write in
// flight, so that the log may be opened again at once. Pending Syncs still
// complete. The log must not be used afterwards.
func (l *Log) Close() error {
	l.epochWriter.Close()
	l.abandonCleaning()
	var first error
	for _, s := range l.segments {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// persistEpochs writes leader-epoch-checkpoint if the cache changed since the
// last write. done (optional) runs once everything written so far is durable,
// at once if nothing is in flight.
func (l *Log) persistEpochs(done func(error)) {
	if l.epochs.version != l.epochVersionWritten {
		l.epochVersionWritten = l.epochs.version
		l.epochWriter.Write(checkpoint.EncodeEpochs(l.epochs.entries), func(err error) {
			// A write Close abandoned (the partition stopped, its topic
			// deleted) reports env.ErrClosed: nothing failed.
			if err != nil && !errors.Is(err, env.ErrClosed) {
				_ = l.fail(err) // recorded; every later call reports it
			}
		})
	}
	if done != nil {
		l.epochWriter.Await(done)
	}
}

// checkInvariants asserts the log's structural invariants (SPEC.md §3).
func (l *Log) checkInvariants() {
	for i, s := range l.segments {
		if s.nextOffset < s.baseOffset {
			panic(fmt.Sprintf("log %s: segment %d ends at %d, before its base", l.dir, s.baseOffset, s.nextOffset))
		}
		if i > 0 && s.baseOffset != l.segments[i-1].nextOffset {
			panic(fmt.Sprintf("log %s: segment %d does not follow segment %d ending at %d",
				l.dir, s.baseOffset, l.segments[i-1].baseOffset, l.segments[i-1].nextOffset))
		}
	}
	if l.logStartOffset > l.LogEndOffset() || l.logStartOffset < l.segments[0].baseOffset {
		panic(fmt.Sprintf("log %s: log start offset %d outside [%d, %d]", l.dir, l.logStartOffset,
			l.segments[0].baseOffset, l.LogEndOffset()))
	}
	if l.recoveryPoint > l.LogEndOffset() {
		panic(fmt.Sprintf("log %s: recovery point %d beyond LEO %d", l.dir, l.recoveryPoint, l.LogEndOffset()))
	}
}
