package log

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/sim/memdisk"
)

// testDecompressedBytesMax bounds decompression in these tests' lookups.
const testDecompressedBytesMax = 1 << 20

// recordTime is one record's offset and timestamp, and its batch's leader
// epoch, as a consumer sees them.
type recordTime struct {
	offset, timestamp int64
	epoch             int32
}

// recordTimes decodes the records of stamped batches with franz-go alone,
// independently of package batch (the oracle for lookups by timestamp).
func recordTimes(t fataler, batches ...[]byte) []recordTime {
	t.Helper()
	var out []recordTime
	for _, b := range batches {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg: %v", err)
		}
		raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&batch.AttrCodecMask))
		if err != nil {
			t.Fatalf("franz-go decompress: %v", err)
		}
		for len(raw) > 0 {
			length, n := binary.Varint(raw)
			if n <= 0 || int(length)+n > len(raw) {
				t.Fatalf("bad record length varint")
			}
			var r kmsg.Record
			if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
				t.Fatalf("kmsg record: %v", err)
			}
			raw = raw[n+int(length):]
			ts := rb.FirstTimestamp + r.TimestampDelta64
			if rb.Attributes&batch.AttrLogAppendTime != 0 {
				ts = rb.MaxTimestamp
			}
			out = append(out, recordTime{offset: rb.FirstOffset + int64(r.OffsetDelta), timestamp: ts, epoch: rb.PartitionLeaderEpoch})
		}
	}
	return out
}

// firstRecordAtOrAfter is ListOffsets by timestamp over decoded records:
// the first record at or above minOffset whose timestamp >= timestampMs.
func firstRecordAtOrAfter(records []recordTime, timestampMs, minOffset int64) (TimestampOffset, bool) {
	for _, r := range records {
		if r.offset >= minOffset && r.timestamp >= timestampMs {
			return TimestampOffset{Offset: r.offset, TimestampMs: r.timestamp, LeaderEpoch: r.epoch}, true
		}
	}
	return TimestampOffset{}, false
}

// TestOffsetForTimestamp: the answer is the exact record, not its batch:
// over batches of three records each (one going back in time, several
// compressed, epochs changing), every target gets the first record at or
// after it, with its batch's leader epoch, as franz-go decodes the log.
func TestOffsetForTimestamp(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	var stamped [][]byte
	for i := 0; i < 60; i++ {
		ts := int64(1000 + 10*i)
		if i == 30 {
			ts = 500
		}
		spec := batch.BuildSpec{FirstTimestamp: ts, PartitionLeaderEpoch: -1, Codec: batch.Codec(i % 5)}
		for r := range 3 {
			spec.Records = append(spec.Records, batch.Record{Value: []byte(fmt.Sprint(i, r)), TimestampDelta: int64(r)})
		}
		epoch := int32(i / 20)
		result, err := l.AppendAsLeader(batch.Build(spec), epoch, ts)
		if err != nil {
			t.Fatal(err)
		}
		want := batch.Build(spec)
		batch.SetBaseOffset(want, result.BaseOffset)
		batch.SetPartitionLeaderEpoch(want, epoch)
		stamped = append(stamped, want)
	}
	records := recordTimes(t, stamped...)
	for target := int64(400); target < 1700; target++ {
		want, wantFound := firstRecordAtOrAfter(records, target, 0)
		got, found, err := l.OffsetForTimestamp(target, testDecompressedBytesMax)
		if err != nil {
			t.Fatal(err)
		}
		if found != wantFound || (found && got != want) {
			t.Fatalf("OffsetForTimestamp(%d) = (%+v, %v), want (%+v, %v)", target, got, found, want, wantFound)
		}
	}
	got, found, err := l.MaxTimestamp(testDecompressedBytesMax)
	if err != nil || !found || got != (TimestampOffset{Offset: l.LogEndOffset() - 1, TimestampMs: 1000 + 10*59 + 2, LeaderEpoch: 2}) {
		t.Fatalf("MaxTimestamp = (%+v, %v, %v)", got, found, err)
	}
}

// TestTimestampLookupsWithinABatch: the record found may lie inside its
// batch, for MAX_TIMESTAMP too (KAFKA-16310: not the batch's last offset),
// and the log start offset can cut a batch: records below it are skipped,
// and a batch whose only late-enough records lie below it passes the answer
// on to the next batch.
func TestTimestampLookupsWithinABatch(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	deltas := [][]int64{{0, 90, 5, 90}, {1, 2, 3}, {50, 60, 10}}
	var stamped [][]byte
	for i, ds := range deltas {
		spec := batch.BuildSpec{FirstTimestamp: 1000, PartitionLeaderEpoch: -1, Codec: batch.CodecZstd}
		for _, d := range ds {
			spec.Records = append(spec.Records, batch.Record{Value: []byte("v"), TimestampDelta: d})
		}
		result, err := l.AppendAsLeader(batch.Build(spec), int32(i), 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := batch.Build(spec)
		batch.SetBaseOffset(want, result.BaseOffset)
		batch.SetPartitionLeaderEpoch(want, int32(i))
		stamped = append(stamped, want)
	}
	check := func(target int64, want TimestampOffset, wantFound bool) {
		t.Helper()
		got, found, err := l.OffsetForTimestamp(target, testDecompressedBytesMax)
		if err != nil || found != wantFound || (found && got != want) {
			t.Fatalf("OffsetForTimestamp(%d) with log start %d = (%+v, %v, %v), want (%+v, %v)", target, l.LogStartOffset(), got, found, err, want, wantFound)
		}
		if o, ok := firstRecordAtOrAfter(recordTimes(t, stamped...), target, l.LogStartOffset()); ok != wantFound || (ok && o != want) {
			t.Fatalf("the test's own expectation for %d disagrees with franz-go's decoding: %+v, %v", target, o, ok)
		}
	}
	check(1004, TimestampOffset{Offset: 1, TimestampMs: 1090, LeaderEpoch: 0}, true)
	check(1055, TimestampOffset{Offset: 1, TimestampMs: 1090, LeaderEpoch: 0}, true)
	max, found, err := l.MaxTimestamp(testDecompressedBytesMax)
	if err != nil || !found || max != (TimestampOffset{Offset: 1, TimestampMs: 1090, LeaderEpoch: 0}) {
		t.Fatalf("MaxTimestamp = (%+v, %v, %v), want offset 1, the first record carrying 1090", max, found, err)
	}
	if err := l.AdvanceStartOffset(2); err != nil { // inside batch 0
		t.Fatal(err)
	}
	check(1004, TimestampOffset{Offset: 2, TimestampMs: 1005, LeaderEpoch: 0}, true)
	check(1055, TimestampOffset{Offset: 3, TimestampMs: 1090, LeaderEpoch: 0}, true)
	if err := l.AdvanceStartOffset(4); err != nil { // batch 0 is all below it
		t.Fatal(err)
	}
	check(1055, TimestampOffset{Offset: 8, TimestampMs: 1060, LeaderEpoch: 2}, true)
	check(1091, TimestampOffset{}, false)
}

// TestTimestampLookupOverTheDecompressionBound: a batch that does not
// decompress within the bound is answered at batch granularity, never an
// error: its first offset at or above the log start and its max timestamp.
func TestTimestampLookupOverTheDecompressionBound(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	spec := batch.BuildSpec{FirstTimestamp: 1000, PartitionLeaderEpoch: -1, Codec: batch.CodecGzip}
	for d := range int64(4) {
		spec.Records = append(spec.Records, batch.Record{Value: make([]byte, 1000), TimestampDelta: d})
	}
	if _, err := l.AppendAsLeader(batch.Build(spec), 7, 1000); err != nil {
		t.Fatal(err)
	}
	got, found, err := l.OffsetForTimestamp(1002, 100)
	if err != nil || !found || got != (TimestampOffset{Offset: 0, TimestampMs: 1003, LeaderEpoch: 7}) {
		t.Fatalf("OffsetForTimestamp over the bound = (%+v, %v, %v), want the batch: offset 0, max timestamp 1003", got, found, err)
	}
	if got, found, err = l.OffsetForTimestamp(1002, testDecompressedBytesMax); err != nil || !found || got.Offset != 2 {
		t.Fatalf("OffsetForTimestamp within the bound = (%+v, %v, %v), want offset 2", got, found, err)
	}
}
