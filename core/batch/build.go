package batch

import (
	"encoding/binary"
	"fmt"
)

// RecordHeader is one record header. Kafka header keys are never null.
type RecordHeader struct {
	Key   string
	Value []byte // nil is a null value
}

// Record is one record to build. A nil Key or Value is written as null (-1),
// an empty non-nil one as zero bytes.
type Record struct {
	Key, Value []byte
	Headers    []RecordHeader
	// TimestampDelta is added to BuildSpec.FirstTimestamp.
	TimestampDelta int64
}

// BuildSpec describes a batch for Build.
type BuildSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	FirstTimestamp       int64
	// Idempotent writes ProducerID, ProducerEpoch and BaseSequence. Without
	// it all three are -1 whatever they hold, so a zero BuildSpec does not
	// claim to come from producer 0.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
	// Records must not be empty; offset deltas are their indexes.
	Records []Record
}

// Build encodes a valid RecordBatch v2: tests, the simulator's clients and
// the broker's internal topics use it. MaxTimestamp is FirstTimestamp plus
// the largest TimestampDelta. It panics on a spec no caller should make (no
// records, an unknown codec), because those are bugs, not input.
func Build(spec BuildSpec) []byte {
	if len(spec.Records) == 0 {
		panic("batch: Build needs at least one record")
	}
	var raw []byte
	maxDelta := spec.Records[0].TimestampDelta
	for i := range spec.Records {
		raw = appendRecord(raw, &spec.Records[i], i)
		maxDelta = max(maxDelta, spec.Records[i].TimestampDelta)
	}
	records, err := Compress(spec.Codec, raw)
	if err != nil {
		panic(fmt.Sprintf("batch: Build with codec %v: %v", spec.Codec, err))
	}
	attributes := int16(spec.Codec)
	if spec.Transactional {
		attributes |= AttrTransactional
	}
	producerID, producerEpoch, baseSequence := int64(-1), int16(-1), int32(-1)
	if spec.Idempotent {
		producerID, producerEpoch, baseSequence = spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence
	}
	b := Assemble(Header{
		BaseOffset:           spec.BaseOffset,
		PartitionLeaderEpoch: spec.PartitionLeaderEpoch,
		Attributes:           attributes,
		LastOffsetDelta:      int32(len(spec.Records) - 1),
		FirstTimestamp:       spec.FirstTimestamp,
		MaxTimestamp:         spec.FirstTimestamp + maxDelta,
		ProducerID:           producerID,
		ProducerEpoch:        producerEpoch,
		BaseSequence:         baseSequence,
		RecordCount:          int32(len(spec.Records)),
	}, records)
	if _, err := Verify(b); err != nil {
		panic(fmt.Sprintf("batch: Build produced a batch Verify rejects: %v", err))
	}
	return b
}

// appendRecord appends r, record number index, in the v2 record format.
func appendRecord(dst []byte, r *Record, index int) []byte {
	body := make([]byte, 0, 16+len(r.Key)+len(r.Value))
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, int64(index))
	body = appendNullableBytes(body, r.Key)
	body = appendNullableBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendNullableBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

func appendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
