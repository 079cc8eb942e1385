package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// checkSplitMatches compares PrecheckProduced+Finish with CheckProduced on
// the same batch and limits: the results must be identical, error text
// included, and neither may modify the batch.
func checkSplitMatches(t interface {
	Helper()
	Fatalf(string, ...any)
}, b []byte, precheckBound int, limits ProduceLimits) {
	t.Helper()
	original := bytes.Clone(b)
	wantInfo, wantErr := CheckProduced(b, limits)
	pre := PrecheckProduced(b, precheckBound)
	gotInfo, gotErr := pre.Finish(b, limits)
	if !bytes.Equal(b, original) {
		t.Fatalf("checking modified its input")
	}
	if diff := cmp.Diff(wantInfo, gotInfo); diff != "" {
		t.Fatalf("Finish info differs from CheckProduced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErr, gotErr); diff != "" {
		t.Fatalf("Finish error differs from CheckProduced (-want +got):\n%s", diff)
	}
	// Passed is CheckProduced's verdict under limits no topic can break:
	// no size bound but the pre-check's decompression bound, no key or
	// timestamp rule.
	open := testLimits()
	open.BatchBytesMax, open.DecompressedBytesMax = math.MaxInt, precheckBound
	_, openErr := CheckProduced(b, open)
	if pre.Passed() != (openErr == nil) {
		t.Fatalf("Passed() = %t, but CheckProduced under open limits says %v", pre.Passed(), openErr)
	}
}

// TestPrecheckFinishMatchesCheckProduced draws batches (every codec, null
// and present keys, timestamps around now, some corrupted after the CRC was
// repaired so the walk reaches the records) and limits (compacted or not,
// either timestamp type, tight or open bounds, a decompression bound equal to
// the pre-check's or not), and demands the split checks answer exactly as
// CheckProduced does.
func TestPrecheckFinishMatchesCheckProduced(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		codec := rapid.SampledFrom(allCodecs).Draw(t, "codec")
		count := rapid.IntRange(1, 6).Draw(t, "records")
		records := make([]Record, count)
		for i := range records {
			if rapid.Bool().Draw(t, "keyed") {
				records[i].Key = []byte(rapid.StringN(0, 8, -1).Draw(t, "key"))
			}
			records[i].Value = bytes.Repeat([]byte("v"), rapid.IntRange(0, 3000).Draw(t, "valueBytes"))
			records[i].TimestampDelta = rapid.Int64Range(-10_000, 10_000).Draw(t, "timestampDelta")
		}
		b := Build(BuildSpec{Codec: codec, FirstTimestamp: testNowMs + rapid.Int64Range(-5_000, 5_000).Draw(t, "firstOffsetMs"), Records: records})
		switch rapid.IntRange(0, 3).Draw(t, "damage") {
		case 1: // a flipped byte after the header, CRC repaired
			i := rapid.IntRange(HeaderBytes, len(b)-1).Draw(t, "flipAt")
			b[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "flipBits"))
			fixCRC(b)
		case 2: // a flipped byte anywhere, CRC left alone
			i := rapid.IntRange(0, len(b)-1).Draw(t, "flipAt")
			b[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "flipBits"))
		case 3: // a record count the records do not match
			binary.BigEndian.PutUint32(b[offsetRecordCount:], uint32(rapid.IntRange(0, 8).Draw(t, "recordCount")))
			fixCRC(b)
		}
		precheckBound := rapid.SampledFrom([]int{1 << 10, 16 << 10, 1 << 20}).Draw(t, "precheckBound")
		limits := testLimits()
		limits.BatchBytesMax = rapid.SampledFrom([]int{100, 4 << 10, 1 << 20}).Draw(t, "batchBytesMax")
		limits.DecompressedBytesMax = precheckBound
		if rapid.Bool().Draw(t, "otherDecompressionBound") {
			limits.DecompressedBytesMax = rapid.SampledFrom([]int{1 << 10, 16 << 10, 1 << 20}).Draw(t, "decompressedBytesMax")
		}
		limits.RequireKeys = rapid.Bool().Draw(t, "requireKeys")
		if rapid.Bool().Draw(t, "logAppendTime") {
			limits.TimestampType = LogAppendTime
		}
		limits.TimestampBeforeMaxMs = rapid.SampledFrom([]int64{0, 3_000, math.MaxInt64}).Draw(t, "beforeMaxMs")
		limits.TimestampAfterMaxMs = rapid.SampledFrom([]int64{0, 3_000, math.MaxInt64}).Draw(t, "afterMaxMs")
		checkSplitMatches(t, b, precheckBound, limits)
	})
}

// TestPrecheckKeepsTopicErrorsFirst pins the ordering case the split must get
// right: record 0 breaks the topic's rule (a null key on a compacted topic,
// or a timestamp out of bounds) and record 1 is malformed. CheckProduced
// names record 0; the pre-check alone sees only record 1's fault.
func TestPrecheckKeepsTopicErrorsFirst(t *testing.T) {
	malformed := rec(attr, 0, 1, 1, "k", 99, "v", 0) // value length past the record
	for name, tc := range map[string]struct {
		first     []byte
		limits    func(*ProduceLimits)
		wantField string
	}{
		"null key":      {rec(attr, 0, 0, -1, "", 1, "v", 0), func(l *ProduceLimits) { l.RequireKeys = true }, "records[0].key"},
		"old timestamp": {rec(attr, -10_000, 0, 1, "k", 1, "v", 0), func(l *ProduceLimits) { l.TimestampBeforeMaxMs = 1 }, "records[0].timestampDelta"},
	} {
		t.Run(name, func(t *testing.T) {
			b := rawBatch(cat(tc.first, malformed), 2, nil)
			limits := testLimits()
			tc.limits(&limits)
			pre := PrecheckProduced(b, limits.DecompressedBytesMax)
			_, err := pre.Finish(b, limits)
			var be *Error
			if !errors.As(err, &be) || be.Field != tc.wantField {
				t.Fatalf("Finish: %v, want an error naming %s", err, tc.wantField)
			}
			checkSplitMatches(t, b, limits.DecompressedBytesMax, limits)
			// Without the topic's rule, the malformed record is the error.
			_, err = pre.Finish(b, testLimits())
			if !errors.As(err, &be) || be.Field != "records[1].valueLength" {
				t.Fatalf("Finish with default limits: %v, want records[1].valueLength", err)
			}
		})
	}
}

// FuzzPrecheckMatchesCheck is TestPrecheckFinishMatchesCheckProduced over
// arbitrary bytes (Length and CRC repaired so the fuzzer reaches the records)
// and fuzzed limits.
func FuzzPrecheckMatchesCheck(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, false, false, int64(0), uint16(0), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, requireKeys, logAppendTime bool, nowOffsetMs int64, boundsMs uint16, otherBound bool) {
		if len(b) >= HeaderBytes {
			binary.BigEndian.PutUint32(b[offsetLength:], uint32(len(b)-LogOverheadBytes))
			b[offsetMagic] = Magic
			fixCRC(b)
		}
		limits := fuzzLimits()
		limits.RequireKeys = requireKeys
		if logAppendTime {
			limits.TimestampType = LogAppendTime
		}
		limits.NowMs += nowOffsetMs % 1_000_000
		limits.TimestampBeforeMaxMs, limits.TimestampAfterMaxMs = int64(boundsMs), int64(boundsMs)*2
		precheckBound := limits.DecompressedBytesMax
		if otherBound {
			precheckBound /= 4
		}
		checkSplitMatches(t, b, precheckBound, limits)
	})
}

// BenchmarkPrecheckSplit compares the full check with its two halves on a
// snappy batch of 100 records of 100 bytes: "full" is what the event loop
// paid before the split, "finish" what it pays now, "precheck" what moved to
// the connection goroutines.
func BenchmarkPrecheckSplit(b *testing.B) {
	records := make([]Record, 100)
	for i := range records {
		records[i] = Record{Key: []byte(fmt.Sprint("key-", i)), Value: bytes.Repeat([]byte(fmt.Sprintf("%04d", i)), 25)}
	}
	batch := Build(BuildSpec{Codec: CodecSnappy, FirstTimestamp: testNowMs, Records: records})
	limits := testLimits()
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if _, err := CheckProduced(batch, limits); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("precheck", func(b *testing.B) {
		for b.Loop() {
			PrecheckProduced(batch, limits.DecompressedBytesMax)
		}
	})
	pre := PrecheckProduced(batch, limits.DecompressedBytesMax)
	b.Run("finish", func(b *testing.B) {
		for b.Loop() {
			if _, err := pre.Finish(batch, limits); err != nil {
				b.Fatal(err)
			}
		}
	})
}
