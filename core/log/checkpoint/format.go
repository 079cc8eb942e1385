package checkpoint

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// formatVersion is the only version Kafka's checkpoint files have.
const formatVersion = 0

// EpochEntry is one line of a leader-epoch-checkpoint: the first offset
// written in a leader epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// PartitionOffset is one line of a per-directory offset checkpoint.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// EncodeEpochs renders entries in file order.
func EncodeEpochs(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", formatVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// ParseEpochs parses a leader-epoch-checkpoint.
func ParseEpochs(data []byte) ([]EpochEntry, error) {
	lines, err := entryLines(data)
	if err != nil {
		return nil, err
	}
	entries := make([]EpochEntry, 0, len(lines))
	for i, line := range lines {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("checkpoint entry %d %q: want \"epoch startOffset\"", i, line)
		}
		epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("checkpoint entry %d %q: not two integers", i, line)
		}
		entries = append(entries, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return entries, nil
}

// EncodeOffsets renders entries sorted by topic then partition, so that the
// file's bytes never depend on map order.
func EncodeOffsets(entries []PartitionOffset) []byte {
	sorted := append([]PartitionOffset(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Topic != sorted[j].Topic {
			return sorted[i].Topic < sorted[j].Topic
		}
		return sorted[i].Partition < sorted[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", formatVersion, len(sorted))
	for _, e := range sorted {
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	return b.Bytes()
}

// ParseOffsets parses a per-directory offset checkpoint.
func ParseOffsets(data []byte) ([]PartitionOffset, error) {
	lines, err := entryLines(data)
	if err != nil {
		return nil, err
	}
	entries := make([]PartitionOffset, 0, len(lines))
	for i, line := range lines {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("checkpoint entry %d %q: want \"topic partition offset\"", i, line)
		}
		partition, err1 := strconv.ParseInt(fields[1], 10, 32)
		offset, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("checkpoint entry %d %q: partition and offset must be integers", i, line)
		}
		entries = append(entries, PartitionOffset{Topic: fields[0], Partition: int32(partition), Offset: offset})
	}
	return entries, nil
}

// entryLines checks the version and count lines and returns the entries.
func entryLines(data []byte) ([]string, error) {
	text := strings.TrimSuffix(string(data), "\n")
	lines := strings.Split(text, "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("checkpoint: %d lines, need a version and a count", len(lines))
	}
	if v, err := strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || v != formatVersion {
		return nil, fmt.Errorf("checkpoint version %q: only %d is known", lines[0], formatVersion)
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count < 0 {
		return nil, fmt.Errorf("checkpoint count %q: not a count", lines[1])
	}
	entries := lines[2:]
	if len(entries) != count {
		return nil, fmt.Errorf("checkpoint: count says %d entries, found %d", count, len(entries))
	}
	return entries, nil
}
