package log

import (
	"encoding/binary"
	"errors"
	"fmt"

	"strand/core/batch"
)

// attrDeleteHorizon is attribute bit 6 (KIP-534): the batch's FirstTimestamp
// holds its delete horizon, the wall time after which the cleaner may drop
// its tombstones. Record timestamps stay FirstTimestamp plus their delta, so
// clients read the same timestamps.
const attrDeleteHorizon = 0x40

// cleanerRecordsBytesMax bounds the decompressed records of one stored batch
// the cleaner reads: the largest buffer one cleaning step allocates.
const cleanerRecordsBytesMax = 128 << 20

// errBadStoredRecord marks records inside a stored batch that do not parse.
var errBadStoredRecord = errors.New("stored batch holds a malformed record")

// storedRecord is one record of a stored batch. Cleaned batches keep their
// records' offset deltas, which need not count 0, 1, 2 (batch.CheckProduced
// demands that only of produced batches), so the cleaner parses records here.
// raw and key alias the decompressed records buffer.
type storedRecord struct {
	// raw is the whole record, its length prefix included.
	raw []byte
	// bodyStart is where the body (attributes byte) starts in raw, and
	// tailStart where the fields after timestampDelta start.
	bodyStart, tailStart int
	timestampDelta       int64
	offsetDelta          int32
	key                  []byte
	keyIsNull            bool
	valueIsNull          bool
}

// parseStoredRecords splits the decompressed records section into count
// records, checking every length against the bytes present.
func parseStoredRecords(data []byte, count int32) ([]storedRecord, error) {
	records := make([]storedRecord, 0, count)
	for i := int32(0); i < count; i++ {
		r, n, err := parseStoredRecord(data)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", errBadStoredRecord, i, err)
		}
		records = append(records, r)
		data = data[n:]
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last of %d records", errBadStoredRecord, len(data), count)
	}
	return records, nil
}

func parseStoredRecord(data []byte) (storedRecord, int, error) {
	length, n := binary.Varint(data)
	if n <= 0 || length < 1 || length > int64(len(data)-n) {
		return storedRecord{}, 0, fmt.Errorf("record length does not fit in %d bytes", len(data))
	}
	r := storedRecord{raw: data[:n+int(length)], bodyStart: n}
	at := n + 1 // the attributes byte
	field := func() (int64, bool) {
		v, k := binary.Varint(r.raw[at:])
		if k <= 0 {
			return 0, false
		}
		at += k
		return v, true
	}
	nullable := func() ([]byte, bool, bool) {
		size, ok := field()
		if !ok || size < -1 || size > int64(len(r.raw)-at) {
			return nil, false, false
		}
		if size == -1 {
			return nil, true, true
		}
		b := r.raw[at : at+int(size)]
		at += int(size)
		return b, false, true
	}
	var ok bool
	if r.timestampDelta, ok = field(); !ok {
		return r, 0, errors.New("bad timestampDelta")
	}
	r.tailStart = at
	offsetDelta, ok := field()
	if !ok || offsetDelta < 0 || offsetDelta > 1<<31-1 {
		return r, 0, errors.New("bad offsetDelta")
	}
	r.offsetDelta = int32(offsetDelta)
	if r.key, r.keyIsNull, ok = nullable(); !ok {
		return r, 0, errors.New("bad key")
	}
	if _, r.valueIsNull, ok = nullable(); !ok {
		return r, 0, errors.New("bad value")
	}
	return r, len(r.raw), nil
}

// appendWithTimestampDelta appends r to dst with its timestamp delta
// replaced: the rest of the record is copied unchanged.
func (r *storedRecord) appendWithTimestampDelta(dst []byte, timestampDelta int64) []byte {
	body := make([]byte, 0, len(r.raw)+binary.MaxVarintLen64)
	body = append(body, r.raw[r.bodyStart]) // attributes
	body = binary.AppendVarint(body, timestampDelta)
	body = append(body, r.raw[r.tailStart:]...)
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// rebuildBatch encodes a batch from an original header and the kept records
// (already encoded, uncompressed): BaseOffset, LastOffsetDelta,
// PartitionLeaderEpoch, producer fields and MaxTimestamp are the original's,
// so offsets never move and producer state survives; the records are
// compressed again with the original codec and the CRC recomputed. With no
// records it is an empty, header-only batch, as Kafka keeps one.
func rebuildBatch(h batch.Header, attributes int16, firstTimestamp int64, keptCount int32, raw []byte) ([]byte, error) {
	records := []byte(nil)
	if keptCount > 0 {
		var err error
		if records, err = batch.Compress(h.Codec(), raw); err != nil {
			return nil, fmt.Errorf("recompress batch at %d: %w", h.BaseOffset, err)
		}
	}
	rebuilt := h
	rebuilt.Attributes, rebuilt.FirstTimestamp, rebuilt.RecordCount = attributes, firstTimestamp, keptCount
	b := batch.Assemble(rebuilt, records)
	if _, err := batch.Verify(b); err != nil {
		panic(fmt.Sprintf("log: cleaner built a batch Verify rejects: %v", err))
	}
	return b, nil
}
