package log

import (
	"encoding/binary"
	"fmt"
	"math"

	"strand/core/env"
)

// timeIndexEntryBytes is the size of one time index entry: int64 timestamp,
// int32 relative offset (Kafka's TimeIndex).
const timeIndexEntryBytes = 12

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP.
const noTimestamp = -1

// timeIndex is a segment's time index: entries (max timestamp so far, offset
// of the batch that holds it), with strictly increasing timestamps and
// non-decreasing offsets. Like offsetIndex it lives in its file, exactly
// entries*12 bytes.
type timeIndex struct {
	file       env.File
	baseOffset int64
	entries    int64
	entriesMax int64
	// lastTimestamp and lastOffset are the last entry's, or
	// (noTimestamp, baseOffset) when the index is empty.
	lastTimestamp int64
	lastOffset    int64
	scratch       [timeIndexEntryBytes]byte
}

func newTimeIndex(file env.File, baseOffset, indexBytesMax int64) *timeIndex {
	// One slot stays free for the final entry (see maybeAppend), so that the
	// file never outgrows segment.index.bytes.
	return &timeIndex{file: file, baseOffset: baseOffset, entriesMax: indexBytesMax/timeIndexEntryBytes - 1,
		lastTimestamp: noTimestamp, lastOffset: baseOffset}
}

func (x *timeIndex) isFull() bool { return x.entries >= x.entriesMax }

func (x *timeIndex) entry(i int64) (timestamp, offset int64, err error) {
	if _, err := x.file.ReadAt(x.scratch[:], i*timeIndexEntryBytes); err != nil {
		return 0, 0, fmt.Errorf("read time index %s entry %d: %w", x.file.Path(), i, err)
	}
	timestamp = int64(binary.BigEndian.Uint64(x.scratch[0:8]))
	offset = x.baseOffset + int64(int32(binary.BigEndian.Uint32(x.scratch[8:12])))
	return timestamp, offset, nil
}

// maybeAppend adds (timestamp, offset) if timestamp is newer than the last
// entry's, as Kafka's TimeIndex.maybeAppend does. The final entry written
// when a segment stops being active may use the slot reserved for it
// (final), so a full index can still record the segment's max timestamp.
func (x *timeIndex) maybeAppend(timestamp, offset int64, final bool) error {
	if timestamp <= x.lastTimestamp {
		return nil
	}
	if offset < x.lastOffset || offset-x.baseOffset > math.MaxInt32 {
		panic(fmt.Sprintf("log: time index %s: offset %d does not follow %d", x.file.Path(), offset, x.lastOffset))
	}
	if x.isFull() && !final {
		panic(fmt.Sprintf("log: time index %s: append to a full index", x.file.Path()))
	}
	entry := make([]byte, timeIndexEntryBytes) // Append takes ownership
	binary.BigEndian.PutUint64(entry[0:8], uint64(timestamp))
	binary.BigEndian.PutUint32(entry[8:12], uint32(offset-x.baseOffset))
	if err := x.file.Append(entry); err != nil {
		return fmt.Errorf("append to time index %s: %w", x.file.Path(), err)
	}
	x.entries++
	x.lastTimestamp, x.lastOffset = timestamp, offset
	return nil
}

// lookup returns the entry with the largest timestamp <= target, or
// (noTimestamp, baseOffset) when there is none.
func (x *timeIndex) lookup(target int64) (timestamp, offset int64, err error) {
	low, high := int64(0), x.entries-1
	timestamp, offset = noTimestamp, x.baseOffset
	for low <= high {
		mid := low + (high-low)/2
		ts, off, err := x.entry(mid)
		if err != nil {
			return 0, 0, err
		}
		if ts <= target {
			timestamp, offset, low = ts, off, mid+1
		} else {
			high = mid - 1
		}
	}
	return timestamp, offset, nil
}

// truncateTo removes every entry whose offset >= offset.
func (x *timeIndex) truncateTo(offset int64) error {
	keep := x.entries
	for keep > 0 {
		_, off, err := x.entry(keep - 1)
		if err != nil {
			return err
		}
		if off < offset {
			break
		}
		keep--
	}
	return x.truncateEntries(keep)
}

func (x *timeIndex) truncateEntries(entries int64) error {
	if err := x.file.Truncate(entries * timeIndexEntryBytes); err != nil {
		return fmt.Errorf("truncate time index %s: %w", x.file.Path(), err)
	}
	x.entries = entries
	x.lastTimestamp, x.lastOffset = noTimestamp, x.baseOffset
	if entries > 0 {
		ts, off, err := x.entry(entries - 1)
		if err != nil {
			return err
		}
		x.lastTimestamp, x.lastOffset = ts, off
	}
	return nil
}

// load adopts the file's entries after checking them: whole entries within
// the limit (plus the final slot), strictly increasing timestamps,
// non-decreasing offsets within [baseOffset, nextOffset).
func (x *timeIndex) load(nextOffset int64) error {
	size := x.file.Size()
	if size%timeIndexEntryBytes != 0 || size/timeIndexEntryBytes > x.entriesMax+1 {
		return fmt.Errorf("time index %s: size %d is not whole entries within the limit", x.file.Path(), size)
	}
	x.entries = size / timeIndexEntryBytes
	previousTimestamp, previousOffset := int64(math.MinInt64), x.baseOffset
	for i := int64(0); i < x.entries; i++ {
		ts, off, err := x.entry(i)
		if err != nil {
			return err
		}
		if ts <= previousTimestamp || off < previousOffset || off >= nextOffset {
			return fmt.Errorf("time index %s: entry %d (%d, %d) out of order or out of the segment", x.file.Path(), i, ts, off)
		}
		previousTimestamp, previousOffset = ts, off
	}
	x.lastTimestamp, x.lastOffset = noTimestamp, x.baseOffset
	if x.entries > 0 {
		x.lastTimestamp, x.lastOffset = previousTimestamp, previousOffset
	}
	return nil
}
