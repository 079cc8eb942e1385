package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// checkSplitMatches compares PrecheckProduced+Finish with CheckProduced on
// the same batch: the pre-check judged under precheckLimits, Finish under
// limits. When both hold the same rules the answer must be CheckProduced's
// at the pre-check's clock (the batch is validated when it is pre-checked),
// LogAppendTime aside, which Finish stamps; when the rules differ it must be
// CheckProduced's under limits. Neither may modify the batch.
func checkSplitMatches(t interface {
	Helper()
	Fatalf(string, ...any)
}, b []byte, precheckLimits, limits ProduceLimits) {
	t.Helper()
	original := bytes.Clone(b)
	judgedBy := limits
	if precheckLimits.sameRules(limits) {
		judgedBy.NowMs = precheckLimits.NowMs
	}
	wantInfo, wantErr := CheckProduced(b, judgedBy)
	if wantErr == nil && limits.TimestampType == LogAppendTime {
		wantInfo.MaxTimestamp = limits.NowMs
	}
	pre := PrecheckProduced(b, precheckLimits, nil)
	gotInfo, gotErr := pre.Finish(b, limits, nil)
	if !bytes.Equal(b, original) {
		t.Fatalf("checking modified its input")
	}
	if diff := cmp.Diff(wantInfo, gotInfo); diff != "" {
		t.Fatalf("Finish info differs from CheckProduced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErr, gotErr); diff != "" {
		t.Fatalf("Finish error differs from CheckProduced (-want +got):\n%s", diff)
	}
	_, precheckErr := CheckProduced(b, precheckLimits)
	if pre.Passed() != (precheckErr == nil) {
		t.Fatalf("Passed() = %t, but CheckProduced under the pre-check's limits says %v", pre.Passed(), precheckErr)
	}
}

// TestPrecheckFinishMatchesCheckProduced draws batches (every codec, null
// and present keys, timestamps around now, some corrupted after the CRC was
// repaired so the walk reaches the records) and two sets of limits (compacted
// or not, either timestamp type, tight or open bounds, another decompression
// bound or not, the pre-check's clock a little before Finish's), and demands
// the split checks answer as CheckProduced does (checkSplitMatches).
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
		drawLimits := func(label string) ProduceLimits {
			limits := testLimits()
			limits.BatchBytesMax = rapid.SampledFrom([]int{100, 4 << 10, 1 << 20}).Draw(t, label+"batchBytesMax")
			limits.DecompressedBytesMax = rapid.SampledFrom([]int{1 << 10, 16 << 10, 1 << 20}).Draw(t, label+"decompressedBytesMax")
			limits.RequireKeys = rapid.Bool().Draw(t, label+"requireKeys")
			if rapid.Bool().Draw(t, label+"logAppendTime") {
				limits.TimestampType = LogAppendTime
			}
			limits.TimestampBeforeMaxMs = rapid.SampledFrom([]int64{0, 3_000, math.MaxInt64}).Draw(t, label+"beforeMaxMs")
			limits.TimestampAfterMaxMs = rapid.SampledFrom([]int64{0, 3_000, math.MaxInt64}).Draw(t, label+"afterMaxMs")
			return limits
		}
		precheckLimits := drawLimits("precheck.")
		limits := precheckLimits
		if rapid.Bool().Draw(t, "configChanged") {
			limits = drawLimits("finish.")
		}
		limits.NowMs += rapid.Int64Range(0, 5_000).Draw(t, "finishLaterMs")
		checkSplitMatches(t, b, precheckLimits, limits)
	})
}

// TestPrecheckValidatesAtItsClock pins the clock the split judges by: a
// timestamp within the bounds at the pre-check but past them by Finish's
// clock passes (the batch was validated when it was pre-checked, as a Kafka
// request handler validates when it takes the request), and the error of a
// batch the pre-check refused names the same record Finish would otherwise
// have to decompress again to find.
func TestPrecheckValidatesAtItsClock(t *testing.T) {
	malformed := rec(attr, 0, 1, 1, "k", 99, "v", 0) // value length past the record
	limits := testLimits()
	limits.TimestampAfterMaxMs = 1_000
	b := rawBatch(rec(attr, 900, 0, 1, "k", 1, "v", 0), 1, nil)
	pre := PrecheckProduced(b, limits, nil)
	later := limits
	later.NowMs -= 500 // the record is now 1,400 ms ahead
	if _, err := CheckProduced(b, later); err == nil {
		t.Fatalf("the record passes at Finish's clock too; the test needs one it breaks")
	}
	if _, err := pre.Finish(b, later, nil); err != nil {
		t.Fatalf("Finish at a later clock: %v, want the pre-check's verdict (passed)", err)
	}
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
			pre := PrecheckProduced(b, limits, nil)
			_, err := pre.Finish(b, limits, nil)
			var be *Error
			if !errors.As(err, &be) || be.Field != tc.wantField {
				t.Fatalf("Finish: %v, want an error naming %s", err, tc.wantField)
			}
			// The topic's rule changed since: Finish checks again.
			_, err = pre.Finish(b, testLimits(), nil)
			if !errors.As(err, &be) || be.Field != "records[1].valueLength" {
				t.Fatalf("Finish with default limits: %v, want records[1].valueLength", err)
			}
		})
	}
}

// TestDecompressionBudgetBoundsARequest: batches checked on one budget
// decompress until it is spent; the batch that takes it past its bound and
// every compressed batch after it are refused MESSAGE_TOO_LARGE naming the
// limit, the later ones without being decompressed, while an uncompressed
// batch is still accepted.
func TestDecompressionBudgetBoundsARequest(t *testing.T) {
	value := bytes.Repeat([]byte("a"), 10_000)
	compressed := Build(BuildSpec{Codec: CodecZstd, FirstTimestamp: testNowMs, Records: []Record{{Value: value}}})
	plain := Build(BuildSpec{FirstTimestamp: testNowMs, Records: []Record{{Value: value}}})
	limits := testLimits()
	budget := NewDecompressionBudget(25_000) // two batches of about 10 KB, not three
	var verdicts []int16
	for _, b := range [][]byte{compressed, compressed, compressed, plain, compressed} {
		_, err := CheckProducedWithin(b, limits, budget)
		var be *Error
		switch {
		case err == nil:
			verdicts = append(verdicts, 0)
		case errors.As(err, &be):
			verdicts = append(verdicts, be.Code)
			if be.Code != codeTooLarge || !strings.Contains(be.Reason, "strand.produce.request.decompressed.bytes.max") {
				t.Errorf("refusal %v does not name the limit", err)
			}
		default:
			t.Fatalf("error %v is not an *Error", err)
		}
	}
	if want := []int16{0, 0, codeTooLarge, 0, codeTooLarge}; !slices.Equal(verdicts, want) {
		t.Errorf("verdicts %v, want %v", verdicts, want)
	}
	// Three batches charged (the third crossed the bound), the last not.
	if spent := budget.Spent(); spent < 30_000 || spent > 30_100 {
		t.Errorf("budget spent %d bytes, want three batches' worth", spent)
	}
	if got := DecompressionBufferBytes(compressed, 1<<20); got != 1<<20 {
		t.Errorf("a zstd batch reserves %d bytes, want the bound", got)
	}
	snappyBatch := Build(BuildSpec{Codec: CodecSnappy, FirstTimestamp: testNowMs, Records: []Record{{Value: value}}})
	if got := DecompressionBufferBytes(snappyBatch, 1<<20); got < 10_000 || got > 10_100 {
		t.Errorf("a snappy batch reserves %d bytes, want its declared decoded length", got)
	}
	if got := DecompressionBufferBytes(plain, 1<<20); got != 0 {
		t.Errorf("an uncompressed batch reserves %d bytes", got)
	}
}

// FuzzPrecheckMatchesCheck is TestPrecheckFinishMatchesCheckProduced over
// arbitrary bytes (Length and CRC repaired so the fuzzer reaches the records)
// and fuzzed limits: the pre-check's clock behind Finish's, and the topic's
// configuration changed in between or not.
func FuzzPrecheckMatchesCheck(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, false, false, int64(0), uint16(0), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, requireKeys, logAppendTime bool, nowOffsetMs int64, boundsMs uint16, configChanged bool) {
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
		precheckLimits := limits
		precheckLimits.NowMs -= int64(boundsMs) % 3_000
		if configChanged {
			precheckLimits.DecompressedBytesMax /= 4
			precheckLimits.RequireKeys = !requireKeys
		}
		checkSplitMatches(t, b, precheckLimits, limits)
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
			PrecheckProduced(batch, limits, nil)
		}
	})
	pre := PrecheckProduced(batch, limits, nil)
	b.Run("finish", func(b *testing.B) {
		for b.Loop() {
			if _, err := pre.Finish(batch, limits, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
