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

// recordView is what the checks need from one record.
type recordView struct {
	timestampDelta int64
	offsetDelta    int32
	keyIsNull      bool
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
//
// Nearly every record is well formed, so readWellFormedRecord tries it first
// (it is the produce path's per-record cost); only a record it cannot accept
// goes through readRecordChecked, which finds and names the fault. Both apply
// the same rules, so the fast path decides nothing the checked one would not.
func readRecord(data []byte, index int) (recordView, int, *Error) {
	if r, n, ok := readWellFormedRecord(data, index); ok {
		return r, n, nil
	}
	return readRecordChecked(data, index)
}

// readWellFormedRecord is readRecord for a record without a fault: it
// reports ok only when readRecordChecked would accept the record with the
// same result, and otherwise gives up without saying why. It keeps its
// position in a local and decodes one- and two-byte varints inline
// (shortVarint): this walk is the produce path's per-record cost.
func readWellFormedRecord(data []byte, index int) (r recordView, n int, ok bool) {
	length, start := shortVarint(data, 0)
	if start == 0 {
		if length, start, ok = longVarint(data, 0); !ok {
			return r, 0, false
		}
	}
	if length < 1 || int(length) > len(data)-start {
		return r, 0, false
	}
	n = start + int(length)
	rec := data[start:n]
	pos := 1 // attributes
	if v, k := shortVarint(rec, pos); k > 0 {
		r.timestampDelta, pos = int64(v), pos+k
	} else if r.timestampDelta, pos, ok = longVarlong(rec, pos); !ok {
		return r, 0, false
	}
	if v, k := shortVarint(rec, pos); k > 0 {
		r.offsetDelta, pos = v, pos+k
	} else if r.offsetDelta, pos, ok = longVarint(rec, pos); !ok {
		return r, 0, false
	}
	if int(r.offsetDelta) != index {
		return r, 0, false
	}
	keyLength, k := shortVarint(rec, pos)
	if k == 0 || keyLength < -1 || int(keyLength) > len(rec)-pos-k {
		return r, 0, false // a key of 8 KiB or more goes the checked way
	}
	pos += k
	if keyLength == -1 {
		r.keyIsNull = true
	} else {
		pos += int(keyLength)
	}
	valueLength, k := shortVarint(rec, pos)
	if k == 0 {
		// A value of 8 KiB or more.
		if valueLength, pos, ok = longVarint(rec, pos); !ok {
			return r, 0, false
		}
	} else {
		pos += k
	}
	if valueLength < -1 || int(valueLength) > len(rec)-pos {
		return r, 0, false
	}
	if valueLength > 0 {
		pos += int(valueLength)
	}
	if pos == len(rec)-1 && rec[pos] == 0 {
		return r, n, true // no headers, the common case
	}
	var headerCount int32
	if headerCount, pos, ok = quickVarint(rec, pos); !ok || headerCount < 0 || int(headerCount) > (len(rec)-pos)/2 {
		return r, 0, false
	}
	for range headerCount {
		if pos, ok = quickSkipBytes(rec, pos, false); !ok {
			return r, 0, false
		}
		if pos, ok = quickSkipBytes(rec, pos, true); !ok {
			return r, 0, false
		}
	}
	return r, n, pos == len(rec)
}

// shortVarint decodes the zigzag varint at pos if it takes one or two
// bytes and two bytes are readable there, returning it and its length; it
// returns length 0 otherwise (a longer encoding, the last byte of b, past
// the end), for the caller to fall back on longVarint. It is small enough
// to be inlined, unlike quickVarint.
func shortVarint(b []byte, pos int) (int32, int) {
	if uint(pos+1) >= uint(len(b)) {
		return 0, 0
	}
	u, b1 := uint32(b[pos]), uint32(b[pos+1])
	if u < 0x80 {
		return int32(u>>1) ^ -int32(u&1), 1
	}
	if b1 < 0x80 {
		u = u&0x7f | b1<<7
		return int32(u>>1) ^ -int32(u&1), 2
	}
	return 0, 0
}

// quickSkipBytes steps over the length-prefixed byte string at pos, as
// fieldReader.bytes accepts it, reporting false where that would fail.
func quickSkipBytes(b []byte, pos int, nullable bool) (int, bool) {
	n, pos, ok := quickVarint(b, pos)
	switch {
	case !ok:
		return 0, false
	case n == -1 && nullable:
		return pos, true
	case n < 0 || int(n) > len(b)-pos:
		return 0, false
	}
	return pos + int(n), true
}

// longVarlong decodes the zigzag varlong at pos as fieldReader.varlong
// accepts it, reporting false where that would fail. Callers try
// shortVarint first: one- and two-byte encodings, nearly all of them (a
// 100-byte value's length takes two), need no binary.Varint loop.
func longVarlong(b []byte, pos int) (int64, int, bool) {
	if pos >= len(b) {
		return 0, 0, false
	}
	v, n := binary.Varint(b[pos:])
	if n <= 0 || n > varlongBytesMax {
		return 0, 0, false
	}
	return v, pos + n, true
}

// quickVarint decodes fieldReader.varint's 32-bit varints: shortVarint,
// else longVarint.
func quickVarint(b []byte, pos int) (int32, int, bool) {
	if v, k := shortVarint(b, pos); k > 0 {
		return v, pos + k, true
	}
	return longVarint(b, pos)
}

// longVarint is longVarlong for quickVarint.
func longVarint(b []byte, pos int) (int32, int, bool) {
	if pos >= len(b) {
		return 0, 0, false
	}
	v, n := binary.Varint(b[pos:])
	if n <= 0 || n > varintBytesMax || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, 0, false
	}
	return int32(v), pos + n, true
}

// readRecordChecked is readRecord field by field, naming the first fault.
func readRecordChecked(data []byte, index int) (recordView, int, *Error) {
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
	if _, r.keyIsNull, err = f.bytes("keyLength", true); err != nil {
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
