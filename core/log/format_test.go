package log

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/sim/memdisk"
)

// TestOnDiskFormatReadableByKafkaClients checks the files against Kafka's
// format with an independent decoder: franz-go's kmsg.RecordBatch reads every
// batch of every .log file with a valid CRC-32C and contiguous offsets, and
// every .index and .timeindex entry points where Kafka's would.
func TestOnDiskFormatReadableByKafkaClients(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	for i := 0; i < 70; i++ {
		appendLeader(t, l, 1+i%4, int64(5000+i), int32(i/20))
	}
	names, _ := disk.List(testDir)
	next := int64(0)
	for _, name := range names {
		if !strings.HasSuffix(name, logSuffix) {
			continue
		}
		base, _, _ := parseSegmentFileName(name)
		data, err := disk.ReadFile(testDir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		starts := map[int64]int64{} // position -> last offset
		for position := int64(0); position < int64(len(data)); {
			length := int64(binary.BigEndian.Uint32(data[position+8:]))
			raw := data[position : position+12+length]
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw); err != nil {
				t.Fatalf("%s at %d: kmsg cannot read the batch: %v", name, position, err)
			}
			if crc := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); crc != rb.CRC {
				t.Fatalf("%s at %d: CRC %x, stored %x", name, position, crc, rb.CRC)
			}
			if rb.FirstOffset != next || rb.Magic != 2 || rb.PartitionLeaderEpoch < 0 {
				t.Fatalf("%s at %d: offset %d (want %d), magic %d, epoch %d", name, position, rb.FirstOffset, next, rb.Magic, rb.PartitionLeaderEpoch)
			}
			starts[position] = rb.FirstOffset + int64(rb.LastOffsetDelta)
			next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			position += int64(len(raw))
		}
		checkIndexFiles(t, disk, base, starts)
	}
	if next != l.LogEndOffset() {
		t.Fatalf("segments end at %d, LEO %d", next, l.LogEndOffset())
	}
}

// checkIndexFiles decodes a segment's indexes by hand: offset index entries
// (int32 relative offset, int32 position) name a batch's last offset and its
// start; time index entries (int64 timestamp, int32 relative offset) have
// increasing timestamps and name a batch's last offset.
func checkIndexFiles(t *testing.T, disk *memdisk.Disk, base int64, starts map[int64]int64) {
	t.Helper()
	index, _ := disk.ReadFile(testDir + "/" + segmentFileName(base, indexSuffix))
	if len(index)%8 != 0 {
		t.Fatalf("segment %d: offset index of %d bytes", base, len(index))
	}
	lastOffsets := map[int64]bool{}
	for _, last := range starts {
		lastOffsets[last] = true
	}
	for i := 0; i < len(index); i += 8 {
		relative := int64(binary.BigEndian.Uint32(index[i:]))
		position := int64(binary.BigEndian.Uint32(index[i+4:]))
		if last, ok := starts[position]; !ok || last != base+relative {
			t.Fatalf("segment %d: index entry (%d, %d) does not name the batch at that position", base, relative, position)
		}
	}
	timeIndex, _ := disk.ReadFile(testDir + "/" + segmentFileName(base, timeIndexSuffix))
	if len(timeIndex)%12 != 0 {
		t.Fatalf("segment %d: time index of %d bytes", base, len(timeIndex))
	}
	previous := int64(-1)
	for i := 0; i < len(timeIndex); i += 12 {
		timestamp := int64(binary.BigEndian.Uint64(timeIndex[i:]))
		relative := int64(binary.BigEndian.Uint32(timeIndex[i+8:]))
		if timestamp <= previous || !lastOffsets[base+relative] {
			t.Fatalf("segment %d: time index entry (%d, %d) out of order or not a batch's last offset", base, timestamp, relative)
		}
		previous = timestamp
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
	for field, mutate := range map[string]func(*Config){
		"segment.bytes":        func(c *Config) { c.SegmentBytes = 10 },
		"segment.ms":           func(c *Config) { c.SegmentMs = 0 },
		"segment.index.bytes":  func(c *Config) { c.SegmentIndexBytes = 8 },
		"index.interval.bytes": func(c *Config) { c.IndexIntervalBytes = -1 },
		"retention.ms":         func(c *Config) { c.RetentionMs = -2 },
		"retention.bytes":      func(c *Config) { c.RetentionBytes = -5 },
		"flush.messages":       func(c *Config) { c.FlushIntervalMessages = 0 },
		"flush.ms":             func(c *Config) { c.FlushIntervalMs = -1 },
	} {
		cfg := DefaultConfig()
		mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("invalid %s: got %v", field, err)
		}
		if _, err := Open(memdisk.New(memdisk.Options{}), testDir, cfg, OpenOptions{}); err == nil {
			t.Errorf("Open accepted an invalid %s", field)
		}
	}
}
