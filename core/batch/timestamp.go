package batch

import (
	"errors"
	"fmt"
)

// FindRecordByTimestamp finds, in b (one whole stored batch), the first
// record at or above offset minOffset whose timestamp is at least
// timestampMs: Kafka's per-record answer to ListOffsets by timestamp
// (LogSegment.findOffsetByTimestamp), which also serves MAX_TIMESTAMP
// (KIP-734; KAFKA-16310) when asked for the batch's max timestamp, since no
// record is later. found is false when no such record exists.
//
// A record's timestamp is the batch's FirstTimestamp plus its delta, except
// in a LogAppendTime batch, where every record carries the batch's max
// timestamp (the broker stamped only the header). Compressed records are
// decompressed within decompressedBytesMax. b must have passed Verify when
// it was appended; records that do not decode are an *Error naming the
// field, as CheckProduced names them.
func FindRecordByTimestamp(b []byte, timestampMs, minOffset int64, decompressedBytesMax int) (offset, timestamp int64, found bool, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		return 0, 0, false, err
	}
	if h.TotalBytes() != int64(len(b)) {
		return 0, 0, false, errCorrupt("length", fmt.Sprintf("header says %d bytes, %d given", h.TotalBytes(), len(b)))
	}
	if h.MaxTimestamp < timestampMs || h.LastOffset() < minOffset {
		return 0, 0, false, nil
	}
	if c := h.Codec(); c > CodecZstd {
		return 0, 0, false, &Error{"attributes", fmt.Sprintf("unknown compression codec %d", c), codeUnsupportedCompression}
	}
	records := b[HeaderBytes:]
	if h.Codec() != CodecNone {
		if records, err = decompress(h.Codec(), records, decompressedBytesMax); err != nil {
			code := codeCorrupt
			if errors.Is(err, errDecompressedTooLarge) {
				code = codeTooLarge
			}
			return 0, 0, false, &Error{"records", fmt.Sprintf("%s records: %v", h.Codec(), err), code}
		}
	}
	pos := 0
	for index := 0; pos < len(records) && index < int(h.RecordCount); index++ {
		r, n, rerr := readRecord(records[pos:], index)
		if rerr != nil {
			return 0, 0, false, rerr
		}
		pos += n
		offset, timestamp = h.BaseOffset+int64(r.offsetDelta), h.FirstTimestamp+r.timestampDelta
		if h.Attributes&AttrLogAppendTime != 0 {
			timestamp = h.MaxTimestamp
		}
		if offset >= minOffset && timestamp >= timestampMs {
			return offset, timestamp, true, nil
		}
	}
	return 0, 0, false, nil
}
