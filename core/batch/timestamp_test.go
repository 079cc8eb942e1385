package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// franzRecordTimes decodes b's records with franz-go alone and returns each
// record's offset and timestamp as a consumer would see them (kgo's rule:
// LogAppendTime batches give every record the max timestamp).
func franzRecordTimes(b []byte) (offsets, timestamps []int64, err error) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return nil, nil, err
	}
	raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&AttrCodecMask))
	if err != nil {
		return nil, nil, err
	}
	for len(raw) > 0 {
		length, n := binary.Varint(raw)
		if n <= 0 || int(length)+n > len(raw) {
			return nil, nil, errors.New("bad record length varint")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
			return nil, nil, err
		}
		raw = raw[n+int(length):]
		ts := rb.FirstTimestamp + r.TimestampDelta64
		if rb.Attributes&AttrLogAppendTime != 0 {
			ts = rb.MaxTimestamp
		}
		offsets = append(offsets, rb.FirstOffset+int64(r.OffsetDelta))
		timestamps = append(timestamps, ts)
	}
	return offsets, timestamps, nil
}

// TestFindRecordByTimestampMatchesFranzGo: over random batches (every codec,
// timestamps out of order, LogAppendTime or not), the record found is the
// first one, in offset order, at or above minOffset with a timestamp at
// least the target, as franz-go decodes the same bytes.
func TestFindRecordByTimestampMatchesFranzGo(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := BuildSpec{
			BaseOffset:     rapid.Int64Range(0, 1000).Draw(t, "baseOffset"),
			Codec:          rapid.SampledFrom(allCodecs).Draw(t, "codec"),
			FirstTimestamp: testNowMs,
		}
		count := rapid.IntRange(1, 12).Draw(t, "records")
		for i := range count {
			spec.Records = append(spec.Records, Record{
				Value:          []byte(fmt.Sprintf("value %d", i)),
				TimestampDelta: rapid.Int64Range(-5, 20).Draw(t, "timestampDelta"),
			})
		}
		b := Build(spec)
		h, err := Verify(b)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if rapid.Bool().Draw(t, "logAppendTime") {
			SetMaxTimestamp(b, LogAppendTime, testNowMs+rapid.Int64Range(0, 30).Draw(t, "appendTime"))
			if h, err = Verify(b); err != nil {
				t.Fatalf("Verify after SetMaxTimestamp: %v", err)
			}
		}
		target := testNowMs + rapid.Int64Range(-8, h.MaxTimestamp-testNowMs+2).Draw(t, "target")
		minOffset := spec.BaseOffset + rapid.Int64Range(-2, int64(count)+1).Draw(t, "minOffsetDelta")

		offsets, timestamps, err := franzRecordTimes(b)
		if err != nil {
			t.Fatalf("franz-go: %v", err)
		}
		wantFound := false
		var wantOffset, wantTs int64
		for i := range offsets {
			if offsets[i] >= minOffset && timestamps[i] >= target {
				wantOffset, wantTs, wantFound = offsets[i], timestamps[i], true
				break
			}
		}
		offset, ts, found, err := FindRecordByTimestamp(b, target, minOffset, 1<<20)
		if err != nil {
			t.Fatalf("FindRecordByTimestamp: %v", err)
		}
		if found != wantFound || (found && (offset != wantOffset || ts != wantTs)) {
			t.Fatalf("FindRecordByTimestamp(target %d, min %d) = (%d, %d, %v), want (%d, %d, %v); records at %v with %v",
				target, minOffset, offset, ts, found, wantOffset, wantTs, wantFound, offsets, timestamps)
		}
	})
}

// TestFindRecordByTimestampBadInput: a truncated batch and a compressed
// batch beyond the decompression bound are errors naming the field, never
// a panic or a wrong answer.
func TestFindRecordByTimestampBadInput(t *testing.T) {
	b := Build(BuildSpec{Codec: CodecGzip, FirstTimestamp: testNowMs, Records: sampleRecords()})
	var berr *Error
	if _, _, _, err := FindRecordByTimestamp(b[:len(b)-1], testNowMs, 0, 1<<20); !errors.As(err, &berr) || berr.Field != "length" {
		t.Fatalf("truncated batch: %v, want an error naming length", err)
	}
	if _, _, _, err := FindRecordByTimestamp(b, testNowMs, 0, 100); !errors.As(err, &berr) || berr.Field != "records" {
		t.Fatalf("decompression bound: %v, want an error naming records", err)
	}
}
