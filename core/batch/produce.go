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
	// DecompressedBytes is what its records took decompressed, 0 if they
	// were not compressed: what decompressing them again (to recompress
	// them) costs the request's DecompressionBudget.
	DecompressedBytes int
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
// *Error.
func CheckProduced(b []byte, limits ProduceLimits) (ProducedInfo, error) {
	return CheckProducedWithin(b, limits, nil)
}

// CheckProducedWithin is CheckProduced for one batch of a produce request
// whose batches share budget: a compressed batch is refused
// MESSAGE_TOO_LARGE, after the checks that come before decompression, when
// the budget is spent, and so is the batch whose records take it past its
// bound (DecompressionBudget). A nil budget bounds nothing.
func CheckProducedWithin(b []byte, limits ProduceLimits, budget *DecompressionBudget) (ProducedInfo, error) {
	limits.mustBeValid()
	w := walkProduced(b, &limits, budget)
	if w.err != nil {
		return ProducedInfo{}, w.err
	}
	return w.info(limits), nil
}

// DecompressionBudget is what the batches of one produce request may
// decompress in all, taken in the order they are checked
// (strand.produce.request.decompressed.bytes.max). A compressed batch met
// once the budget is spent is refused without being decompressed; the batch
// whose records take it past its bound is refused too, so the records
// accepted from one request decompress to at most the bound, and the
// request costs at most the bound plus one batch's decompression
// (ProduceLimits.DecompressedBytesMax). A batch whose decompression fails
// is charged that whole per-batch bound, the work it may have cost. It is
// used by one goroutine at a time.
type DecompressionBudget struct {
	bytesMax int64
	spent    int64
}

// NewDecompressionBudget returns a budget of bytesMax decompressed bytes,
// which must be positive.
func NewDecompressionBudget(bytesMax int64) *DecompressionBudget {
	if bytesMax <= 0 {
		panic(fmt.Sprintf("batch: decompression budget %d is not positive", bytesMax))
	}
	return &DecompressionBudget{bytesMax: bytesMax}
}

// Spent is the decompressed bytes charged so far.
func (d *DecompressionBudget) Spent() int64 { return d.spent }

// exhausted reports whether nothing more may be decompressed. A nil budget
// never is.
func (d *DecompressionBudget) exhausted() bool { return d != nil && d.spent >= d.bytesMax }

// ChargeAgain charges bytes decompressed a second time, to recompress a
// checked batch (ProducedInfo.DecompressedBytes), and returns the
// MESSAGE_TOO_LARGE *Error naming the limit if the budget cannot hold them.
func (d *DecompressionBudget) ChargeAgain(bytes int) error {
	if d.Charge(bytes) {
		return nil
	}
	return d.refusal()
}

// Charge adds bytes decompressed and reports whether the budget still holds
// them: the checks charge what they decompress, and a recompression charges
// its decompression again (ProducedInfo.DecompressedBytes).
func (d *DecompressionBudget) Charge(bytes int) bool {
	if d == nil {
		return true
	}
	d.spent += int64(bytes)
	return d.spent <= d.bytesMax
}

// refusal is the error of a batch the budget refuses.
func (d *DecompressionBudget) refusal() *Error {
	return &Error{"records", fmt.Sprintf("the produce request's batches decompress to more than strand.produce.request.decompressed.bytes.max (%d bytes)", d.bytesMax), codeTooLarge}
}

// Precheck is a batch checked off the event loop by PrecheckProduced,
// against a topic's limits as the connection goroutine knew them: the
// verdict, and the limits it was reached under, so that Finish can trust it
// for the same rules. It describes the batch it was made from and no other.
type Precheck struct {
	w      walked
	limits ProduceLimits
}

// PrecheckProduced runs CheckProducedWithin on b off the event loop
// (CLARIFICATIONS.md, "Zero copy and mmap ... Snappy"), with the topic's
// limits as the caller last knew them and the caller's clock reading as
// limits.NowMs: the batch is validated when it is pre-checked, as Kafka
// validates it when a request handler thread takes the request. Finish
// completes it on the loop.
//
// It is pure and does not retain b; realnet runs it on connection
// goroutines so that decompression stays off the event loop.
func PrecheckProduced(b []byte, limits ProduceLimits, budget *DecompressionBudget) Precheck {
	limits.mustBeValid()
	return Precheck{w: walkProduced(b, &limits, budget), limits: limits}
}

// Finish returns the pre-check's verdict on b, which must be the very batch,
// unmodified, it was made from, for a topic whose limits are now limits:
// when they hold the same rules as the pre-check's (NowMs aside: the batch
// was validated at its pre-check), the verdict stands and nothing is
// decompressed; LogAppendTime stamps limits.NowMs. When the topic's
// configuration changed in between, Finish runs CheckProducedWithin itself
// on budget, and its answer is that one.
func (p *Precheck) Finish(b []byte, limits ProduceLimits, budget *DecompressionBudget) (ProducedInfo, error) {
	limits.mustBeValid()
	if !p.limits.sameRules(limits) {
		return CheckProducedWithin(b, limits, budget)
	}
	if p.w.err != nil {
		return ProducedInfo{}, p.w.err
	}
	return p.w.info(limits), nil
}

// DecompressedBytes is what the batch's records took decompressed (0 if
// they were not compressed, or the pre-check stopped before).
func (p *Precheck) DecompressedBytes() int { return p.w.decompressedBytes }

// Passed reports whether the batch passed the pre-check. The broker's
// pre-check recompresses only batches that passed, so that broken input
// costs no compression.
func (p *Precheck) Passed() bool { return p.w.err == nil }

// sameRules reports whether l and o judge every batch alike at the same
// moment: every field equal but NowMs.
func (l ProduceLimits) sameRules(o ProduceLimits) bool {
	o.NowMs = l.NowMs
	return l == o
}

// walked is the outcome of walkProduced: the first fault found, and what was
// learned about the records before it.
type walked struct {
	err    *Error
	header Header
	// records counts the records walked and found well formed; the other
	// fields describe them.
	records int32
	// maxTimestamp and maxTimestampOffsetDelta follow ProducedInfo's
	// CreateTime rule: the largest timestamp above NoTimestamp and the first
	// record carrying it.
	maxTimestamp            int64
	maxTimestampOffsetDelta int32
	// decompressedBytes is ProducedInfo.DecompressedBytes.
	decompressedBytes int
}

// walkProduced runs CheckProduced's checks in its order, charging budget
// for decompression.
func walkProduced(b []byte, limits *ProduceLimits, budget *DecompressionBudget) walked {
	w := walked{maxTimestamp: NoTimestamp, maxTimestampOffsetDelta: -1}
	if w.err = checkProducedFraming(b, limits.BatchBytesMax); w.err != nil {
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
		if budget.exhausted() {
			w.err = budget.refusal()
			return w
		}
		var err error
		if records, err = decompress(h.Codec(), records, limits.DecompressedBytesMax); err != nil {
			budget.Charge(limits.DecompressedBytesMax)
			code := codeCorrupt
			if errors.Is(err, errDecompressedTooLarge) {
				code = codeTooLarge
			}
			w.err = &Error{"records", fmt.Sprintf("%s records: %v", h.Codec(), err), code}
			return w
		}
		if !budget.Charge(len(records)) {
			w.err = budget.refusal()
			return w
		}
		w.decompressedBytes = len(records)
	}
	w.err = w.checkRecords(records, limits)
	return w
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
		DecompressedBytes:       w.decompressedBytes,
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

// checkRecords walks the decompressed records, checking each against the
// record rules and the topic's key and timestamp rules, record by record,
// and records their count and timestamps in w.
func (w *walked) checkRecords(records []byte, limits *ProduceLimits) *Error {
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
		if limits.RequireKeys && r.keyIsNull {
			return errInvalid(fmt.Sprintf("records[%d].key", index), "compacted topics need a key on every record")
		}
		if limits.TimestampType == CreateTime && timestamp != NoTimestamp {
			if err := checkTimestamp(timestamp, index, *limits); err != nil {
				return err
			}
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
