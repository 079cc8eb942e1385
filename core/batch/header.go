// Package batch reads, checks, builds and stamps Kafka RecordBatch v2
// (magic 2) bytes exactly as they travel on the wire and lie on disk.
//
// Verify is the cheap structural check the log runs on every append and on
// recovery (one CRC, no decompression). CheckProduced is everything a broker
// checks on a batch from a client, decompression and every record included.
// PrecheckProduced and Precheck.Finish split it: the part the bytes alone
// decide, which realnet runs on connection goroutines, and the topic's and
// the clock's rules, which the event loop applies. Build and Compress make batches
// for tests, the simulator's clients and internal topics.
//
// What it must not do: every function here is pure. No I/O, no clock (the
// caller passes NowMs), no goroutines (lz4 and zstd run with concurrency one,
// with coders made per call), no state shared between calls, and no
// allocation beyond what a result or a decompressed buffer needs, bounded by
// the caller's limits. Every rejection is an *Error naming the field.
//
// Ownership: functions that take a []byte never retain it, except where the
// result is documented to alias it. SetBaseOffset, SetPartitionLeaderEpoch
// and SetMaxTimestamp write into the caller's batch.
//
// Every header field is written here, by name (Assemble and the Set
// functions): callers never write a batch header at a byte offset.
package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Byte offsets of the RecordBatch v2 header fields (KAFKA-NOTES.md, SPEC.md §3.1).
const (
	offsetBaseOffset           = 0
	offsetLength               = 8
	offsetPartitionLeaderEpoch = 12
	offsetMagic                = 16
	offsetCRC                  = 17
	offsetAttributes           = 21
	offsetLastOffsetDelta      = 23
	offsetFirstTimestamp       = 27
	offsetMaxTimestamp         = 35
	offsetProducerID           = 43
	offsetProducerEpoch        = 51
	offsetBaseSequence         = 53
	offsetRecordCount          = 57

	// HeaderBytes is the size of a RecordBatch v2 header, up to the records.
	HeaderBytes = 61
	// LogOverheadBytes is the BaseOffset and Length prefix that Length does
	// not count.
	LogOverheadBytes = 12
	// Magic is the only batch format Strand accepts.
	Magic = 2
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// TotalBytes is the batch's size on the wire and on disk.
func (h *Header) TotalBytes() int64 { return LogOverheadBytes + int64(h.Length) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec in the attributes.
func (h *Header) Codec() Codec { return Codec(h.Attributes & AttrCodecMask) }

// IsControl reports whether this is a control batch (transaction markers).
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// ParseHeader decodes the header at the start of b. It checks only that the
// header fits; Verify validates the whole batch.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderBytes {
		return Header{}, errCorrupt("length", fmt.Sprintf("have %d bytes, a header needs %d", len(b), HeaderBytes))
	}
	return Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offsetBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offsetLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offsetPartitionLeaderEpoch:])),
		Magic:                int8(b[offsetMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offsetCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offsetAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offsetLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offsetFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offsetMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offsetProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offsetProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offsetBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offsetRecordCount:])),
	}, nil
}

// Assemble encodes a new batch of header h followed by records, which are
// already encoded (and compressed) in h's codec. Every field of h is written
// but three that the result decides: Length (from records), Magic (always
// Magic) and the CRC (computed over the result). It is how a batch is built
// or rebuilt with some of its header fields changed: the cleaner keeping
// some records, the broker recompressing into a topic's codec. Neither h
// nor records is retained.
func Assemble(h Header, records []byte) []byte {
	b := make([]byte, HeaderBytes, HeaderBytes+len(records))
	binary.BigEndian.PutUint64(b[offsetBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offsetLength:], uint32(HeaderBytes-LogOverheadBytes+len(records)))
	binary.BigEndian.PutUint32(b[offsetPartitionLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offsetMagic] = Magic
	binary.BigEndian.PutUint16(b[offsetAttributes:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offsetFirstTimestamp:], uint64(h.FirstTimestamp))
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[offsetProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offsetProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offsetBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offsetRecordCount:], uint32(h.RecordCount))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[offsetCRC:], ComputeCRC(b))
	return b
}

// ComputeCRC returns the CRC-32C of a whole batch, over Attributes to the end.
func ComputeCRC(b []byte) uint32 { return crc32.Checksum(b[offsetAttributes:], castagnoli) }

// SetBaseOffset stamps the batch's base offset in place. The CRC does not
// cover it, so the batch stays valid.
func SetBaseOffset(b []byte, baseOffset int64) {
	binary.BigEndian.PutUint64(b[offsetBaseOffset:], uint64(baseOffset))
}

// SetPartitionLeaderEpoch stamps the leader epoch in place; outside the CRC too.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offsetPartitionLeaderEpoch:], uint32(epoch))
}

// SetMaxTimestamp stamps the batch's timestamp type and MaxTimestamp in place
// and recomputes the CRC, as Kafka's DefaultRecordBatch.setMaxTimestamp does
// after validation: with ProducedInfo.MaxTimestamp for CreateTime topics
// (producers' header values are not trusted), and with the append time for
// LogAppendTime topics, whose consumers read every record's timestamp from
// MaxTimestamp. It leaves the batch untouched, CRC included, when both
// already match. b must be a batch Verify accepted.
func SetMaxTimestamp(b []byte, timestampType TimestampType, maxTimestampMs int64) {
	attributes := binary.BigEndian.Uint16(b[offsetAttributes:]) &^ AttrLogAppendTime
	if timestampType == LogAppendTime {
		attributes |= AttrLogAppendTime
	}
	if binary.BigEndian.Uint16(b[offsetAttributes:]) == attributes &&
		int64(binary.BigEndian.Uint64(b[offsetMaxTimestamp:])) == maxTimestampMs {
		return
	}
	binary.BigEndian.PutUint16(b[offsetAttributes:], attributes)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], uint64(maxTimestampMs))
	binary.BigEndian.PutUint32(b[offsetCRC:], ComputeCRC(b))
}
