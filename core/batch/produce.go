package batch

import (
	"errors"
	"fmt"
	"math"
)

// TimestampType is a topic's message.timestamp.type.
type TimestampType int8

// The two timestamp types Kafka defines.
const (
	// CreateTime keeps the producer's timestamps, within the topic's bounds.
	CreateTime TimestampType = 0
	// LogAppendTime replaces them with the broker's clock at append.
	LogAppendTime TimestampType = 1
)

// String names the type as message.timestamp.type does.
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: a record without one.
const NoTimestamp int64 = -1

// ProduceLimits is the topic configuration and the moment that CheckProduced
// judges a produced batch against.
type ProduceLimits struct {
	// BatchBytesMax is max.message.bytes: the largest batch accepted,
	// overhead included. Must be positive.
	BatchBytesMax int
	// DecompressedBytesMax bounds the decompressed records section, against
	// compression bombs. Must be positive and at most math.MaxInt32. zstd frames are also refused when
	// their declared window exceeds it (see decodeZstd). Streaming zstd
	// encoders, as in the Java client, declare 2 MiB at the default level 3,
	// 8 MiB at level 19 and up to 128 MiB at levels 20-22, so keep it at
	// least 8 MiB.
	DecompressedBytesMax int
	// RequireKeys is set for compacted topics: every record needs a key.
	RequireKeys bool
	// TimestampType is message.timestamp.type.
	TimestampType TimestampType
	// TimestampBeforeMaxMs and TimestampAfterMaxMs are
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms:
	// how far a CreateTime record's timestamp may lie before or after NowMs.
	// math.MaxInt64 means no bound. Must not be negative.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// NowMs is the broker's wall clock at validation, in Unix milliseconds.
	NowMs int64
}

// ProducedInfo is what the log needs from a batch that CheckProduced accepted.
type ProducedInfo struct {
	// Header is the batch header as the producer sent it.
	Header Header
	// RecordCount is the number of records, counted by walking them.
	RecordCount int32
	// MaxTimestamp is the largest record timestamp (NowMs for LogAppendTime
	// topics), or NoTimestamp if no record has one. The producer's header
	// field may disagree; Kafka trusts this value and rewrites the header,
	// which SetMaxTimestamp does.
	MaxTimestamp int64
	// MaxTimestampOffsetDelta is the offset delta of the first record that
	// carries MaxTimestamp (the last record for LogAppendTime topics, as in
	// Kafka), or -1 if no record has a timestamp.
	MaxTimestampOffsetDelta int32
	// ProducerID, ProducerEpoch and BaseSequence identify an idempotent
	// producer's batch; ProducerID is -1 without one.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Transactional is set for a batch inside a transaction.
	Transactional bool
}

// CheckProduced runs every check a Kafka broker runs on a batch a client
// produced (Kafka's UnifiedLog.analyzeAndValidateRecords and LogValidator),
// and returns what the log needs to append it. b must hold exactly one batch,
// as Produce v3+ demands for magic 2. In order:
//   - one batch only, BaseOffset 0, at most limits.BatchBytesMax bytes;
//   - Verify;
//   - RecordCount == LastOffsetDelta+1 >= 1;
//   - not a control batch, and not stamped LogAppendTime by the producer;
//   - a producer id comes with a base sequence >= 0, and a transactional
//     batch has a producer id;
//   - the records decompress within limits.DecompressedBytesMax, and each is
//     well formed (see readRecord) with offset delta equal to its index, no
//     bytes follow the last, and their number is RecordCount;
//   - keys are non-null if limits.RequireKeys;
//   - for CreateTime topics, each timestamp other than NoTimestamp lies
//     within the before/after bounds around limits.NowMs.
//
// Kafka would renumber records with wrong offset deltas by recompressing the
// batch; Strand stores batches untouched, so it rejects them instead.
//
// CheckProduced is pure and shares nothing between calls, so connection
// goroutines may run it in parallel. It does not retain b. Every error is an
// *Error.
func CheckProduced(b []byte, limits ProduceLimits) (ProducedInfo, error) {
	limits.mustBeValid()
	if err := checkProducedFraming(b, limits); err != nil {
		return ProducedInfo{}, err
	}
	h, err := Verify(b)
	if err != nil {
		return ProducedInfo{}, err
	}
	if err := checkProducedHeader(&h); err != nil {
		return ProducedInfo{}, err
	}
	records := b[HeaderBytes:]
	if h.Codec() != CodecNone {
		if records, err = decompress(h.Codec(), records, limits.DecompressedBytesMax); err != nil {
			code := codeCorrupt
			if errors.Is(err, errDecompressedTooLarge) {
				code = codeTooLarge
			}
			return ProducedInfo{}, &Error{"records", fmt.Sprintf("%s records: %v", h.Codec(), err), code}
		}
	}
	info := ProducedInfo{
		Header:                  h,
		MaxTimestamp:            NoTimestamp,
		MaxTimestampOffsetDelta: -1,
		ProducerID:              h.ProducerID,
		ProducerEpoch:           h.ProducerEpoch,
		BaseSequence:            h.BaseSequence,
		Transactional:           h.Attributes&AttrTransactional != 0,
	}
	if err := checkRecords(records, &h, limits, &info); err != nil {
		return ProducedInfo{}, err
	}
	if limits.TimestampType == LogAppendTime {
		info.MaxTimestamp = limits.NowMs
		info.MaxTimestampOffsetDelta = h.LastOffsetDelta
	}
	if info.RecordCount != h.RecordCount {
		panic(fmt.Sprintf("batch: walked %d records, header says %d", info.RecordCount, h.RecordCount)) // checkRecords compares them
	}
	return info, nil
}

// mustBeValid panics on limits no configuration should produce.
func (l *ProduceLimits) mustBeValid() {
	if l.BatchBytesMax <= 0 || l.DecompressedBytesMax <= 0 || l.DecompressedBytesMax > math.MaxInt32 || l.TimestampBeforeMaxMs < 0 || l.TimestampAfterMaxMs < 0 ||
		(l.TimestampType != CreateTime && l.TimestampType != LogAppendTime) {
		panic(fmt.Sprintf("batch: invalid produce limits %+v", *l))
	}
}

// checkProducedFraming applies the checks Kafka makes before it looks inside
// the batch: one batch, offset 0, size within max.message.bytes.
func checkProducedFraming(b []byte, limits ProduceLimits) *Error {
	if len(b) >= HeaderBytes {
		h, _ := ParseHeader(b)
		if h.Length >= 0 && h.TotalBytes() < int64(len(b)) {
			return errInvalid("length", fmt.Sprintf("%d bytes hold more than one batch (the first is %d bytes); a v2 produce carries exactly one per partition", len(b), h.TotalBytes()))
		}
		if h.BaseOffset != 0 {
			return errInvalid("baseOffset", fmt.Sprintf("base offset %d, a produced batch must start at 0", h.BaseOffset))
		}
	}
	if len(b) > limits.BatchBytesMax {
		return &Error{"length", fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", len(b), limits.BatchBytesMax), codeTooLarge}
	}
	return nil
}

// checkProducedHeader applies LogValidator.validateBatch's rules for batches
// from clients, on a header Verify accepted.
func checkProducedHeader(h *Header) *Error {
	if h.RecordCount < 1 || int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return errInvalid("recordCount", fmt.Sprintf("record count %d, but last offset delta %d spans %d offsets", h.RecordCount, h.LastOffsetDelta, int64(h.LastOffsetDelta)+1))
	}
	if h.IsControl() {
		return errInvalid("attributes", "clients may not write control batches")
	}
	if h.Attributes&AttrLogAppendTime != 0 {
		return &Error{"attributes", "producers may not set the LogAppendTime timestamp type", codeInvalidTimestamp}
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return errInvalid("baseSequence", fmt.Sprintf("base sequence %d with producer id %d", h.BaseSequence, h.ProducerID))
	}
	// Kafka does not check this one, but a transaction without a producer
	// id can never be committed or aborted.
	if h.Attributes&AttrTransactional != 0 && h.ProducerID < 0 {
		return errInvalid("producerId", fmt.Sprintf("transactional batch with producer id %d", h.ProducerID))
	}
	return nil
}

// checkRecords walks the decompressed records, checking each, and fills in
// info's count and maximum timestamp.
func checkRecords(records []byte, h *Header, limits ProduceLimits, info *ProducedInfo) *Error {
	pos := 0
	for index := 0; pos < len(records); index++ {
		if index >= int(h.RecordCount) {
			return errInvalid("records", fmt.Sprintf("%d bytes follow the %d records the header declares", len(records)-pos, h.RecordCount))
		}
		r, n, err := readRecord(records[pos:], index)
		if err != nil {
			return err
		}
		pos += n
		if limits.RequireKeys && r.keyIsNull {
			return errInvalid(fmt.Sprintf("records[%d].key", index), "compacted topics need a key on every record")
		}
		timestamp := h.FirstTimestamp + r.timestampDelta
		if limits.TimestampType == CreateTime && timestamp != NoTimestamp {
			if err := checkTimestamp(timestamp, index, limits); err != nil {
				return err
			}
		}
		if timestamp > info.MaxTimestamp {
			info.MaxTimestamp = timestamp
			info.MaxTimestampOffsetDelta = r.offsetDelta
		}
		info.RecordCount++
	}
	if info.RecordCount != h.RecordCount {
		return errInvalid("recordCount", fmt.Sprintf("header declares %d records, %d are present", h.RecordCount, info.RecordCount))
	}
	return nil
}

// checkTimestamp applies message.timestamp.before.max.ms and
// after.max.ms (KIP-937). Differences are taken as unsigned, so timestamps
// near the ends of int64 cannot overflow past the check.
func checkTimestamp(timestamp int64, index int, limits ProduceLimits) *Error {
	if timestamp < limits.NowMs && limits.TimestampBeforeMaxMs != math.MaxInt64 && uint64(limits.NowMs)-uint64(timestamp) > uint64(limits.TimestampBeforeMaxMs) {
		return &Error{timestampField(index), fmt.Sprintf("timestamp %d is more than message.timestamp.before.max.ms %d before now %d", timestamp, limits.TimestampBeforeMaxMs, limits.NowMs), codeInvalidTimestamp}
	}
	if timestamp > limits.NowMs && limits.TimestampAfterMaxMs != math.MaxInt64 && uint64(timestamp)-uint64(limits.NowMs) > uint64(limits.TimestampAfterMaxMs) {
		return &Error{timestampField(index), fmt.Sprintf("timestamp %d is more than message.timestamp.after.max.ms %d after now %d", timestamp, limits.TimestampAfterMaxMs, limits.NowMs), codeInvalidTimestamp}
	}
	return nil
}

func timestampField(index int) string { return fmt.Sprintf("records[%d].timestampDelta", index) }
