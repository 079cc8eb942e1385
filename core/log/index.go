package log

import (
	"encoding/binary"
	"fmt"
	"math"

	"strand/core/env"
)

// offsetIndexEntryBytes is the size of one offset index entry: int32
// relative offset, int32 position (Kafka's OffsetIndex).
const offsetIndexEntryBytes = 8

// offsetIndex is a segment's sparse offset index. Entries map the last offset
// of a batch to the file position where that batch starts; entries are
// strictly increasing in both. The file is exactly entries*8 bytes (no
// preallocated tail), and entries are read from the file on demand, so the
// index costs page cache (a memory map in the real build), not heap.
type offsetIndex struct {
	file       env.File
	baseOffset int64
	entries    int64
	entriesMax int64
	// lastOffset and lastPosition are the last entry's, or (baseOffset, 0)
	// when the index is empty.
	lastOffset   int64
	lastPosition int64
	scratch      [offsetIndexEntryBytes]byte
}

func newOffsetIndex(file env.File, baseOffset, indexBytesMax int64) *offsetIndex {
	return &offsetIndex{file: file, baseOffset: baseOffset, entriesMax: indexBytesMax / offsetIndexEntryBytes,
		lastOffset: baseOffset}
}

func (x *offsetIndex) isFull() bool { return x.entries >= x.entriesMax }

// entry reads entry i as absolute offset and position.
func (x *offsetIndex) entry(i int64) (offset, position int64, err error) {
	if _, err := x.file.ReadAt(x.scratch[:], i*offsetIndexEntryBytes); err != nil {
		return 0, 0, fmt.Errorf("read offset index %s entry %d: %w", x.file.Path(), i, err)
	}
	relative := int32(binary.BigEndian.Uint32(x.scratch[0:4]))
	position = int64(int32(binary.BigEndian.Uint32(x.scratch[4:8])))
	return x.baseOffset + int64(relative), position, nil
}

// append adds an entry. The caller guarantees offset and position grow.
func (x *offsetIndex) append(offset, position int64) error {
	if x.entries > 0 && (offset <= x.lastOffset || position <= x.lastPosition) {
		panic(fmt.Sprintf("log: offset index %s: entry (%d, %d) does not follow (%d, %d)",
			x.file.Path(), offset, position, x.lastOffset, x.lastPosition))
	}
	if x.isFull() || offset-x.baseOffset > math.MaxInt32 || position > math.MaxInt32 {
		panic(fmt.Sprintf("log: offset index %s: entry (%d, %d) does not fit", x.file.Path(), offset, position))
	}
	entry := make([]byte, offsetIndexEntryBytes) // Append takes ownership
	binary.BigEndian.PutUint32(entry[0:4], uint32(offset-x.baseOffset))
	binary.BigEndian.PutUint32(entry[4:8], uint32(position))
	if err := x.file.Append(entry); err != nil {
		return fmt.Errorf("append to offset index %s: %w", x.file.Path(), err)
	}
	x.entries++
	x.lastOffset, x.lastPosition = offset, position
	return nil
}

// lookup returns the position to start scanning from for target: the entry
// with the largest offset <= target, or position 0 when there is none. The
// entry comes from the file as it is: segment.lookup checks it against the
// log.
func (x *offsetIndex) lookup(target int64) (position, entryOffset int64, found bool, err error) {
	i, err := x.searchAtMost(target)
	if err != nil || i < 0 {
		return 0, 0, false, err
	}
	entryOffset, position, err = x.entry(i)
	return position, entryOffset, err == nil, err
}

// searchAtMost returns the index of the last entry whose offset <= target,
// or -1.
func (x *offsetIndex) searchAtMost(target int64) (int64, error) {
	low, high := int64(0), x.entries-1
	found := int64(-1)
	for low <= high {
		mid := low + (high-low)/2
		offset, _, err := x.entry(mid)
		if err != nil {
			return -1, err
		}
		if offset <= target {
			found, low = mid, mid+1
		} else {
			high = mid - 1
		}
	}
	return found, nil
}

// truncateTo removes every entry whose offset >= offset.
func (x *offsetIndex) truncateTo(offset int64) error {
	keep, err := x.searchAtMost(offset - 1)
	if err != nil {
		return err
	}
	return x.truncateEntries(keep + 1)
}

func (x *offsetIndex) truncateEntries(entries int64) error {
	if err := x.file.Truncate(entries * offsetIndexEntryBytes); err != nil {
		return fmt.Errorf("truncate offset index %s: %w", x.file.Path(), err)
	}
	x.entries = entries
	x.lastOffset, x.lastPosition = x.baseOffset, 0
	if entries > 0 {
		offset, position, err := x.entry(entries - 1)
		if err != nil {
			return err
		}
		x.lastOffset, x.lastPosition = offset, position
	}
	return nil
}

// load adopts the file's entries after checking them as Kafka's sanity check
// does, and more: the size is whole entries within the limit, offsets and
// positions strictly increase, offsets lie in [baseOffset, nextOffset) and
// positions before logBytes. It returns an error describing the first
// inconsistency; the caller then rebuilds the index.
func (x *offsetIndex) load(nextOffset, logBytes int64) error {
	size := x.file.Size()
	if size%offsetIndexEntryBytes != 0 || size/offsetIndexEntryBytes > x.entriesMax {
		return fmt.Errorf("offset index %s: size %d is not whole entries within the limit", x.file.Path(), size)
	}
	x.entries = size / offsetIndexEntryBytes
	previousOffset, previousPosition := x.baseOffset-1, int64(-1)
	for i := int64(0); i < x.entries; i++ {
		offset, position, err := x.entry(i)
		if err != nil {
			return err
		}
		if offset <= previousOffset || offset >= nextOffset || position <= previousPosition || position >= logBytes {
			return fmt.Errorf("offset index %s: entry %d (%d, %d) out of order or out of the segment", x.file.Path(), i, offset, position)
		}
		previousOffset, previousPosition = offset, position
	}
	x.lastOffset, x.lastPosition = x.baseOffset, 0
	if x.entries > 0 {
		x.lastOffset, x.lastPosition = previousOffset, previousPosition
	}
	return nil
}

// searchPositionAfter returns the index of the first entry whose position is
// beyond position, or entries if there is none.
func (x *offsetIndex) searchPositionAfter(position int64) (int64, error) {
	low, high := int64(0), x.entries
	for low < high {
		mid := low + (high-low)/2
		_, entryPosition, err := x.entry(mid)
		if err != nil {
			return 0, err
		}
		if entryPosition > position {
			high = mid
		} else {
			low = mid + 1
		}
	}
	return low, nil
}
