package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/diskio"
)

// producedRecord is what the test produced at one offset, to compare with
// what kmsg decodes from the files.
type producedRecord struct {
	key, value  []byte
	headerKey   string
	headerValue []byte
	timestampMs int64
}

// TestLogFilesReadByKmsg writes a log of several segments through core/log
// on a real disk (diskio), then reads the files as Kafka's tools would,
// without core/log or core/batch: each .log file is parsed batch after batch
// with franz-go's kmsg.RecordBatch, every CRC-32C recomputed with hash/crc32,
// offsets checked contiguous across files, and every record (kmsg.Record)
// compared with what was produced. Each .index and .timeindex entry is
// decoded per Kafka's format (big-endian int32 relative offset and int32
// position; int64 timestamp and int32 relative offset) and must point at a
// batch of its segment.
func TestLogFilesReadByKmsg(t *testing.T) {
	root := t.TempDir()
	posted := make(chan func(), 1024)
	disk, err := diskio.New(root, diskio.Options{Post: func(fn func()) { posted <- fn }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := disk.Close(); err != nil {
			t.Errorf("close disk: %v", err)
		}
	}()
	// loopUntil runs posted completions, as a node's event loop would, until
	// done reports true.
	loopUntil := func(what string, done func() bool) {
		deadline := time.After(10 * time.Second)
		for !done() {
			select {
			case fn := <-posted:
				fn()
			case <-deadline:
				t.Fatalf("%s: no completion within 10s", what)
			}
		}
	}

	cfg := testConfig()
	l, err := Open(disk, testDir, cfg, OpenOptions{NowMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	produced := map[int64]producedRecord{}
	for i := 0; i < 80; i++ {
		records := 1 + i%4
		spec := batch.BuildSpec{FirstTimestamp: int64(10_000 + 10*i), PartitionLeaderEpoch: -1}
		for r := 0; r < records; r++ {
			spec.Records = append(spec.Records, batch.Record{
				Key:            []byte(fmt.Sprintf("key-%d-%d", i, r)),
				Value:          bytes.Repeat([]byte{byte('a' + r)}, 20+i%50),
				Headers:        []batch.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}},
				TimestampDelta: int64(r * 3),
			})
		}
		result, err := l.AppendAsLeader(batch.Build(spec), int32(i/20), spec.FirstTimestamp)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		for r, rec := range spec.Records {
			produced[result.BaseOffset+int64(r)] = producedRecord{key: rec.Key, value: rec.Value,
				headerKey: rec.Headers[0].Key, headerValue: rec.Headers[0].Value,
				timestampMs: spec.FirstTimestamp + rec.TimestampDelta}
		}
	}
	if l.SegmentCount() < 3 {
		t.Fatalf("want several segments, have %d", l.SegmentCount())
	}
	flushed := false
	l.Flush(l.LogEndOffset(), func(err error) {
		if err != nil {
			t.Errorf("flush: %v", err)
		}
		flushed = true
	})
	loopUntil("flush", func() bool { return flushed })
	logEnd := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(root, testDir)
	bases := segmentBasesIn(t, dir)
	seen := map[int64]bool{}
	next := int64(0)
	for _, base := range bases {
		if base != next {
			t.Fatalf("segment %020d.log follows offsets ending at %d", base, next)
		}
		batches := readSegmentWithKmsg(t, filepath.Join(dir, fmt.Sprintf("%020d.log", base)), base, produced, seen)
		if len(batches) == 0 {
			next = base
			continue
		}
		next = batches[len(batches)-1].lastOffset + 1
		checkOffsetIndex(t, filepath.Join(dir, fmt.Sprintf("%020d.index", base)), base, batches)
		checkTimeIndex(t, filepath.Join(dir, fmt.Sprintf("%020d.timeindex", base)), base, batches)
	}
	if next != logEnd || int64(len(produced)) != logEnd || int64(len(seen)) != logEnd {
		t.Fatalf("files end at offset %d and hold %d records; LEO %d, %d records produced", next, len(seen), logEnd, len(produced))
	}
}

// kmsgBatch is where a batch lies in its segment file, as read by kmsg.
type kmsgBatch struct {
	position               int64
	baseOffset, lastOffset int64
	maxTimestamp           int64
}

// segmentBasesIn lists the base offsets of the .log files in dir, sorted.
func segmentBasesIn(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		var base int64
		if _, err := fmt.Sscanf(digits, "%020d", &base); err != nil || len(digits) != 20 {
			t.Fatalf("segment file %q is not named by a 20-digit base offset", e.Name())
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// readSegmentWithKmsg parses a .log file batch after batch with kmsg,
// checking CRCs, contiguous offsets from base, and the records against
// produced.
func readSegmentWithKmsg(t *testing.T, path string, base int64, produced map[int64]producedRecord, seen map[int64]bool) []kmsgBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var batches []kmsgBatch
	next := base
	for position := int64(0); position < int64(len(data)); {
		const lengthFieldEnd, crcCoverageStart = 12, 21 // BaseOffset+Length; CRC covers Attributes on
		if int64(len(data))-position < lengthFieldEnd {
			t.Fatalf("%s: %d trailing bytes at %d", path, int64(len(data))-position, position)
		}
		total := lengthFieldEnd + int64(int32(binary.BigEndian.Uint32(data[position+8:])))
		if total < crcCoverageStart || position+total > int64(len(data)) {
			t.Fatalf("%s: batch at %d claims %d bytes, %d remain", path, position, total, int64(len(data))-position)
		}
		raw := data[position : position+total]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatalf("%s: kmsg cannot read the batch at %d: %v", path, position, err)
		}
		if rb.Magic != 2 {
			t.Fatalf("%s: batch at %d has magic %d", path, position, rb.Magic)
		}
		if crc := crc32.Checksum(raw[crcCoverageStart:], castagnoliTable); crc != uint32(rb.CRC) {
			t.Fatalf("%s: batch at %d: CRC-32C 0x%08x, stored 0x%08x", path, position, crc, uint32(rb.CRC))
		}
		if rb.FirstOffset != next {
			t.Fatalf("%s: batch at %d starts at offset %d, want %d", path, position, rb.FirstOffset, next)
		}
		if rb.Attributes&0x7 != 0 {
			t.Fatalf("%s: batch at %d is compressed; the test produced none", path, position)
		}
		checkRecordsWithKmsg(t, path, &rb, produced, seen)
		batches = append(batches, kmsgBatch{position: position, baseOffset: rb.FirstOffset,
			lastOffset: rb.FirstOffset + int64(rb.LastOffsetDelta), maxTimestamp: rb.MaxTimestamp})
		next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		position += total
	}
	return batches
}

// checkRecordsWithKmsg decodes the batch's records with kmsg.Record and
// compares each with what was produced at its offset, noting it in seen.
func checkRecordsWithKmsg(t *testing.T, path string, rb *kmsg.RecordBatch, produced map[int64]producedRecord, seen map[int64]bool) {
	t.Helper()
	rest := rb.Records
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := binary.Varint(rest)
		if n <= 0 || int64(n)+length > int64(len(rest)) {
			t.Fatalf("%s: batch %d: record %d has a bad length prefix", path, rb.FirstOffset, i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rest[:int64(n)+length]); err != nil {
			t.Fatalf("%s: batch %d: kmsg cannot read record %d: %v", path, rb.FirstOffset, i, err)
		}
		rest = rest[int64(n)+length:]
		offset := rb.FirstOffset + int64(rec.OffsetDelta)
		want, ok := produced[offset]
		if !ok {
			t.Fatalf("%s: a record at offset %d that was never produced", path, offset)
		}
		got := producedRecord{key: rec.Key, value: rec.Value, timestampMs: rb.FirstTimestamp + rec.TimestampDelta64}
		if len(rec.Headers) == 1 {
			got.headerKey, got.headerValue = rec.Headers[0].Key, rec.Headers[0].Value
		}
		if !bytes.Equal(got.key, want.key) || !bytes.Equal(got.value, want.value) || got.headerKey != want.headerKey ||
			!bytes.Equal(got.headerValue, want.headerValue) || got.timestampMs != want.timestampMs || len(rec.Headers) != 1 {
			t.Fatalf("%s: record at offset %d is %+v, produced %+v", path, offset, got, want)
		}
		if seen[offset] {
			t.Fatalf("%s: offset %d appears twice", path, offset)
		}
		seen[offset] = true
	}
	if len(rest) != 0 {
		t.Fatalf("%s: batch %d: %d bytes after its %d records", path, rb.FirstOffset, len(rest), rb.NumRecords)
	}
}

// checkOffsetIndex decodes a Kafka offset index: 8-byte entries, big-endian
// int32 offset relative to base and int32 file position. Each entry must
// name a batch's position and its last offset (Kafka indexes the largest
// offset of the batch appended), both strictly increasing.
func checkOffsetIndex(t *testing.T, path string, base int64, batches []kmsgBatch) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data)%8 != 0 {
		t.Fatalf("%s: %d bytes, not whole 8-byte entries", path, len(data))
	}
	byPosition := map[int64]kmsgBatch{}
	for _, b := range batches {
		byPosition[b.position] = b
	}
	previousOffset, previousPosition := int64(-1), int64(-1)
	for i := 0; i < len(data); i += 8 {
		offset := base + int64(int32(binary.BigEndian.Uint32(data[i:])))
		position := int64(int32(binary.BigEndian.Uint32(data[i+4:])))
		b, ok := byPosition[position]
		if !ok || b.lastOffset != offset {
			t.Fatalf("%s: entry %d (offset %d, position %d) does not point at the start of the batch ending at that offset", path, i/8, offset, position)
		}
		if offset <= previousOffset || position <= previousPosition {
			t.Fatalf("%s: entry %d (%d, %d) does not follow (%d, %d)", path, i/8, offset, position, previousOffset, previousPosition)
		}
		previousOffset, previousPosition = offset, position
	}
	if len(batches) > 2 && len(data) == 0 {
		t.Fatalf("%s: no entries for %d batches", path, len(batches))
	}
}

// checkTimeIndex decodes a Kafka time index: 12-byte entries, big-endian
// int64 timestamp and int32 offset relative to base. Each entry must name
// the last offset of a batch of the segment and the largest timestamp up to
// that batch; timestamps strictly increase.
func checkTimeIndex(t *testing.T, path string, base int64, batches []kmsgBatch) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data)%12 != 0 {
		t.Fatalf("%s: %d bytes, not whole 12-byte entries", path, len(data))
	}
	maxSoFar := map[int64]int64{} // batch last offset -> max timestamp up to it
	running := int64(-1)
	for _, b := range batches {
		running = max(running, b.maxTimestamp)
		maxSoFar[b.lastOffset] = running
	}
	previous := int64(-1 << 63)
	for i := 0; i < len(data); i += 12 {
		timestamp := int64(binary.BigEndian.Uint64(data[i:]))
		offset := base + int64(int32(binary.BigEndian.Uint32(data[i+8:])))
		want, ok := maxSoFar[offset]
		if !ok || want != timestamp {
			t.Fatalf("%s: entry %d (%d at offset %d) does not name a batch's last offset and the max timestamp so far", path, i/12, timestamp, offset)
		}
		if timestamp <= previous {
			t.Fatalf("%s: entry %d timestamp %d after %d", path, i/12, timestamp, previous)
		}
		previous = timestamp
	}
	if len(batches) > 2 && len(data) == 0 {
		t.Fatalf("%s: no entries for %d batches", path, len(batches))
	}
}
