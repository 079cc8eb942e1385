package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Record wire layout (Kafka's DefaultRecord), all integers zigzag varints:
//
//	length varint            bytes after this field
//	attributes int8          unused by Kafka
//	timestampDelta varlong   from the batch's FirstTimestamp
//	offsetDelta varint       from the batch's BaseOffset
//	keyLength varint, key    -1 for a null key
//	valueLength varint, value -1 for a null value
//	headerCount varint
//	per header: keyLength varint, key (never null); valueLength varint, value (-1 null)

// varintBytesMax and varlongBytesMax are the longest encodings Kafka's
// ByteUtils.readVarint and readVarlong accept.
const (
	varintBytesMax  = 5
	varlongBytesMax = 10
)

// recordView is what the checks need from one record. Key aliases the
// decompressed records buffer.
type recordView struct {
	timestampDelta int64
	offsetDelta    int32
	keyIsNull      bool
	key            []byte
}

// fieldReader reads one record's fields, naming each fault after the record
// index and field.
type fieldReader struct {
	buf         []byte
	pos         int
	recordIndex int
	// headerIndex is the header being read, or -1 outside the headers. The
	// field name is built only on failure, so reading allocates nothing.
	headerIndex int
}

func (f *fieldReader) fail(field, format string, args ...any) *Error {
	name := fmt.Sprintf("records[%d].%s", f.recordIndex, field)
	if f.headerIndex >= 0 {
		name = fmt.Sprintf("records[%d].headers[%d].%s", f.recordIndex, f.headerIndex, field)
	}
	return errInvalid(name, fmt.Sprintf(format, args...))
}

func (f *fieldReader) remaining() int { return len(f.buf) - f.pos }

func (f *fieldReader) varlong(field string) (int64, *Error) {
	v, n := binary.Varint(f.buf[f.pos:])
	switch {
	case n == 0:
		return 0, f.fail(field, "varint cut off at byte %d of %d", f.pos, len(f.buf))
	case n < 0 || n > varlongBytesMax:
		return 0, f.fail(field, "varint at byte %d overflows 64 bits", f.pos)
	}
	f.pos += n
	return v, nil
}

func (f *fieldReader) varint(field string) (int32, *Error) {
	start := f.pos
	v, err := f.varlong(field)
	if err != nil {
		return 0, err
	}
	if f.pos-start > varintBytesMax || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, f.fail(field, "varint at byte %d overflows 32 bits", start)
	}
	return int32(v), nil
}

// bytes reads a length-prefixed byte string; a length of -1 is null, and
// isNull tells it apart from an empty one.
func (f *fieldReader) bytes(field string, nullable bool) (b []byte, isNull bool, err *Error) {
	n, err := f.varint(field)
	if err != nil {
		return nil, false, err
	}
	switch {
	case n == -1 && nullable:
		return nil, true, nil
	case n < 0:
		return nil, false, f.fail(field, "invalid length %d", n)
	case int(n) > f.remaining():
		return nil, false, f.fail(field, "length %d exceeds the %d bytes left in the record", n, f.remaining())
	}
	b = f.buf[f.pos : f.pos+int(n)]
	f.pos += int(n)
	return b, false, nil
}

// readRecord decodes the record at the start of data, which is record number
// index of its batch, and returns it with the bytes it took. It checks every
// length against the bytes present, that the record's length field matches
// its fields exactly, and that offsetDelta equals index (Strand stores
// batches untouched, so it cannot renumber records as Kafka does for some old
// clients).
func readRecord(data []byte, index int) (recordView, int, *Error) {
	outer := fieldReader{buf: data, recordIndex: index, headerIndex: -1}
	length, err := outer.varint("length")
	if err != nil {
		return recordView{}, 0, err
	}
	if length < 0 || int(length) > outer.remaining() {
		return recordView{}, 0, outer.fail("length", "record length %d, but %d bytes remain", length, outer.remaining())
	}
	f := fieldReader{buf: data[outer.pos : outer.pos+int(length)], recordIndex: index, headerIndex: -1}
	var r recordView
	if f.remaining() < 1 {
		return r, 0, f.fail("attributes", "record of %d bytes has no attributes byte", length)
	}
	f.pos++ // attributes: unused in v2, and Kafka accepts any value
	if r.timestampDelta, err = f.varlong("timestampDelta"); err != nil {
		return r, 0, err
	}
	if r.offsetDelta, err = f.varint("offsetDelta"); err != nil {
		return r, 0, err
	}
	if int(r.offsetDelta) != index {
		return r, 0, f.fail("offsetDelta", "offset delta %d, want %d: offset deltas must count 0, 1, 2, ...", r.offsetDelta, index)
	}
	if r.key, r.keyIsNull, err = f.bytes("keyLength", true); err != nil {
		return r, 0, err
	}
	if _, _, err = f.bytes("valueLength", true); err != nil {
		return r, 0, err
	}
	if err = f.skipHeaders(); err != nil {
		return r, 0, err
	}
	if f.remaining() != 0 {
		return r, 0, f.fail("length", "record length %d, but its fields end after %d bytes", length, f.pos)
	}
	return r, outer.pos + int(length), nil
}

// skipHeaders checks the record headers and steps over them.
func (f *fieldReader) skipHeaders() *Error {
	count, err := f.varint("headerCount")
	if err != nil {
		return err
	}
	// Each header takes at least two bytes (two one-byte lengths), which
	// bounds the loop by the bytes present, not by the claimed count.
	if count < 0 || int(count) > f.remaining()/2 {
		return f.fail("headerCount", "header count %d, but %d bytes remain", count, f.remaining())
	}
	for f.headerIndex = 0; f.headerIndex < int(count); f.headerIndex++ {
		if _, _, err := f.bytes("keyLength", false); err != nil {
			return err
		}
		if _, _, err := f.bytes("valueLength", true); err != nil {
			return err
		}
	}
	f.headerIndex = -1
	return nil
}
