package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// kgoCodec maps our codec to franz-go's, for its independent compressors.
func kgoCodec(c Codec) kgo.CompressionCodec {
	return map[Codec]kgo.CompressionCodec{
		CodecNone: kgo.NoCompression(), CodecGzip: kgo.GzipCompression(), CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4: kgo.Lz4Compression(), CodecZstd: kgo.ZstdCompression(),
	}[c]
}

const testNowMs = 1_700_000_000_000

func testLimits() ProduceLimits {
	return ProduceLimits{
		BatchBytesMax:        1 << 20,
		DecompressedBytesMax: 4 << 20,
		TimestampType:        CreateTime,
		TimestampBeforeMaxMs: math.MaxInt64,
		TimestampAfterMaxMs:  math.MaxInt64,
		NowMs:                testNowMs,
	}
}

// sampleRecords covers null and empty keys and values, headers with null
// values, and a maximum timestamp that is not the last record's.
func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k0"), Value: []byte("v0"), TimestampDelta: 0},
		{Key: nil, Value: []byte{}, TimestampDelta: 7, Headers: []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}},
		{Key: []byte{}, Value: nil, TimestampDelta: 3},
		{Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("value "), 5000), TimestampDelta: 7},
	}
}

// kgoRecords decompresses a batch's records with franz-go and parses them
// with kmsg, independently of this package.
func kgoRecords(t *testing.T, rb *kmsg.RecordBatch) []kmsg.Record {
	t.Helper()
	raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&AttrCodecMask))
	if err != nil {
		t.Fatalf("franz-go decompress: %v", err)
	}
	var out []kmsg.Record
	for len(raw) > 0 {
		length, n := binary.Varint(raw)
		if n <= 0 || int(length)+n > len(raw) {
			t.Fatalf("record %d: bad length varint", len(out))
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
			t.Fatalf("record %d: kmsg: %v", len(out), err)
		}
		out = append(out, r)
		raw = raw[n+int(length):]
	}
	return out
}

func TestBuildDecodesWithFranzGo(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			spec := BuildSpec{
				BaseOffset: 42, PartitionLeaderEpoch: 3, Codec: codec, FirstTimestamp: testNowMs,
				Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 100, Transactional: true,
				Records: sampleRecords(),
			}
			b := Build(spec)
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatalf("kmsg ReadFrom: %v", err)
			}
			wantHeader := kmsg.RecordBatch{
				FirstOffset: 42, Length: int32(len(b) - LogOverheadBytes), PartitionLeaderEpoch: 3, Magic: 2,
				CRC: int32(crc32c(b[offsetAttributes:])), Attributes: int16(codec) | AttrTransactional,
				LastOffsetDelta: 3, FirstTimestamp: testNowMs, MaxTimestamp: testNowMs + 7,
				ProducerID: 9, ProducerEpoch: 2, FirstSequence: 100, NumRecords: 4, Records: rb.Records,
			}
			if diff := cmp.Diff(wantHeader, rb); diff != "" {
				t.Fatalf("header (-want +got):\n%s", diff)
			}
			got := kgoRecords(t, &rb)
			if len(got) != len(spec.Records) {
				t.Fatalf("franz-go found %d records, want %d", len(got), len(spec.Records))
			}
			for i, want := range spec.Records {
				g := got[i]
				if int(g.OffsetDelta) != i || g.TimestampDelta64 != want.TimestampDelta ||
					!sameNullable(g.Key, want.Key) || !sameNullable(g.Value, want.Value) || len(g.Headers) != len(want.Headers) {
					t.Fatalf("record %d: got %+v, want %+v", i, g, want)
				}
				for j, h := range want.Headers {
					if g.Headers[j].Key != h.Key || !sameNullable(g.Headers[j].Value, h.Value) {
						t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.Headers[j], h)
					}
				}
			}
			// And our own validator agrees, once the offset is reset as a client sends it.
			SetBaseOffset(b, 0)
			info, err := CheckProduced(b, testLimits())
			if err != nil {
				t.Fatalf("CheckProduced(Build): %v", err)
			}
			if info.RecordCount != 4 || info.MaxTimestamp != testNowMs+7 || info.MaxTimestampOffsetDelta != 1 ||
				info.ProducerID != 9 || info.ProducerEpoch != 2 || info.BaseSequence != 100 || !info.Transactional {
				t.Fatalf("info = %+v", info)
			}
		})
	}
}

func crc32c(b []byte) uint32 { return ComputeCRC(append(make([]byte, offsetAttributes), b...)) }

// sameNullable compares byte strings, telling null (nil) from empty.
func sameNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// kmsgProduced encodes records with kmsg and compresses them with compress,
// as a client would send them.
func kmsgProduced(t testing.TB, codec Codec, compress func([]byte) []byte, firstTimestamp int64, deltas ...int64) []byte {
	t.Helper()
	var raw []byte
	maxDelta := int64(0)
	for i, d := range deltas {
		r := kmsg.Record{TimestampDelta64: d, OffsetDelta: int32(i), Key: []byte(fmt.Sprint("key", i)), Value: bytes.Repeat([]byte{byte(i)}, 100*i),
			Headers: []kmsg.Header{{Key: "trace", Value: []byte("abc")}}}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
		maxDelta = max(maxDelta, d)
	}
	rb := kmsg.RecordBatch{
		Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(deltas) - 1),
		FirstTimestamp: firstTimestamp, MaxTimestamp: firstTimestamp + maxDelta,
		ProducerID: 5, ProducerEpoch: 1, FirstSequence: 0, NumRecords: int32(len(deltas)),
		Records: compress(raw),
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offsetLength:], uint32(len(b)-LogOverheadBytes))
	fixCRC(b)
	return b
}

func TestCheckProducedAcceptsFranzGoBatches(t *testing.T) {
	for _, codec := range allCodecs {
		compressors := map[string]func([]byte) []byte{
			"ours": func(raw []byte) []byte {
				out, err := Compress(codec, raw)
				if err != nil {
					t.Fatalf("Compress: %v", err)
				}
				return out
			},
			"franz-go": func(raw []byte) []byte {
				c, err := kgo.DefaultCompressor(kgoCodec(codec))
				if err != nil {
					t.Fatal(err)
				}
				if c == nil { // franz-go's "no compression"
					return raw
				}
				out, used := c.Compress(new(bytes.Buffer), raw)
				if int(used) != int(codec) {
					t.Fatalf("franz-go compressed with %v, want %v", used, codec)
				}
				return append([]byte(nil), out...)
			},
		}
		for name, compress := range compressors { // order-independent: subtests are independent
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				rawBytes := 0
				b := kmsgProduced(t, codec, func(raw []byte) []byte {
					rawBytes = len(raw)
					return compress(raw)
				}, testNowMs, 5, 9, 2, 9)
				info, err := CheckProduced(b, testLimits())
				if err != nil {
					t.Fatalf("CheckProduced: %v", err)
				}
				if codec == CodecNone {
					rawBytes = 0 // nothing was decompressed
				}
				want := ProducedInfo{Header: info.Header, RecordCount: 4, MaxTimestamp: testNowMs + 9, MaxTimestampOffsetDelta: 1,
					ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, DecompressedBytes: rawBytes}
				if diff := cmp.Diff(want, info); diff != "" {
					t.Fatalf("info (-want +got):\n%s", diff)
				}
				if info.Header.Codec() != codec || info.Header.TotalBytes() != int64(len(b)) {
					t.Fatalf("header = %+v", info.Header)
				}
			})
		}
	}
}

// TestCheckProducedAcceptsXerialSnappy covers the Java client's framing,
// with more than one 32 KiB block.
func TestCheckProducedAcceptsXerialSnappy(t *testing.T) {
	b := kmsgProduced(t, CodecSnappy, func(raw []byte) []byte { return xerial.Encode(nil, raw) }, testNowMs, make([]int64, 60)...)
	if !bytes.Contains(b, xerialMagic) {
		t.Fatal("test batch is not xerial framed")
	}
	info, err := CheckProduced(b, testLimits())
	if err != nil {
		t.Fatalf("CheckProduced: %v", err)
	}
	if info.RecordCount != 60 {
		t.Fatalf("RecordCount = %d", info.RecordCount)
	}
}

// TestCheckProducedTimestampRules covers the CreateTime bounds at and past
// their edges, int64 extremes, and LogAppendTime topics.
func TestCheckProducedTimestampRules(t *testing.T) {
	build := func(firstTimestamp int64, deltas ...int64) []byte {
		records := make([]Record, len(deltas))
		for i, d := range deltas {
			records[i] = Record{Key: []byte("k"), Value: []byte("v"), TimestampDelta: d}
		}
		return Build(BuildSpec{Codec: CodecNone, FirstTimestamp: firstTimestamp, Records: records})
	}
	bounded := testLimits()
	bounded.TimestampBeforeMaxMs = 1000
	bounded.TimestampAfterMaxMs = 10
	logAppend := bounded
	logAppend.TimestampType = LogAppendTime

	tests := []struct {
		name      string
		b         []byte
		limits    ProduceLimits
		wantMax   int64
		wantDelta int32
		wantField string
	}{
		{"at both bounds", build(testNowMs-1000, 0, 1010), bounded, testNowMs + 10, 1, ""},
		{"too old", build(testNowMs-1001, 0), bounded, 0, 0, "records[0].timestampDelta"},
		{"too new", build(testNowMs, 0, 11), bounded, 0, 0, "records[1].timestampDelta"},
		{"no timestamp is exempt", build(NoTimestamp, 0), bounded, NoTimestamp, -1, ""},
		{"far past accepted unbounded", build(math.MinInt64, 0, 1), testLimits(), NoTimestamp, -1, ""},
		{"far future accepted unbounded", build(math.MaxInt64-1, 0, 1), testLimits(), math.MaxInt64, 1, ""},
		{"far future rejected", build(math.MaxInt64-1, 0), bounded, 0, 0, "records[0].timestampDelta"},
		{"extreme rejected", build(math.MinInt64+5, 0), bounded, 0, 0, "records[0].timestampDelta"},
		{"log append time ignores them", build(5, 0, 1, 2), logAppend, testNowMs, 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := CheckProduced(tc.b, tc.limits)
			if tc.wantField != "" {
				var be *Error
				if !errors.As(err, &be) || be.Field != tc.wantField || be.Code != 32 {
					t.Fatalf("err = %v, want INVALID_TIMESTAMP on %s", err, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckProduced: %v", err)
			}
			if info.MaxTimestamp != tc.wantMax || info.MaxTimestampOffsetDelta != tc.wantDelta {
				t.Fatalf("max timestamp %d at delta %d, want %d at %d", info.MaxTimestamp, info.MaxTimestampOffsetDelta, tc.wantMax, tc.wantDelta)
			}
		})
	}
}

func TestSetMaxTimestamp(t *testing.T) {
	b := Build(BuildSpec{Codec: CodecLZ4, FirstTimestamp: 100, Records: sampleRecords()})
	before := append([]byte(nil), b...)
	SetMaxTimestamp(b, CreateTime, 107)
	if !bytes.Equal(b, before) {
		t.Fatal("SetMaxTimestamp changed a batch that already matched")
	}
	SetMaxTimestamp(b, LogAppendTime, testNowMs)
	h, err := Verify(b)
	if err != nil {
		t.Fatalf("Verify after stamping: %v", err)
	}
	if h.MaxTimestamp != testNowMs || h.Attributes&AttrLogAppendTime == 0 || h.Codec() != CodecLZ4 {
		t.Fatalf("header after stamping = %+v", h)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil || uint32(rb.CRC) != ComputeCRC(b) {
		t.Fatalf("kmsg reads CRC %#x, err %v", uint32(rb.CRC), err)
	}
	SetMaxTimestamp(b, CreateTime, 107)
	if !bytes.Equal(b, before) {
		t.Fatal("stamping CreateTime back did not restore the original bytes")
	}
}

// TestAssembleWritesEveryFieldByName: a batch taken apart (ParseHeader and
// its records) and assembled again is the same bytes, and a header field
// changed before assembling is what the result holds, read back by kmsg,
// with Length and the CRC recomputed.
func TestAssembleWritesEveryFieldByName(t *testing.T) {
	b := Build(BuildSpec{BaseOffset: 40, PartitionLeaderEpoch: 3, Codec: CodecSnappy, FirstTimestamp: 100,
		Idempotent: true, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 11, Records: sampleRecords()})
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := Assemble(h, b[HeaderBytes:]); !bytes.Equal(got, b) {
		t.Fatal("Assemble of a batch's own header and records differs from the batch")
	}
	raw, err := Decompress(h.Codec(), b[HeaderBytes:], 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h.Attributes = h.Attributes&^AttrCodecMask | int16(CodecNone)
	h.Length, h.CRC, h.Magic = -1, 0, 0 // decided by Assemble
	got := Assemble(h, raw)
	gh, err := Verify(got)
	if err != nil {
		t.Fatalf("Verify of the assembled batch: %v", err)
	}
	if gh.Codec() != CodecNone || gh.TotalBytes() != int64(len(got)) || gh.Magic != Magic || gh.CRC != ComputeCRC(got) {
		t.Fatalf("assembled header = %+v for %d bytes", gh, len(got))
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(got); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 40 || rb.PartitionLeaderEpoch != 3 || rb.ProducerID != 7 || rb.ProducerEpoch != 2 ||
		rb.FirstSequence != 11 || rb.FirstTimestamp != 100 || rb.NumRecords != int32(len(sampleRecords())) ||
		!bytes.Equal(rb.Records, raw) {
		t.Fatalf("kmsg reads the assembled batch as %+v", rb)
	}
}

// TestDecompressionBombs gives every codec 64 MiB of zeros, which compress to
// almost nothing, under a 1 MiB bound: each must be refused with
// MESSAGE_TOO_LARGE without allocating anything near 64 MiB.
func TestDecompressionBombs(t *testing.T) {
	zeros := make([]byte, 64<<20)
	streamingZstd := func() []byte { // no content size in the frame header
		var buf bytes.Buffer
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	payloads := map[string]struct {
		codec Codec
		data  []byte
	}{
		"gzip":          {CodecGzip, mustCompress(t, CodecGzip, zeros)},
		"snappy":        {CodecSnappy, mustCompress(t, CodecSnappy, zeros)},
		"snappy xerial": {CodecSnappy, xerial.Encode(nil, zeros)},
		"lz4":           {CodecLZ4, mustCompress(t, CodecLZ4, zeros)},
		"zstd":          {CodecZstd, mustCompress(t, CodecZstd, zeros)},
		"zstd no fcs":   {CodecZstd, streamingZstd()},
	}
	limits := testLimits()
	limits.BatchBytesMax = 64 << 20
	limits.DecompressedBytesMax = 1 << 20
	for name, p := range payloads { // order-independent: subtests are independent
		t.Run(name, func(t *testing.T) {
			b := rawBatch(p.data, 1, func(b []byte) { binary.BigEndian.PutUint16(b[offsetAttributes:], uint16(p.codec)) })
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := CheckProduced(b, limits)
			runtime.ReadMemStats(&after)
			var be *Error
			if !errors.As(err, &be) || be.Code != 10 || be.Field != "records" {
				t.Fatalf("err = %v, want MESSAGE_TOO_LARGE on records", err)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 12<<20 {
				t.Fatalf("refusing a %d-byte bomb allocated %d bytes", len(p.data), allocated)
			}
		})
	}
}

func mustCompress(t testing.TB, codec Codec, raw []byte) []byte {
	t.Helper()
	out, err := Compress(codec, raw)
	if err != nil {
		t.Fatalf("Compress(%v): %v", codec, err)
	}
	return out
}

func TestCompressRejectsUnknownCodec(t *testing.T) {
	_, err := Compress(Codec(6), []byte("x"))
	var be *Error
	if !errors.As(err, &be) || be.Code != 76 {
		t.Fatalf("err = %v, want UNSUPPORTED_COMPRESSION_TYPE", err)
	}
}

// rawBatch wraps a records section (compressed or not) in a header claiming
// count records, lets mutate change the header, then fixes Length and CRC.
func rawBatch(records []byte, count int32, mutate func([]byte)) []byte {
	b := make([]byte, HeaderBytes, HeaderBytes+len(records))
	b[offsetMagic] = Magic
	binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint64(b[offsetFirstTimestamp:], testNowMs)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], testNowMs)
	binary.BigEndian.PutUint64(b[offsetProducerID:], math.MaxUint64) // -1
	binary.BigEndian.PutUint16(b[offsetProducerEpoch:], math.MaxUint16)
	binary.BigEndian.PutUint32(b[offsetBaseSequence:], math.MaxUint32)
	binary.BigEndian.PutUint32(b[offsetRecordCount:], uint32(count))
	b = append(b, records...)
	if mutate != nil {
		mutate(b)
	}
	binary.BigEndian.PutUint32(b[offsetLength:], uint32(len(b)-LogOverheadBytes))
	fixCRC(b)
	return b
}

// rec hand-encodes one record from its body's parts, so tests can break any
// field. Integers are varints; []byte parts are copied as they are.
func rec(parts ...any) []byte { return withLength(body(parts...)) }

func body(parts ...any) []byte {
	var out []byte
	for _, p := range parts {
		switch v := p.(type) {
		case int:
			out = binary.AppendVarint(out, int64(v))
		case int64:
			out = binary.AppendVarint(out, v)
		case []byte:
			out = append(out, v...)
		case string:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("rec: part %T", p))
		}
	}
	return out
}

func withLength(b []byte) []byte { return append(binary.AppendVarint(nil, int64(len(b))), b...) }

var attr = []byte{0}

// goodRec is a valid record with offset delta i: key "k", value "v", no headers.
func goodRec(i int) []byte { return rec(attr, 0, i, 1, "k", 1, "v", 0) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestCheckProducedRejects(t *testing.T) {
	const (
		corrupt     = 2
		tooLarge    = 10
		badTime     = 32
		unsupported = 76
		invalid     = 87
	)
	setAttr := func(a uint16) func([]byte) {
		return func(b []byte) { binary.BigEndian.PutUint16(b[offsetAttributes:], a) }
	}
	overflow64 := bytes.Repeat([]byte{0xff}, 10)
	overflow64 = append(overflow64, 0x01)
	sixByteVarint := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}
	keyless := testLimits()
	keyless.RequireKeys = true
	tiny := testLimits()
	tiny.BatchBytesMax = 100
	tinyDecompressed := testLimits()
	tinyDecompressed.DecompressedBytesMax = 10
	good := rawBatch(goodRec(0), 1, nil)

	tests := []struct {
		name   string
		b      []byte
		limits ProduceLimits
		field  string
		code   int16
	}{
		{"two batches", cat(good, good), testLimits(), "length", invalid},
		{"base offset set", rawBatch(goodRec(0), 1, func(b []byte) { SetBaseOffset(b, 7) }), testLimits(), "baseOffset", invalid},
		{"over max.message.bytes", rawBatch(rec(attr, 0, 0, 1, "k", 100, bytes.Repeat([]byte("v"), 100), 0), 1, nil), tiny, "length", tooLarge},
		{"bad crc", func() []byte { b := rawBatch(goodRec(0), 1, nil); b[len(b)-1] ^= 0xff; return b }(), testLimits(), "crc", corrupt},
		// Bytes holding no whole batch: Kafka's validateRecords finds no
		// batch (INVALID_RECORD), unless the length or magic is corrupt.
		{"torn", good[:len(good)-1], testLimits(), "length", invalid},
		{"torn inside the header", good[:30], testLimits(), "length", invalid},
		{"too short for length and magic", good[:16], testLimits(), "length", invalid},
		{"no bytes", nil, testLimits(), "length", invalid},
		{"length below a record's overhead", func() []byte {
			b := rawBatch(goodRec(0), 1, nil)
			binary.BigEndian.PutUint32(b[offsetLength:], 13)
			return b
		}(), testLimits(), "length", corrupt},
		{"magic 1", rawBatch(goodRec(0), 1, func(b []byte) { b[offsetMagic] = 1 }), testLimits(), "magic", invalid},
		{"magic 3", rawBatch(goodRec(0), 1, func(b []byte) { b[offsetMagic] = 3 }), testLimits(), "magic", corrupt},
		// Count and offset span faults are LogValidator's INVALID_RECORD,
		// whatever Verify calls them in a stored batch.
		{"empty batch", rawBatch(nil, 0, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 0) }), testLimits(), "recordCount", invalid},
		{"empty batch spanning no offsets", rawBatch(nil, 0, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 0xffffffff) }), testLimits(), "recordCount", invalid},
		{"negative record count", rawBatch(goodRec(0), 1, func(b []byte) { binary.BigEndian.PutUint32(b[offsetRecordCount:], 0xffffffff) }), testLimits(), "recordCount", invalid},
		{"count above offset span", rawBatch(cat(goodRec(0), goodRec(1)), 2, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 0) }), testLimits(), "recordCount", invalid},
		{"empty batch with record bytes", rawBatch(goodRec(0), 0, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 0) }), testLimits(), "recordCount", invalid},
		{"count below offset span", rawBatch(goodRec(0), 1, func(b []byte) { binary.BigEndian.PutUint32(b[offsetLastOffsetDelta:], 1) }), testLimits(), "recordCount", invalid},
		{"control batch", rawBatch(goodRec(0), 1, setAttr(AttrControl)), testLimits(), "attributes", invalid},
		{"producer sets log append time", rawBatch(goodRec(0), 1, setAttr(AttrLogAppendTime)), testLimits(), "attributes", badTime},
		{"producer id without sequence", rawBatch(goodRec(0), 1, func(b []byte) { binary.BigEndian.PutUint64(b[offsetProducerID:], 3) }), testLimits(), "baseSequence", invalid},
		{"transaction without producer", rawBatch(goodRec(0), 1, setAttr(AttrTransactional)), testLimits(), "producerId", invalid},
		{"unknown codec", rawBatch(goodRec(0), 1, setAttr(7)), testLimits(), "attributes", unsupported},
		{"corrupt gzip", rawBatch([]byte("not gzip at all"), 1, setAttr(uint16(CodecGzip))), testLimits(), "records", corrupt},
		{"corrupt snappy", rawBatch([]byte{0x05, 0xff, 0xff}, 1, setAttr(uint16(CodecSnappy))), testLimits(), "records", corrupt},
		{"torn xerial", rawBatch(append(xerial.Encode(nil, goodRec(0)), 0, 0), 1, setAttr(uint16(CodecSnappy))), testLimits(), "records", corrupt},
		{"corrupt lz4", rawBatch([]byte{0x04, 0x22, 0x4d, 0x18, 0xff}, 1, setAttr(uint16(CodecLZ4))), testLimits(), "records", corrupt},
		{"corrupt zstd", rawBatch([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00}, 1, setAttr(uint16(CodecZstd))), testLimits(), "records", corrupt},
		{"decompressed too large", rawBatch(mustCompress(t, CodecGzip, rec(attr, 0, 0, -1, 20, bytes.Repeat([]byte("v"), 20), 0)), 1, setAttr(uint16(CodecGzip))), tinyDecompressed, "records", tooLarge},
		{"record length cut off", rawBatch([]byte{0x80}, 1, nil), testLimits(), "records[0].length", invalid},
		{"record length beyond batch", rawBatch(goodRec(0)[:5], 1, nil), testLimits(), "records[0].length", invalid},
		{"record length negative", rawBatch(cat([]byte{0x01}, goodRec(0)[1:]), 1, nil), testLimits(), "records[0].length", invalid},
		{"record longer than its fields", rawBatch(withLength(body(attr, 0, 0, 1, "k", 1, "v", 0, "x")), 1, nil), testLimits(), "records[0].length", invalid},
		{"no attributes byte", rawBatch(withLength(nil), 1, nil), testLimits(), "records[0].attributes", invalid},
		{"timestamp varint overflows", rawBatch(withLength(cat(attr, overflow64)), 1, nil), testLimits(), "records[0].timestampDelta", invalid},
		{"offset delta overflows int32", rawBatch(withLength(cat(attr, []byte{0}, sixByteVarint)), 1, nil), testLimits(), "records[0].offsetDelta", invalid},
		{"offset delta out of order", rawBatch(cat(goodRec(0), goodRec(0)), 2, nil), testLimits(), "records[1].offsetDelta", invalid},
		{"key length below -1", rawBatch(rec(attr, 0, 0, -2, 1, "v", 0), 1, nil), testLimits(), "records[0].keyLength", invalid},
		{"key beyond record", rawBatch(rec(attr, 0, 0, 50, "k"), 1, nil), testLimits(), "records[0].keyLength", invalid},
		{"value beyond record", rawBatch(rec(attr, 0, 0, -1, 50, "v"), 1, nil), testLimits(), "records[0].valueLength", invalid},
		{"value length cut off", rawBatch(rec(attr, 0, 0, -1), 1, nil), testLimits(), "records[0].valueLength", invalid},
		{"negative header count", rawBatch(rec(attr, 0, 0, -1, -1, -1), 1, nil), testLimits(), "records[0].headerCount", invalid},
		{"header count beyond record", rawBatch(rec(attr, 0, 0, -1, -1, 1_000_000, 0, 0), 1, nil), testLimits(), "records[0].headerCount", invalid},
		{"null header key", rawBatch(rec(attr, 0, 0, -1, -1, 1, -1, -1), 1, nil), testLimits(), "records[0].headers[0].keyLength", invalid},
		{"header value beyond record", rawBatch(rec(attr, 0, 0, -1, -1, 2, 1, "h", -1, 1, "h", 9, "v"), 1, nil), testLimits(), "records[0].headers[1].valueLength", invalid},
		{"records after the declared count", rawBatch(cat(goodRec(0), goodRec(1)), 1, nil), testLimits(), "records", invalid},
		{"fewer records than declared", rawBatch(goodRec(0), 2, nil), testLimits(), "recordCount", invalid},
		{"compressed fewer records than declared", rawBatch(mustCompress(t, CodecZstd, goodRec(0)), 2, setAttr(uint16(CodecZstd))), testLimits(), "recordCount", invalid},
		{"null key on compacted topic", rawBatch(cat(goodRec(0), rec(attr, 0, 1, -1, 1, "v", 0)), 2, nil), keyless, "records[1].key", invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckProduced(tc.b, tc.limits)
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("CheckProduced = %v, want *Error", err)
			}
			if be.Field != tc.field || be.Code != tc.code {
				t.Fatalf("got field %q code %d (%v); want field %q code %d", be.Field, be.Code, err, tc.field, tc.code)
			}
			if !strings.HasPrefix(err.Error(), "batch field "+tc.field+": ") || be.Reason == "" {
				t.Fatalf("Error() = %q", err)
			}
		})
	}
	// The baseline the mutations start from is itself accepted, so each
	// rejection above is caused by its mutation.
	for _, ok := range [][]byte{good, rawBatch(cat(goodRec(0), goodRec(1)), 2, nil), rawBatch(rec(attr, 0, 0, -1, -1, 2, 1, "h", -1, 0, 0), 1, nil)} {
		if _, err := CheckProduced(ok, testLimits()); err != nil {
			t.Fatalf("baseline rejected: %v", err)
		}
	}
}

func TestCheckProducedPanicsOnImpossibleLimits(t *testing.T) {
	b := Build(BuildSpec{Records: []Record{{Key: []byte("k")}}})
	for name, mutate := range map[string]func(*ProduceLimits){ // order-independent: subtests are independent
		"zero batch max":        func(l *ProduceLimits) { l.BatchBytesMax = 0 },
		"zero decompressed max": func(l *ProduceLimits) { l.DecompressedBytesMax = 0 },
		"huge decompressed max": func(l *ProduceLimits) { l.DecompressedBytesMax = math.MaxInt32 + 1 },
		"negative before":       func(l *ProduceLimits) { l.TimestampBeforeMaxMs = -1 },
		"unknown type":          func(l *ProduceLimits) { l.TimestampType = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			limits := testLimits()
			mutate(&limits)
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			_, _ = CheckProduced(b, limits)
		})
	}
}
