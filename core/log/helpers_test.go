package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

const testDir = "topic-0"

// testConfig is small enough that a few batches roll segments and fill
// indexes.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// makeBatch builds a valid batch of records with values of valueBytes, the
// i-th record at firstTimestamp+i. Offsets and epoch are left for the log.
func makeBatch(records int, firstTimestamp int64, valueBytes int) []byte {
	spec := batch.BuildSpec{FirstTimestamp: firstTimestamp, PartitionLeaderEpoch: -1}
	for i := 0; i < records; i++ {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, valueBytes)
		spec.Records = append(spec.Records, batch.Record{Key: []byte(fmt.Sprint(i)), Value: value, TimestampDelta: int64(i)})
	}
	return batch.Build(spec)
}

// makeStampedBatch builds a batch as a leader would have stamped it, for
// follower appends.
func makeStampedBatch(baseOffset int64, epoch int32, records int, firstTimestamp int64) []byte {
	b := makeBatch(records, firstTimestamp, 10)
	batch.SetBaseOffset(b, baseOffset)
	batch.SetPartitionLeaderEpoch(b, epoch)
	return b
}

func openLog(t *testing.T, disk env.Disk, cfg Config, opts OpenOptions) *Log {
	t.Helper()
	l, err := Open(disk, testDir, cfg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// appended records what a test appended: a copy of each batch as stamped.
type appended struct {
	baseOffset int64
	bytes      []byte
}

// appendLeader appends a batch and returns a copy of its stamped bytes.
func appendLeader(t *testing.T, l *Log, records int, timestamp int64, epoch int32) appended {
	t.Helper()
	b := makeBatch(records, timestamp, 40)
	segments := l.SegmentCount()
	result, err := l.AppendAsLeader(b, epoch, timestamp)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	if result.Rolled != (l.SegmentCount() != segments) {
		t.Fatalf("append reports Rolled %v, segments %d -> %d", result.Rolled, segments, l.SegmentCount())
	}
	if result.LastOffset-result.BaseOffset != int64(records-1) {
		t.Fatalf("append of %d records got offsets [%d, %d]", records, result.BaseOffset, result.LastOffset)
	}
	// b now belongs to the log; rebuild the same bytes independently.
	want := makeBatch(records, timestamp, 40)
	batch.SetBaseOffset(want, result.BaseOffset)
	batch.SetPartitionLeaderEpoch(want, epoch)
	return appended{baseOffset: result.BaseOffset, bytes: want}
}

// readBatches reads from offset with the given limits and splits the result
// into verified batches.
func readBatches(t *testing.T, l *Log, offset int64, maxBytes int32, maxOffset int64, minOne bool) ([][]byte, ReadResult) {
	t.Helper()
	result, err := l.Read(offset, maxBytes, maxOffset, minOne)
	if err != nil {
		t.Fatalf("Read(%d): %v", offset, err)
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatalf("CopyRegions: %v", err)
	}
	if int64(len(data)) != result.Bytes() {
		t.Fatalf("copied %d bytes, regions say %d", len(data), result.Bytes())
	}
	return splitVerified(t, data), result
}

// splitVerified splits data into batches, failing on any that does not pass
// batch.Verify.
func splitVerified(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.TotalBytes() > int64(len(data)) || h.Length < 0 {
			t.Fatalf("read returned a partial batch: %v (%d bytes left)", err, len(data))
		}
		if _, err := batch.Verify(data[:h.TotalBytes()]); err != nil {
			t.Fatalf("read returned a corrupt batch at offset %d: %v", h.BaseOffset, err)
		}
		out = append(out, data[:h.TotalBytes()])
		data = data[h.TotalBytes():]
	}
	return out
}

// readAll reads the whole log, batch by batch order, and checks contiguity.
func readAll(t *testing.T, l *Log) [][]byte {
	t.Helper()
	batches, result := readBatches(t, l, l.LogStartOffset(), 1<<30, l.LogEndOffset(), true)
	next := result.FirstOffset
	for _, b := range batches {
		h, _ := batch.ParseHeader(b)
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want %d: offsets not contiguous", h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	if len(batches) > 0 && next != l.LogEndOffset() {
		t.Fatalf("last batch ends at %d, LEO %d", next, l.LogEndOffset())
	}
	return batches
}

// flushAll flushes to the LEO and runs the disk's completions.
func flushAll(t *testing.T, l *Log, disk *memdisk.Disk) {
	t.Helper()
	var flushErr error
	ran := false
	l.Flush(l.LogEndOffset(), func(err error) { flushErr, ran = err, true })
	for disk.RunPending() > 0 {
	}
	if !ran || flushErr != nil {
		t.Fatalf("flush: ran=%v err=%v", ran, flushErr)
	}
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("after flush the recovery point is %d, LEO %d", l.RecoveryPoint(), l.LogEndOffset())
	}
}

func baseOffsetOf(b []byte) int64 {
	h, _ := batch.ParseHeader(b)
	return h.BaseOffset
}

func isErr(err, target error) bool { return errors.Is(err, target) }
