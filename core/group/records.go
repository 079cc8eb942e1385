package group

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// Records in __consumer_offsets, in Kafka's own schemas so that Kafka's tools
// (kafka-console-consumer with the offsets formatter, kafka-dump-log) read
// ours. Every key and value opens with an int16 version; strings are int16
// length + UTF-8, nullable ones -1 for null; bytes are int32 length. The
// first flexible versions (value v4) use compact lengths and tagged fields.
//
//	OffsetCommitKey   version 1 (0 has the same layout): group, topic string; partition int32
//	OffsetCommitValue version 3: offset int64; leaderEpoch int32; metadata string; commitTimestamp int64
//	OffsetCommitValue version 1 (an offset with its own expire timestamp):
//	    offset int64; metadata string; commitTimestamp, expireTimestamp int64
//	GroupMetadataKey  version 2: group string
//	GroupMetadataValue version 3: protocolType string; generation int32;
//	    protocol, leader nullable string; currentStateTimestamp int64;
//	    members [memberId string; groupInstanceId nullable string;
//	    clientId, clientHost string; rebalanceTimeout, sessionTimeout int32;
//	    subscription, assignment bytes]
//
// A null value is a tombstone: the offset or the group is deleted.
// Strand writes the versions Kafka writes since 2.3 (value v3); it reads
// value versions 0 to 4 and key versions 0 to 2, and skips records of the
// newer (KIP-848 and later) key versions it does not serve.
const (
	keyVersionOffsetCommitV0  = 0
	keyVersionOffsetCommit    = 1
	keyVersionGroupMetadata   = 2
	offsetValueVersionWritten = 3
	offsetValueVersionExpiry  = 1
	groupValueVersionWritten  = 3
	valueVersionMax           = 4
)

// LogRecord is one record of the __consumer_offsets partition as Load takes
// it. A nil Value is a tombstone. Load does not keep either slice.
type LogRecord struct {
	Key, Value []byte
}

// topicPartition names one committed offset within a group.
type topicPartition struct {
	topic     string
	partition int32
}

// offsetValue is a committed offset (OffsetCommitValue).
type offsetValue struct {
	offset            int64
	leaderEpoch       int32
	metadata          string
	commitTimestampMs int64
	// hasExpireTimestamp: the commit named its own retention (OffsetCommit
	// v2-v4's retention time), so the offset expires at expireTimestampMs
	// instead of by offsets.retention.minutes (expiry.go). Such a value is
	// written as OffsetCommitValue v1, the only version with the field, as
	// Kafka writes it.
	hasExpireTimestamp bool
	expireTimestampMs  int64
}

// groupValue is a group's persisted metadata (GroupMetadataValue).
type groupValue struct {
	protocolType     string
	generation       int32
	protocol         *string
	leader           *string
	stateTimestampMs int64
	members          []memberValue
}

// memberValue is one member in a GroupMetadataValue.
type memberValue struct {
	memberID           string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	subscription       []byte
	assignment         []byte
}

func appendInt16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func appendString(b []byte, s string) []byte {
	if len(s) > 1<<15-1 {
		panic(fmt.Sprintf("group: string of %d bytes does not fit an int16 length", len(s)))
	}
	b = appendInt16(b, int16(len(s)))
	return append(b, s...)
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return appendInt16(b, -1)
	}
	return appendString(b, *s)
}

func appendBytes(b, v []byte) []byte {
	b = appendInt32(b, int32(len(v)))
	return append(b, v...)
}

// offsetKeyBytes is an OffsetCommitKey v1.
func offsetKeyBytes(groupID string, tp topicPartition) []byte {
	b := appendInt16(nil, keyVersionOffsetCommit)
	b = appendString(b, groupID)
	b = appendString(b, tp.topic)
	return appendInt32(b, tp.partition)
}

// offsetValueBytes is an OffsetCommitValue v3, or v1 for an offset with
// its own expire timestamp (v1 has no leader epoch: such commits come from
// OffsetCommit versions that carry none).
func offsetValueBytes(v offsetValue) []byte {
	if v.hasExpireTimestamp {
		b := appendInt16(nil, offsetValueVersionExpiry)
		b = appendInt64(b, v.offset)
		b = appendString(b, v.metadata)
		b = appendInt64(b, v.commitTimestampMs)
		return appendInt64(b, v.expireTimestampMs)
	}
	b := appendInt16(nil, offsetValueVersionWritten)
	b = appendInt64(b, v.offset)
	b = appendInt32(b, v.leaderEpoch)
	b = appendString(b, v.metadata)
	return appendInt64(b, v.commitTimestampMs)
}

// groupKeyBytes is a GroupMetadataKey v2.
func groupKeyBytes(groupID string) []byte {
	return appendString(appendInt16(nil, keyVersionGroupMetadata), groupID)
}

// groupValueBytes is a GroupMetadataValue v3.
func groupValueBytes(v *groupValue) []byte {
	b := appendInt16(nil, groupValueVersionWritten)
	b = appendString(b, v.protocolType)
	b = appendInt32(b, v.generation)
	b = appendNullableString(b, v.protocol)
	b = appendNullableString(b, v.leader)
	b = appendInt64(b, v.stateTimestampMs)
	b = appendInt32(b, int32(len(v.members)))
	for i := range v.members {
		m := &v.members[i]
		b = appendString(b, m.memberID)
		b = appendNullableString(b, m.instanceID)
		b = appendString(b, m.clientID)
		b = appendString(b, m.clientHost)
		b = appendInt32(b, m.rebalanceTimeoutMs)
		b = appendInt32(b, m.sessionTimeoutMs)
		b = appendBytes(b, m.subscription)
		b = appendBytes(b, m.assignment)
	}
	return b
}

// reader decodes one key or value, remembering the first fault with the
// field it was reading.
type reader struct {
	buf      []byte
	pos      int
	flexible bool
	err      error
}

func (r *reader) fail(field, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("field %s at byte %d: %s", field, r.pos, why)
	}
}

func (r *reader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf)-r.pos {
		r.fail(field, fmt.Sprintf("needs %d bytes, %d left", n, len(r.buf)-r.pos))
		return nil
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) int16(field string) int16 {
	b := r.take(field, 2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) int32(field string) int32 {
	b := r.take(field, 4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) int64(field string) int64 {
	b := r.take(field, 8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 || n > 5 {
		r.fail(field, "malformed unsigned varint")
		return 0
	}
	r.pos += n
	return v
}

// length reads a length: int16 (strings) or int32 (bytes, arrays) in
// non-flexible versions, uvarint length+1 in flexible ones. -1 is null.
func (r *reader) length(field string, wide bool) int {
	if r.flexible {
		return int(r.uvarint(field)) - 1
	}
	if wide {
		return int(r.int32(field))
	}
	return int(r.int16(field))
}

func (r *reader) nullableString(field string) *string {
	n := r.length(field, false)
	if r.err != nil || n < 0 {
		if n < -1 {
			r.fail(field, fmt.Sprintf("negative length %d", n))
		}
		return nil
	}
	s := string(r.take(field, n))
	return &s
}

func (r *reader) string(field string) string {
	s := r.nullableString(field)
	if s == nil {
		r.fail(field, "null where a string is required")
		return ""
	}
	return *s
}

func (r *reader) bytes(field string) []byte {
	n := r.length(field, true)
	if n < 0 {
		r.fail(field, "null where bytes are required")
		return nil
	}
	return append([]byte{}, r.take(field, n)...)
}

// skipTags skips a flexible struct's tagged fields; Strand knows none.
func (r *reader) skipTags(field string) {
	if !r.flexible {
		return
	}
	count := r.uvarint(field + ".tags")
	for i := uint64(0); i < count && r.err == nil; i++ {
		r.uvarint(field + ".tag")
		r.take(field+".tag", int(r.uvarint(field+".tagSize")))
	}
}

func (r *reader) finish(what string) error {
	if r.err == nil && r.pos != len(r.buf) {
		r.fail("end", fmt.Sprintf("%d trailing bytes", len(r.buf)-r.pos))
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	return nil
}

// errSkippedRecord marks a record of a type this coordinator does not serve
// (KIP-848 consumer groups, share groups, transactions' markers): Load
// skips it, as Kafka skips record types it does not know.
var errSkippedRecord = errors.New("record type not served")

// parsedRecord is one decoded __consumer_offsets record. Exactly one of
// offsetKey or groupID names what it is about; a nil value is a tombstone.
type parsedRecord struct {
	groupID string
	isGroup bool
	tp      topicPartition
	offset  *offsetValue
	group   *groupValue
}

// parseRecord decodes one record's key and value.
func parseRecord(rec LogRecord) (parsedRecord, error) {
	var p parsedRecord
	if len(rec.Key) < 2 {
		return p, fmt.Errorf("key of %d bytes has no version", len(rec.Key))
	}
	r := reader{buf: rec.Key}
	version := r.int16("key.version")
	switch version {
	case keyVersionOffsetCommitV0, keyVersionOffsetCommit:
		p.groupID = r.string("key.group")
		p.tp.topic = r.string("key.topic")
		p.tp.partition = r.int32("key.partition")
		if err := r.finish("OffsetCommitKey"); err != nil {
			return p, err
		}
		if rec.Value == nil {
			return p, nil
		}
		v, err := parseOffsetValue(rec.Value)
		p.offset = &v
		return p, err
	case keyVersionGroupMetadata:
		p.isGroup = true
		p.groupID = r.string("key.group")
		if err := r.finish("GroupMetadataKey"); err != nil {
			return p, err
		}
		if rec.Value == nil {
			return p, nil
		}
		v, err := parseGroupValue(rec.Value)
		p.group = &v
		return p, err
	}
	if version < 0 {
		return p, fmt.Errorf("key version %d is negative", version)
	}
	return p, fmt.Errorf("key version %d: %w", version, errSkippedRecord)
}

func valueReader(b []byte, what string) (reader, int16, error) {
	r := reader{buf: b}
	version := r.int16(what + ".version")
	if r.err != nil || version < 0 || version > valueVersionMax {
		return r, version, fmt.Errorf("%s version %d is not 0 to %d", what, version, valueVersionMax)
	}
	r.flexible = version >= 4
	return r, version, nil
}

func parseOffsetValue(b []byte) (offsetValue, error) {
	v := offsetValue{leaderEpoch: -1}
	r, version, err := valueReader(b, "OffsetCommitValue")
	if err != nil {
		return v, err
	}
	v.offset = r.int64("offset")
	if version >= 3 {
		v.leaderEpoch = r.int32("leaderEpoch")
	}
	v.metadata = r.string("metadata")
	v.commitTimestampMs = r.int64("commitTimestamp")
	if version == 1 {
		// Kafka writes -1 for "no expire timestamp".
		if expire := r.int64("expireTimestamp"); expire != -1 {
			v.hasExpireTimestamp, v.expireTimestampMs = true, expire
		}
	}
	r.skipTags("OffsetCommitValue")
	return v, r.finish(fmt.Sprintf("OffsetCommitValue v%d", version))
}

func parseGroupValue(b []byte) (groupValue, error) {
	v := groupValue{stateTimestampMs: -1}
	r, version, err := valueReader(b, "GroupMetadataValue")
	if err != nil {
		return v, err
	}
	v.protocolType = r.string("protocolType")
	v.generation = r.int32("generation")
	v.protocol = r.nullableString("protocol")
	v.leader = r.nullableString("leader")
	if version >= 2 {
		v.stateTimestampMs = r.int64("currentStateTimestamp")
	}
	count := r.length("members", true)
	if count < 0 || count > len(b) {
		r.fail("members", fmt.Sprintf("count %d", count))
	}
	for i := 0; i < count && r.err == nil; i++ {
		var m memberValue
		field := fmt.Sprintf("members[%d]", i)
		m.memberID = r.string(field + ".memberId")
		if version >= 3 {
			m.instanceID = r.nullableString(field + ".groupInstanceId")
		}
		m.clientID = r.string(field + ".clientId")
		m.clientHost = r.string(field + ".clientHost")
		m.rebalanceTimeoutMs = -1
		if version >= 1 {
			m.rebalanceTimeoutMs = r.int32(field + ".rebalanceTimeout")
		}
		m.sessionTimeoutMs = r.int32(field + ".sessionTimeout")
		if version == 0 {
			m.rebalanceTimeoutMs = m.sessionTimeoutMs
		}
		m.subscription = r.bytes(field + ".subscription")
		m.assignment = r.bytes(field + ".assignment")
		r.skipTags(field)
		v.members = append(v.members, m)
	}
	r.skipTags("GroupMetadataValue")
	return v, r.finish(fmt.Sprintf("GroupMetadataValue v%d", version))
}

// DecodeBatch returns the records of one uncompressed RecordBatch v2 from
// the __consumer_offsets log, for Load. The coordinator writes its batches
// uncompressed; a compressed batch (which only another writer could have
// produced) is refused with an error naming the codec, for the caller to
// decompress first. Key and Value alias b.
func DecodeBatch(b []byte) ([]LogRecord, error) {
	h, err := batch.Verify(b)
	if err != nil {
		return nil, fmt.Errorf("group: __consumer_offsets batch: %w", err)
	}
	if h.Codec() != batch.CodecNone {
		return nil, fmt.Errorf("group: __consumer_offsets batch at offset %d is compressed with %v", h.BaseOffset, h.Codec())
	}
	if h.IsControl() {
		return nil, nil
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("group: __consumer_offsets batch at offset %d: %w", h.BaseOffset, err)
	}
	out := make([]LogRecord, 0, rb.NumRecords)
	raw := rb.Records
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int(length) > len(raw)-n {
			return nil, fmt.Errorf("group: __consumer_offsets batch at offset %d: record %d: bad length", h.BaseOffset, i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:n+int(length)]); err != nil {
			return nil, fmt.Errorf("group: __consumer_offsets batch at offset %d: record %d: %w", h.BaseOffset, i, err)
		}
		out = append(out, LogRecord{Key: rec.Key, Value: rec.Value})
		raw = raw[n+int(length):]
	}
	return out, nil
}
