package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/snappy/xerial"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzLimits keeps decompression small so the fuzzer stays fast.
func fuzzLimits() ProduceLimits {
	l := testLimits()
	l.DecompressedBytesMax = 256 << 10
	return l
}

// knownCodes are the only Kafka error codes this package may return.
var knownCodes = map[int16]bool{codeCorrupt: true, codeInvalidRecord: true, codeUnsupportedCompression: true, codeInvalidTimestamp: true, codeTooLarge: true}

func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, codec := range allCodecs {
		seeds = append(seeds, Build(BuildSpec{Codec: codec, FirstTimestamp: testNowMs, Records: sampleRecords()[:3]}))
	}
	seeds = append(seeds,
		Build(BuildSpec{Codec: CodecNone, FirstTimestamp: testNowMs, Idempotent: true, ProducerID: 1, BaseSequence: 5, Transactional: true,
			Records: []Record{{Key: []byte("a"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}}}}),
		rawBatch(xerial.Encode(nil, cat(goodRec(0), goodRec(1))), 2, func(b []byte) { b[offsetAttributes+1] = byte(CodecSnappy) }),
		rawBatch(nil, 0, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 4) }), // empty, as compaction leaves it
	)
	return seeds
}

// FuzzCheck feeds arbitrary bytes to Verify and CheckProduced, both as they
// are and with Length and CRC repaired so the fuzzer reaches the records.
// Neither may panic; every rejection is an *Error with a field and a known
// code; and whatever they accept must really be a whole, intact batch.
func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAcceptedOrExplained(t, b)
		if len(b) >= HeaderBytes {
			repaired := bytes.Clone(b)
			binary.BigEndian.PutUint32(repaired[offsetLength:], uint32(len(repaired)-LogOverheadBytes))
			repaired[offsetMagic] = Magic
			fixCRC(repaired)
			checkAcceptedOrExplained(t, repaired)
		}
	})
}

func checkAcceptedOrExplained(t *testing.T, b []byte) {
	original := bytes.Clone(b)
	h, verifyErr := Verify(b)
	mustBeBatchError(t, "Verify", verifyErr)
	if verifyErr == nil {
		if h.TotalBytes() != int64(len(b)) || ComputeCRC(b) != h.CRC || h.Magic != Magic ||
			h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
			t.Fatalf("Verify accepted an inconsistent batch: %+v (len %d, crc %#x)", h, len(b), ComputeCRC(b))
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil || uint32(rb.CRC) != h.CRC || rb.NumRecords != h.RecordCount {
			t.Fatalf("franz-go disagrees with an accepted header: %v, %+v", err, rb)
		}
	}
	_, _, _, findErr := FindRecordByTimestamp(b, testNowMs, 0, fuzzLimits().DecompressedBytesMax)
	mustBeBatchError(t, "FindRecordByTimestamp", findErr)
	info, err := CheckProduced(b, fuzzLimits())
	mustBeBatchError(t, "CheckProduced", err)
	if !bytes.Equal(b, original) {
		t.Fatal("checking modified its input")
	}
	if err != nil {
		return
	}
	if verifyErr != nil {
		t.Fatalf("CheckProduced accepted what Verify rejected: %v", verifyErr)
	}
	if info.Header != h || info.RecordCount != h.RecordCount || int64(info.RecordCount) != int64(h.LastOffsetDelta)+1 ||
		h.BaseOffset != 0 || h.IsControl() || info.MaxTimestampOffsetDelta < -1 || info.MaxTimestampOffsetDelta > h.LastOffsetDelta ||
		(info.MaxTimestampOffsetDelta == -1) != (info.MaxTimestamp == NoTimestamp) {
		t.Fatalf("CheckProduced accepted with inconsistent info %+v for header %+v", info, h)
	}
	// The record ListOffsets finds for the max timestamp is the one
	// CheckProduced names: the first carrying it.
	if info.MaxTimestamp != NoTimestamp && info.MaxTimestamp == h.MaxTimestamp {
		offset, ts, found, err := FindRecordByTimestamp(b, info.MaxTimestamp, 0, fuzzLimits().DecompressedBytesMax)
		if err != nil || !found || ts != info.MaxTimestamp || offset != h.BaseOffset+int64(info.MaxTimestampOffsetDelta) {
			t.Fatalf("FindRecordByTimestamp(max %d) = (%d, %d, %v, %v), want offset delta %d", info.MaxTimestamp, offset, ts, found, err, info.MaxTimestampOffsetDelta)
		}
	}
}

func mustBeBatchError(t *testing.T, what string, err error) {
	if err == nil {
		return
	}
	var be *Error
	if !errors.As(err, &be) || be.Field == "" || be.Reason == "" || !knownCodes[be.Code] {
		t.Fatalf("%s returned %#v (%v), want an *Error with field, reason and known code", what, err, err)
	}
}

// FuzzBuild builds a batch from fuzzed records and checks that CheckProduced
// accepts it and franz-go reads back exactly those records.
func FuzzBuild(f *testing.F) {
	f.Add(uint8(0), []byte("key"), []byte("value"), "header", []byte("hv"), int64(3), uint8(2))
	f.Add(uint8(4), []byte{}, []byte(nil), "", []byte(nil), int64(-1), uint8(0))
	f.Fuzz(func(t *testing.T, codecByte uint8, key, value []byte, headerKey string, headerValue []byte, delta int64, copies uint8) {
		codec := allCodecs[int(codecByte)%len(allCodecs)]
		records := make([]Record, int(copies%8)+1)
		for i := range records {
			records[i] = Record{Key: key, Value: value, TimestampDelta: delta * int64(i), Headers: []RecordHeader{{Key: headerKey, Value: headerValue}}}
		}
		b := Build(BuildSpec{Codec: codec, FirstTimestamp: testNowMs, Records: records})
		limits := fuzzLimits()
		limits.BatchBytesMax = len(b)
		info, err := CheckProduced(b, limits)
		if err != nil {
			t.Fatalf("CheckProduced(Build(...)): %v", err)
		}
		if int(info.RecordCount) != len(records) {
			t.Fatalf("RecordCount %d, want %d", info.RecordCount, len(records))
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		got := kgoRecords(t, &rb)
		for i, g := range got {
			if !sameNullable(g.Key, key) || !sameNullable(g.Value, value) || g.TimestampDelta64 != records[i].TimestampDelta ||
				len(g.Headers) != 1 || g.Headers[0].Key != headerKey || !sameNullable(g.Headers[0].Value, headerValue) {
				t.Fatalf("record %d read back as %+v", i, g)
			}
		}
	})
}

// FuzzReadRecordFastPath checks readWellFormedRecord against
// readRecordChecked on arbitrary bytes: where the fast path accepts a record,
// the checked path must accept it with the same result and length. The seeds
// hold one- and two-byte varints, redundant encodings (0x80 0x00), varints cut
// off at the end, and headers, so the fuzzer starts at each of its branches.
func FuzzReadRecordFastPath(f *testing.F) {
	f.Add(goodRec(0), 0)
	f.Add(rec(attr, 0, 3, -1, 100, string(make([]byte, 100)), 0), 3)
	f.Add(rec(attr, int64(-70000), 0, 1, "k", -1, 2, 1, "a", -1, 1, "b", 2, "vv"), 0)
	f.Add(withLength(body(attr, []byte{0x80, 0x00}, 0, 1, "k", 1, "v", 0)), 0)
	f.Add(withLength(body(attr, 0, 0, 1, "k", 1, "v", []byte{0x80})), 0)
	f.Add(withLength(body(attr, 0, 0, 1, "k", 1, "v", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00})), 0)
	f.Add([]byte{0x80}, 0)
	f.Fuzz(func(t *testing.T, data []byte, index int) {
		fast, fastBytes, ok := readWellFormedRecord(data, index)
		checked, checkedBytes, err := readRecordChecked(data, index)
		if !ok {
			return // the caller then asks readRecordChecked
		}
		if err != nil {
			t.Fatalf("fast path accepted % x (index %d), checked path: %v", data, index, err)
		}
		if fast != checked || fastBytes != checkedBytes {
			t.Fatalf("% x (index %d): fast path read %+v in %d bytes, checked path %+v in %d", data, index, fast, fastBytes, checked, checkedBytes)
		}
	})
}
