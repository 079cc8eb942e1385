package batch

import (
	"encoding/binary"
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
//   - one whole batch only, of magic 2, BaseOffset 0, at most
//     limits.BatchBytesMax bytes (INVALID_RECORD when the bytes hold no
//     whole batch, as Kafka);
//   - Verify but its count rules (CORRUPT_MESSAGE);
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
// *Error. PrecheckProduced and Precheck.Finish split the same checks into a
// part that needs only the bytes and a part that needs the topic and clock.
func CheckProduced(b []byte, limits ProduceLimits) (ProducedInfo, error) {
	limits.mustBeValid()
	w := walkProduced(b, limits.BatchBytesMax, limits.DecompressedBytesMax, &limits)
	if w.err != nil {
		return ProducedInfo{}, w.err
	}
	return w.info(limits), nil
}

// Precheck is what PrecheckProduced learned from a batch's bytes alone: the
// first fault they hold, if any, and what the topic- and clock-dependent
// checks need (the keys seen null, the timestamp range, the decompressed
// size), so that Finish can complete CheckProduced without decompressing
// again. It describes the batch it was made from and no other.
type Precheck struct {
	w walked
	// decompressedBytesMax is the bound the pre-check decompressed with. A
	// codec's verdict depends on its bound (zstd refuses a frame whose window
	// exceeds it), so it decides only for topics with the same bound.
	decompressedBytesMax int
}

// PrecheckProduced runs every check of CheckProduced that needs only b and
// the bound decompressedBytesMax: framing, Verify, the header rules,
// decompression and the walk over every record. It skips what depends on
// the topic and the clock (max.message.bytes, keys on compacted topics,
// timestamp bounds, LogAppendTime), recording instead what Finish needs to
// apply them. It never fails: a fault in the bytes is kept in the Precheck
// and reported by Finish, after any earlier fault only the topic can see, so
// that the error is exactly the one CheckProduced would return.
//
// It is pure and does not retain b; realnet runs it on connection goroutines
// so that decompression stays off the event loop (CLARIFICATIONS.md, "Zero
// copy and mmap ... Snappy"). decompressedBytesMax must be positive and at
// most math.MaxInt32.
func PrecheckProduced(b []byte, decompressedBytesMax int) Precheck {
	if decompressedBytesMax <= 0 || decompressedBytesMax > math.MaxInt32 {
		panic(fmt.Sprintf("batch: invalid pre-check decompression bound %d", decompressedBytesMax))
	}
	return Precheck{w: walkProduced(b, math.MaxInt, decompressedBytesMax, nil), decompressedBytesMax: decompressedBytesMax}
}

// Finish completes the checks of a batch that PrecheckProduced examined,
// against the topic's limits and the clock, and returns exactly what
// CheckProduced(b, limits) would. b must be the very batch, unmodified, that
// the Precheck was made from. When the verdict hinges on the topic (the batch
// is over its size bound, or may break its key or timestamp rules) or the
// batch was decompressed with another bound than the topic's, Finish runs
// CheckProduced itself, so that the error names the first faulty field in
// CheckProduced's order. That happens only for rejected batches and for
// compressed ones on topics whose max.message.bytes sets another
// decompression bound than the pre-check's.
func (p *Precheck) Finish(b []byte, limits ProduceLimits) (ProducedInfo, error) {
	limits.mustBeValid()
	otherBound := p.w.decompressed && p.decompressedBytesMax != limits.DecompressedBytesMax
	if otherBound || len(b) > limits.BatchBytesMax || p.w.mayBreak(&limits) {
		return CheckProduced(b, limits)
	}
	if p.w.err != nil {
		return ProducedInfo{}, p.w.err
	}
	return p.w.info(limits), nil
}

// Passed reports whether the bytes passed every check PrecheckProduced runs
// (no fault in the framing, CRC, header, compression or any record). Finish
// may still refuse the batch on the topic's or the clock's rules. The
// broker's pre-check recompresses only batches that passed, so that broken
// input costs no compression.
func (p *Precheck) Passed() bool { return p.w.err == nil }

// walked is the outcome of walkProduced: the first fault found, and what was
// learned about the records before it.
type walked struct {
	err    *Error
	header Header
	// decompressed is set once the walk reached a compressed records section,
	// whatever the outcome.
	decompressed bool
	// records counts the records walked and found well formed; the other
	// fields describe them.
	records int32
	// maxTimestamp and maxTimestampOffsetDelta follow ProducedInfo's
	// CreateTime rule: the largest timestamp above NoTimestamp and the first
	// record carrying it.
	maxTimestamp            int64
	maxTimestampOffsetDelta int32
	// lowestTimestamp and highestTimestamp bound every timestamp other than
	// NoTimestamp; lowestTimestamp > highestTimestamp when there is none.
	lowestTimestamp  int64
	highestTimestamp int64
	// sawNullKey is set when a walked record has a null key.
	sawNullKey bool
}

// walkProduced runs CheckProduced's checks in its order. With enforce nil it
// skips the key and timestamp rules and only records what they need.
func walkProduced(b []byte, batchBytesMax, decompressedBytesMax int, enforce *ProduceLimits) walked {
	w := walked{maxTimestamp: NoTimestamp, maxTimestampOffsetDelta: -1, lowestTimestamp: math.MaxInt64, highestTimestamp: math.MinInt64}
	if w.err = checkProducedFraming(b, batchBytesMax); w.err != nil {
		return w
	}
	h, ferr := verifyFrame(b, true)
	if ferr != nil {
		w.err = ferr
		return w
	}
	w.header = h
	if w.err = checkProducedHeader(&h); w.err != nil {
		return w
	}
	records := b[HeaderBytes:]
	if h.Codec() != CodecNone {
		w.decompressed = true
		var err error
		if records, err = decompress(h.Codec(), records, decompressedBytesMax); err != nil {
			code := codeCorrupt
			if errors.Is(err, errDecompressedTooLarge) {
				code = codeTooLarge
			}
			w.err = &Error{"records", fmt.Sprintf("%s records: %v", h.Codec(), err), code}
			return w
		}
	}
	w.err = w.checkRecords(records, enforce)
	return w
}

// mayBreak reports whether the records walked could break the topic's key or
// timestamp rules. Both rules are monotone, so the lowest and highest
// timestamps decide for every record between them.
func (w *walked) mayBreak(limits *ProduceLimits) bool {
	if limits.RequireKeys && w.sawNullKey {
		return true
	}
	if limits.TimestampType != CreateTime || w.lowestTimestamp > w.highestTimestamp {
		return false
	}
	return checkTimestamp(w.lowestTimestamp, 0, *limits) != nil || checkTimestamp(w.highestTimestamp, 0, *limits) != nil
}

// info is the ProducedInfo of a batch the walk accepted.
func (w *walked) info(limits ProduceLimits) ProducedInfo {
	h := w.header
	if w.records != h.RecordCount {
		panic(fmt.Sprintf("batch: walked %d records, header says %d", w.records, h.RecordCount)) // checkRecords compares them
	}
	info := ProducedInfo{
		Header:                  h,
		RecordCount:             w.records,
		MaxTimestamp:            w.maxTimestamp,
		MaxTimestampOffsetDelta: w.maxTimestampOffsetDelta,
		ProducerID:              h.ProducerID,
		ProducerEpoch:           h.ProducerEpoch,
		BaseSequence:            h.BaseSequence,
		Transactional:           h.Attributes&AttrTransactional != 0,
	}
	if limits.TimestampType == LogAppendTime {
		info.MaxTimestamp = limits.NowMs
		info.MaxTimestampOffsetDelta = h.LastOffsetDelta
	}
	return info
}

// mustBeValid panics on limits no configuration should produce.
func (l *ProduceLimits) mustBeValid() {
	if l.BatchBytesMax <= 0 || l.DecompressedBytesMax <= 0 || l.DecompressedBytesMax > math.MaxInt32 || l.TimestampBeforeMaxMs < 0 || l.TimestampAfterMaxMs < 0 ||
		(l.TimestampType != CreateTime && l.TimestampType != LogAppendTime) {
		panic(fmt.Sprintf("batch: invalid produce limits %+v", *l))
	}
}

// checkProducedFraming applies the checks Kafka makes before it looks inside
// the batch: one whole magic 2 batch, offset 0, size within
// max.message.bytes.
//
// Kafka's ProduceRequest.validateRecords reads the batches as its
// ByteBufferLogInputStream does: bytes too few to hold a batch's length and
// magic, or fewer than its length says, hold no batch, which it refuses with
// INVALID_RECORD ("at least one record batch"), as it does magic 0 or 1 (a
// v3+ produce carries magic 2 only). A length below a legacy record's
// overhead or a magic above 2 it finds corrupt, and checks those first.
func checkProducedFraming(b []byte, batchBytesMax int) *Error {
	noBatch := func(why string) *Error {
		return errInvalid("length", why+": no record batch; a v2 produce carries exactly one per partition")
	}
	if len(b) < LogOverheadBytes {
		return noBatch(fmt.Sprintf("%d bytes", len(b)))
	}
	length := int32(binary.BigEndian.Uint32(b[offsetLength:]))
	if length < legacyRecordOverheadBytes {
		return errCorrupt("length", fmt.Sprintf("length %d is below the smallest record's %d", length, legacyRecordOverheadBytes))
	}
	if len(b) < offsetMagic+1 {
		return noBatch(fmt.Sprintf("%d bytes", len(b)))
	}
	magic := int8(b[offsetMagic])
	if magic < 0 || magic > Magic {
		return errCorrupt("magic", fmt.Sprintf("magic %d, only %d is supported", magic, Magic))
	}
	if total := int64(length) + LogOverheadBytes; total > int64(len(b)) {
		return noBatch(fmt.Sprintf("length %d says the batch is %d bytes, but %d bytes were given", length, total, len(b)))
	}
	if magic != Magic {
		return errInvalid("magic", fmt.Sprintf("magic %d: a v3+ produce carries magic %d batches only", magic, Magic))
	}
	if len(b) >= HeaderBytes {
		h, _ := ParseHeader(b)
		if h.Length >= 0 && h.TotalBytes() < int64(len(b)) {
			return errInvalid("length", fmt.Sprintf("%d bytes hold more than one batch (the first is %d bytes); a v2 produce carries exactly one per partition", len(b), h.TotalBytes()))
		}
		if h.BaseOffset != 0 {
			return errInvalid("baseOffset", fmt.Sprintf("base offset %d, a produced batch must start at 0", h.BaseOffset))
		}
	}
	if len(b) > batchBytesMax {
		return &Error{"length", fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", len(b), batchBytesMax), codeTooLarge}
	}
	return nil
}

// legacyRecordOverheadBytes is the smallest length Kafka's batch reader
// accepts (LegacyRecord.RECORD_OVERHEAD_V0); below it the bytes are corrupt.
const legacyRecordOverheadBytes = 14

// checkProducedHeader applies LogValidator.validateBatch's rules for batches
// from clients, on a header verifyFrame accepted. Its count rule implies
// every rule of verifyCounts, which Kafka would answer INVALID_RECORD too.
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

// checkRecords walks the decompressed records, checking each, and records
// their count and timestamps in w. With enforce set it also applies the key
// and timestamp rules, record by record, as CheckProduced does.
func (w *walked) checkRecords(records []byte, enforce *ProduceLimits) *Error {
	h := &w.header
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
		timestamp := h.FirstTimestamp + r.timestampDelta
		if enforce != nil {
			if enforce.RequireKeys && r.keyIsNull {
				return errInvalid(fmt.Sprintf("records[%d].key", index), "compacted topics need a key on every record")
			}
			if enforce.TimestampType == CreateTime && timestamp != NoTimestamp {
				if err := checkTimestamp(timestamp, index, *enforce); err != nil {
					return err
				}
			}
		}
		w.sawNullKey = w.sawNullKey || r.keyIsNull
		if timestamp != NoTimestamp {
			w.lowestTimestamp = min(w.lowestTimestamp, timestamp)
			w.highestTimestamp = max(w.highestTimestamp, timestamp)
		}
		if timestamp > w.maxTimestamp {
			w.maxTimestamp = timestamp
			w.maxTimestampOffsetDelta = r.offsetDelta
		}
		w.records++
	}
	if w.records != h.RecordCount {
		return errInvalid("recordCount", fmt.Sprintf("header declares %d records, %d are present", h.RecordCount, w.records))
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
