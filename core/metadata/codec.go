package metadata

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"strand/core/batch"
)

// recordVersion is the only version of every record type so far.
const recordVersion int16 = 0

// Limits on decoded input, so that a corrupt record cannot make the decoder
// allocate without bound.
const (
	// idsPerListMax bounds a replica list: far above any replication factor.
	idsPerListMax = 1024
	// endpointsMax bounds a broker's listeners.
	endpointsMax = 64
)

// EncodeRecord returns the record value of rec: type, version, fields.
func EncodeRecord(rec Record) []byte {
	dst := kbin.AppendInt16(nil, int16(rec.Type()))
	dst = kbin.AppendInt16(dst, recordVersion)
	return rec.appendFields(dst)
}

// DecodeRecord decodes one record value. It accepts exactly the canonical
// encoding: trailing bytes, non-canonical booleans and unknown types or
// versions are errors.
func DecodeRecord(value []byte) (Record, error) {
	r := fieldReader{Reader: kbin.Reader{Src: value}}
	t := RecordType(r.Int16())
	version := r.Int16()
	if !r.Ok() {
		return nil, fmt.Errorf("metadata record of %d bytes: too short for type and version", len(value))
	}
	rec := newRecord(t)
	if rec == nil {
		return nil, fmt.Errorf("metadata record: unknown type %d", int16(t))
	}
	if version != recordVersion {
		return nil, fmt.Errorf("metadata %v: unsupported version %d", t, version)
	}
	rec.readFields(&r)
	if err := r.finish(); err != nil {
		return nil, fmt.Errorf("metadata %v: %w", t, err)
	}
	if again := EncodeRecord(rec); !bytes.Equal(again, value) {
		return nil, fmt.Errorf("metadata %v: not in canonical encoding", t)
	}
	return rec, nil
}

// EncodeBatch encodes records, in order, as one uncompressed RecordBatch v2
// with BaseOffset 0 and PartitionLeaderEpoch 0: the metadata log stamps both
// when it appends. records must not be empty.
func EncodeBatch(records []Record, timestampMs int64) []byte {
	if len(records) == 0 {
		panic("metadata: EncodeBatch needs at least one record")
	}
	spec := batch.BuildSpec{FirstTimestamp: timestampMs, Records: make([]batch.Record, len(records))}
	for i, rec := range records {
		spec.Records[i] = batch.Record{Value: EncodeRecord(rec)}
	}
	return batch.Build(spec)
}

// Batch is one decoded batch of the metadata log.
type Batch struct {
	// BaseOffset is the offset of Records[0]; record i has BaseOffset+i.
	BaseOffset int64
	// NextOffset is the offset after the batch.
	NextOffset int64
	// LeaderEpoch is the batch's PartitionLeaderEpoch (the quorum's epoch).
	LeaderEpoch int32
	// Records is empty for a control batch, which Apply never sees.
	Records []Record
}

// DecodeBatches decodes every batch in b, as the metadata log stores them
// and Fetch returns them. It verifies each batch (batch.Verify) and rejects
// compressed batches and records with keys or headers, which the metadata
// log never holds. The result does not alias b.
func DecodeBatches(b []byte) ([]Batch, error) {
	var out []Batch
	for position := 0; position < len(b); {
		rest := b[position:]
		if len(rest) < batch.HeaderBytes {
			return nil, fmt.Errorf("metadata batch at byte %d: %d bytes, shorter than a batch header", position, len(rest))
		}
		h, err := batch.ParseHeader(rest)
		if err != nil {
			return nil, fmt.Errorf("metadata batch at byte %d: %w", position, err)
		}
		if h.Length < 0 || h.TotalBytes() > int64(len(rest)) {
			return nil, fmt.Errorf("metadata batch at byte %d claims %d bytes, %d remain", position, h.TotalBytes(), len(rest))
		}
		one := rest[:h.TotalBytes()]
		decoded, err := decodeBatch(one)
		if err != nil {
			return nil, fmt.Errorf("metadata batch at offset %d: %w", h.BaseOffset, err)
		}
		out = append(out, decoded)
		position += len(one)
	}
	return out, nil
}

func decodeBatch(b []byte) (Batch, error) {
	h, err := batch.Verify(b)
	if err != nil {
		return Batch{}, err
	}
	out := Batch{BaseOffset: h.BaseOffset, NextOffset: h.NextOffset(), LeaderEpoch: h.PartitionLeaderEpoch}
	if h.IsControl() {
		return out, nil
	}
	if h.Codec() != batch.CodecNone {
		return Batch{}, fmt.Errorf("compressed with %v: metadata batches are never compressed", h.Codec())
	}
	if int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return Batch{}, fmt.Errorf("%d records for %d offsets", h.RecordCount, h.LastOffsetDelta+1)
	}
	rest := b[batch.HeaderBytes:]
	for i := range int(h.RecordCount) {
		value, n, err := readRecordValue(rest, i)
		if err != nil {
			return Batch{}, err
		}
		rec, err := DecodeRecord(value)
		if err != nil {
			return Batch{}, fmt.Errorf("record %d: %w", i, err)
		}
		out.Records = append(out.Records, rec)
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return Batch{}, fmt.Errorf("%d bytes after the last record", len(rest))
	}
	return out, nil
}

// readRecordValue reads record number index of a batch (Kafka's
// DefaultRecord layout) and returns its value and the bytes it took.
func readRecordValue(b []byte, index int) ([]byte, int, error) {
	length, n := kbin.Varint(b)
	if n == 0 || length < 0 || int(length) > len(b)-n {
		return nil, 0, fmt.Errorf("record %d: bad length", index)
	}
	body := kbin.Reader{Src: b[n : n+int(length)]}
	body.Int8() // attributes, unused
	body.Varlong()
	offsetDelta := body.Varint()
	keyLength := body.Varint()
	value := body.VarintBytes()
	headers := body.Varint()
	switch {
	case !body.Ok() || len(body.Src) != 0:
		return nil, 0, fmt.Errorf("record %d: malformed fields", index)
	case int(offsetDelta) != index:
		return nil, 0, fmt.Errorf("record %d: offset delta %d", index, offsetDelta)
	case keyLength != -1 || headers != 0:
		return nil, 0, fmt.Errorf("record %d: metadata records have no key and no headers", index)
	case value == nil:
		return nil, 0, fmt.Errorf("record %d: null value", index)
	}
	return value, n + int(length), nil
}

// fieldReader is kbin.Reader with the bounded list readers records need.
type fieldReader struct {
	kbin.Reader
	err error
}

func (r *fieldReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.Src = nil
}

// finish reports the first error, a short read, or trailing bytes.
func (r *fieldReader) finish() error {
	switch {
	case r.err != nil:
		return r.err
	case !r.Ok():
		return fmt.Errorf("truncated")
	case len(r.Src) != 0:
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}

// listLen reads an int32 array length; -1 is null if nullable.
func (r *fieldReader) listLen(field string, nullable bool, limit int, elementBytes int) (n int, isNull bool) {
	l := r.Int32()
	switch {
	case !r.Ok():
		return 0, false
	case l == -1 && nullable:
		return 0, true
	case l < 0 || int(l) > limit || int(l)*elementBytes > len(r.Src):
		r.fail("%s: bad list length %d", field, l)
		return 0, false
	}
	return int(l), false
}

// ids reads a non-null replica list; an empty list decodes as nil.
func (r *fieldReader) ids(field string) []int32 {
	n, _ := r.listLen(field, false, idsPerListMax, 4)
	return r.idsOfLen(n)
}

func (r *fieldReader) idsOfLen(n int) []int32 {
	if n == 0 {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.Int32()
	}
	return out
}

// change reads a nullable replica list: null is "unchanged".
func (r *fieldReader) change(field string) IDsChange {
	n, isNull := r.listLen(field, true, idsPerListMax, 4)
	if isNull {
		return IDsChange{}
	}
	return IDsChange{Changed: true, IDs: r.idsOfLen(n)}
}

func appendIDs(dst []byte, ids []int32) []byte {
	dst = kbin.AppendInt32(dst, int32(len(ids)))
	for _, id := range ids {
		dst = kbin.AppendInt32(dst, id)
	}
	return dst
}

func appendChange(dst []byte, c IDsChange) []byte {
	if !c.Changed {
		return kbin.AppendInt32(dst, -1)
	}
	return appendIDs(dst, c.IDs)
}

func (rec *RegisterBrokerRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, rec.BrokerID)
	dst = kbin.AppendUuid(dst, rec.IncarnationID)
	dst = kbin.AppendInt64(dst, rec.BrokerEpoch)
	dst = kbin.AppendInt32(dst, int32(len(rec.Endpoints)))
	for _, e := range rec.Endpoints {
		dst = kbin.AppendString(dst, e.Listener)
		dst = kbin.AppendString(dst, e.Host)
		dst = kbin.AppendUint16(dst, e.Port)
		dst = kbin.AppendInt16(dst, e.SecurityProtocol)
	}
	dst = kbin.AppendBool(dst, rec.Fenced)
	return kbin.AppendBool(dst, rec.InControlledShutdown)
}

func (rec *RegisterBrokerRecord) readFields(r *fieldReader) {
	rec.BrokerID = r.Int32()
	rec.IncarnationID = r.Uuid()
	rec.BrokerEpoch = r.Int64()
	n, _ := r.listLen("Endpoints", false, endpointsMax, 8)
	for range n {
		rec.Endpoints = append(rec.Endpoints, Endpoint{
			Listener: r.String(), Host: r.String(), Port: r.Uint16(), SecurityProtocol: r.Int16(),
		})
	}
	rec.Fenced = r.Bool()
	rec.InControlledShutdown = r.Bool()
}

func (rec *UnregisterBrokerRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, rec.BrokerID)
	return kbin.AppendInt64(dst, rec.BrokerEpoch)
}

func (rec *UnregisterBrokerRecord) readFields(r *fieldReader) {
	rec.BrokerID = r.Int32()
	rec.BrokerEpoch = r.Int64()
}

func (rec *BrokerRegistrationChangeRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, rec.BrokerID)
	dst = kbin.AppendInt64(dst, rec.BrokerEpoch)
	dst = kbin.AppendInt8(dst, int8(rec.Fenced))
	return kbin.AppendBool(dst, rec.InControlledShutdown)
}

func (rec *BrokerRegistrationChangeRecord) readFields(r *fieldReader) {
	rec.BrokerID = r.Int32()
	rec.BrokerEpoch = r.Int64()
	rec.Fenced = FenceChange(r.Int8())
	rec.InControlledShutdown = r.Bool()
}

func (rec *TopicRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendString(dst, rec.Name)
	return kbin.AppendUuid(dst, rec.ID)
}

func (rec *TopicRecord) readFields(r *fieldReader) {
	rec.Name = r.String()
	rec.ID = r.Uuid()
}

func (rec *PartitionRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, rec.TopicID)
	dst = kbin.AppendInt32(dst, rec.PartitionID)
	dst = appendIDs(dst, rec.Replicas)
	dst = appendIDs(dst, rec.ISR)
	dst = appendIDs(dst, rec.ELR)
	dst = appendIDs(dst, rec.LastKnownELR)
	dst = kbin.AppendInt32(dst, rec.Leader)
	dst = kbin.AppendInt32(dst, rec.LeaderEpoch)
	return kbin.AppendInt32(dst, rec.PartitionEpoch)
}

func (rec *PartitionRecord) readFields(r *fieldReader) {
	rec.TopicID = r.Uuid()
	rec.PartitionID = r.Int32()
	rec.Replicas = r.ids("Replicas")
	rec.ISR = r.ids("ISR")
	rec.ELR = r.ids("ELR")
	rec.LastKnownELR = r.ids("LastKnownELR")
	rec.Leader = r.Int32()
	rec.LeaderEpoch = r.Int32()
	rec.PartitionEpoch = r.Int32()
}

func (rec *PartitionChangeRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, rec.TopicID)
	dst = kbin.AppendInt32(dst, rec.PartitionID)
	dst = kbin.AppendInt32(dst, rec.Leader)
	dst = appendChange(dst, rec.ISR)
	dst = appendChange(dst, rec.ELR)
	return appendChange(dst, rec.LastKnownELR)
}

func (rec *PartitionChangeRecord) readFields(r *fieldReader) {
	rec.TopicID = r.Uuid()
	rec.PartitionID = r.Int32()
	rec.Leader = r.Int32()
	rec.ISR = r.change("ISR")
	rec.ELR = r.change("ELR")
	rec.LastKnownELR = r.change("LastKnownELR")
}

func (rec *RemoveTopicRecord) appendFields(dst []byte) []byte {
	return kbin.AppendUuid(dst, rec.TopicID)
}

func (rec *RemoveTopicRecord) readFields(r *fieldReader) { rec.TopicID = r.Uuid() }

func (rec *ConfigRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, int8(rec.ResourceType))
	dst = kbin.AppendString(dst, rec.ResourceName)
	dst = kbin.AppendString(dst, rec.Name)
	return kbin.AppendNullableString(dst, rec.Value)
}

func (rec *ConfigRecord) readFields(r *fieldReader) {
	rec.ResourceType = ConfigResourceType(r.Int8())
	rec.ResourceName = r.String()
	rec.Name = r.String()
	rec.Value = r.NullableString()
}

func (rec *ProducerIdsRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, rec.BrokerID)
	dst = kbin.AppendInt64(dst, rec.BrokerEpoch)
	return kbin.AppendInt64(dst, rec.NextProducerID)
}

func (rec *ProducerIdsRecord) readFields(r *fieldReader) {
	rec.BrokerID = r.Int32()
	rec.BrokerEpoch = r.Int64()
	rec.NextProducerID = r.Int64()
}

func (*NoOpRecord) appendFields(dst []byte) []byte { return dst }
func (*NoOpRecord) readFields(*fieldReader)        {}

func (rec *AccessControlEntryRecord) appendFields(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, rec.ID)
	dst = kbin.AppendInt8(dst, rec.ResourceType)
	dst = kbin.AppendString(dst, rec.ResourceName)
	dst = kbin.AppendInt8(dst, rec.PatternType)
	dst = kbin.AppendString(dst, rec.Principal)
	dst = kbin.AppendString(dst, rec.Host)
	dst = kbin.AppendInt8(dst, rec.Operation)
	return kbin.AppendInt8(dst, rec.Permission)
}

func (rec *AccessControlEntryRecord) readFields(r *fieldReader) {
	rec.ID = r.Uuid()
	rec.ResourceType = r.Int8()
	rec.ResourceName = r.String()
	rec.PatternType = r.Int8()
	rec.Principal = r.String()
	rec.Host = r.String()
	rec.Operation = r.Int8()
	rec.Permission = r.Int8()
}

func (rec *RemoveAccessControlEntryRecord) appendFields(dst []byte) []byte {
	return kbin.AppendUuid(dst, rec.ID)
}

func (rec *RemoveAccessControlEntryRecord) readFields(r *fieldReader) { rec.ID = r.Uuid() }
