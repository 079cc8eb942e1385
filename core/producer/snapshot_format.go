package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// The .snapshot file, Kafka's ProducerStateManager layout version 1, all
// integers big-endian:
//
//	version  int16   1
//	crc      uint32  CRC-32C of every byte after this field
//	count    int32   number of entries
//	entries  count × 46 bytes:
//	    producer_id              int64
//	    epoch                    int16
//	    last_sequence            int32
//	    last_offset              int64
//	    offset_delta             int32
//	    timestamp                int64
//	    coordinator_epoch        int32  -1 (no transactions)
//	    current_txn_first_offset int64  -1 (no transactions)
//
// Kafka writes one entry per producer, for its last batch. Strand writes one
// per retained batch, oldest first, producers sorted by id: Kafka's reader
// keeps the last entry of each producer, which is what it would have
// written, and Strand's reader gets all retained batches back.
const (
	snapshotVersion      = 1
	snapshotHeaderBytes  = 2 + 4 + 4
	snapshotEntryBytes   = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotCRCEndOffset = 6 // the CRC covers the bytes from here on
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorruptSnapshot marks a snapshot that does not decode; Load skips it.
var errCorruptSnapshot = errors.New("corrupt producer snapshot")

// encodeSnapshot renders entries (sorted by producer id) as a .snapshot file.
func encodeSnapshot(entries []Entry) []byte {
	rows := 0
	for _, e := range entries {
		rows += max(len(e.Batches), 1)
	}
	b := make([]byte, snapshotHeaderBytes, snapshotHeaderBytes+rows*snapshotEntryBytes)
	binary.BigEndian.PutUint16(b[0:], snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(rows))
	for _, e := range entries {
		if len(e.Batches) == 0 { // Kafka's form of an entry without batches
			b = appendRow(b, e.ProducerID, e.Epoch, BatchMetadata{LastSequence: -1, LastOffset: -1, TimestampMs: e.LastTimestampMs})
		}
		for _, batch := range e.Batches {
			b = appendRow(b, e.ProducerID, e.Epoch, batch)
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCEndOffset:], castagnoli))
	return b
}

func appendRow(b []byte, producerID int64, epoch int16, m BatchMetadata) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(producerID))
	b = binary.BigEndian.AppendUint16(b, uint16(epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(m.LastSequence))
	b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(m.OffsetDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(m.TimestampMs))
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // coordinator_epoch -1
	return binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)
}

// decodeSnapshot parses a .snapshot file. Every error wraps
// errCorruptSnapshot and names what is wrong.
func decodeSnapshot(data []byte) ([]Entry, error) {
	corrupt := func(format string, args ...any) ([]Entry, error) {
		return nil, fmt.Errorf("%w: %s", errCorruptSnapshot, fmt.Sprintf(format, args...))
	}
	if len(data) < snapshotHeaderBytes {
		return corrupt("%d bytes, shorter than the %d-byte header", len(data), snapshotHeaderBytes)
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != snapshotVersion {
		return corrupt("version %d, only %d is known", v, snapshotVersion)
	}
	if stored, computed := binary.BigEndian.Uint32(data[2:]), crc32.Checksum(data[snapshotCRCEndOffset:], castagnoli); stored != computed {
		return corrupt("crc %#x, computed %#x", stored, computed)
	}
	rows := int64(int32(binary.BigEndian.Uint32(data[6:])))
	if rows < 0 || int64(len(data)-snapshotHeaderBytes) != rows*snapshotEntryBytes {
		return corrupt("%d entries do not fill %d bytes", rows, len(data)-snapshotHeaderBytes)
	}
	var entries []Entry
	for i := int64(0); i < rows; i++ {
		if err := addRow(&entries, data[snapshotHeaderBytes+i*snapshotEntryBytes:]); err != nil {
			return corrupt("entry %d: %v", i, err)
		}
	}
	if !sort.SliceIsSorted(entries, func(i, j int) bool { return entries[i].ProducerID < entries[j].ProducerID }) {
		return corrupt("producers not sorted by id")
	}
	return entries, nil
}

// addRow adds one entry row, appending to the previous entry when it is of
// the same producer.
func addRow(entries *[]Entry, row []byte) error {
	producerID := int64(binary.BigEndian.Uint64(row))
	epoch := int16(binary.BigEndian.Uint16(row[8:]))
	m := BatchMetadata{
		LastSequence: int32(binary.BigEndian.Uint32(row[10:])),
		LastOffset:   int64(binary.BigEndian.Uint64(row[14:])),
		OffsetDelta:  int32(binary.BigEndian.Uint32(row[22:])),
		TimestampMs:  int64(binary.BigEndian.Uint64(row[26:])),
	}
	if producerID < 0 || epoch < 0 || m.OffsetDelta < 0 {
		return fmt.Errorf("producer %d, epoch %d, offset delta %d", producerID, epoch, m.OffsetDelta)
	}
	n := len(*entries)
	if n > 0 && (*entries)[n-1].ProducerID == producerID {
		e := &(*entries)[n-1]
		if e.Epoch != epoch || len(e.Batches) == 0 || m.LastOffset < 0 || len(e.Batches) == BatchesRetained ||
			m.LastOffset <= e.Batches[len(e.Batches)-1].LastOffset {
			return fmt.Errorf("producer %d: batch at %d does not extend its entry", producerID, m.LastOffset)
		}
		e.Batches = append(e.Batches, m)
		e.LastTimestampMs = m.TimestampMs
		return nil
	}
	e := Entry{ProducerID: producerID, Epoch: epoch, LastTimestampMs: m.TimestampMs}
	if m.LastOffset >= 0 {
		if m.LastOffset < int64(m.OffsetDelta) {
			return fmt.Errorf("producer %d: last offset %d below offset delta %d", producerID, m.LastOffset, m.OffsetDelta)
		}
		e.Batches = []BatchMetadata{m}
	}
	*entries = append(*entries, e)
	return nil
}
