package batch

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgBatch encodes an uncompressed batch of n records with franz-go, an
// encoder independent of ours, and fixes its CRC.
func kmsgBatch(t testing.TB, n int) []byte {
	t.Helper()
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              []byte("key"),
			Value:            []byte("value"),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // AppendTo writes Length as a 1-byte varint of 0
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  1000,
		MaxTimestamp:    1000 + int64(n-1),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offsetLength:], uint32(len(b)-LogOverheadBytes))
	fixCRC(b)
	return b
}

func fixCRC(b []byte) { binary.BigEndian.PutUint32(b[offsetCRC:], ComputeCRC(b)) }

func TestVerifyAcceptsKmsgBatch(t *testing.T) {
	b := kmsgBatch(t, 3)
	h, err := Verify(b)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if h.RecordCount != 3 || h.LastOffsetDelta != 2 || h.TotalBytes() != int64(len(b)) {
		t.Fatalf("header = %+v", h)
	}
}

func TestVerifyAcceptsEmptyCompactedBatch(t *testing.T) {
	b := kmsgBatch(t, 3)[:HeaderBytes]
	binary.BigEndian.PutUint32(b[offsetLength:], HeaderBytes-LogOverheadBytes)
	binary.BigEndian.PutUint32(b[offsetRecordCount:], 0)
	binary.BigEndian.PutUint64(b[offsetFirstTimestamp:], ^uint64(0)) // -1, as writeEmptyHeader does
	fixCRC(b)
	if _, err := Verify(b); err != nil {
		t.Fatalf("Verify(empty batch): %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	put32 := func(off int, v int32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); fixCRC(b); return b }
	}
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		field  string
		code   int16
		reason string
	}{
		{"shorter than header", func(b []byte) []byte { return b[:HeaderBytes-1] }, "length", 2, "shorter"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, "length", 2, "were given"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, "length", 2, "were given"},
		{"negative length", put32(offsetLength, -5), "length", 2, "negative"},
		{"huge length", put32(offsetLength, 1<<30), "length", 10, "maximum"},
		{"magic 1", func(b []byte) []byte { b[offsetMagic] = 1; fixCRC(b); return b }, "magic", 2, "magic 1"},
		{"flipped bit", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, "crc", 2, "stored 0x"},
		{"unknown codec", func(b []byte) []byte { b[offsetAttributes+1] |= 5; fixCRC(b); return b }, "attributes", 76, "codec 5"},
		{"negative last offset delta", put32(offsetLastOffsetDelta, -1), "lastOffsetDelta", 2, "negative"},
		{"negative count", put32(offsetRecordCount, -1), "recordCount", 2, "negative"},
		{"count beyond deltas", put32(offsetRecordCount, 4), "recordCount", 2, "cannot fit"},
		{"empty batch with records", put32(offsetRecordCount, 0), "records", 2, "empty batch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(kmsgBatch(t, 3))
			_, err := Verify(b)
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("Verify = %v, want *Error", err)
			}
			if be.Field != tc.field || be.Code != tc.code || !strings.Contains(be.Reason, tc.reason) {
				t.Fatalf("got field %q code %d reason %q; want field %q code %d reason containing %q", be.Field, be.Code, be.Reason, tc.field, tc.code, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "batch field "+tc.field+": ") {
				t.Fatalf("Error() = %q does not name the field", err)
			}
			// VerifyExceptCRC applies every rule but the CRC's.
			_, errExceptCRC := VerifyExceptCRC(b)
			switch {
			case tc.field == "crc" && errExceptCRC != nil:
				t.Fatalf("VerifyExceptCRC of a batch whose only fault is its CRC: %v", errExceptCRC)
			case tc.field != "crc" && (errExceptCRC == nil || errExceptCRC.Error() != err.Error()):
				t.Fatalf("VerifyExceptCRC = %v, want Verify's %v", errExceptCRC, err)
			}
		})
	}
}

// TestVerifyDoesNotOrderTimestamps pins a decision: Kafka does not require
// MaxTimestamp >= FirstTimestamp (a LogAppendTime batch may carry a broker
// clock behind the producer's), so neither does Verify.
func TestVerifyDoesNotOrderTimestamps(t *testing.T) {
	b := kmsgBatch(t, 2)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], 10) // FirstTimestamp is 1000
	b[offsetAttributes+1] |= AttrLogAppendTime
	fixCRC(b)
	if _, err := Verify(b); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}
