package batch

import (
	"fmt"
)

// BatchBytesMax bounds the size of one batch, overhead included. Kafka cannot
// store a batch larger than a segment, and log.segment.bytes defaults to
// 1 GiB; a Length beyond this is far more likely torn or corrupt bytes than a
// real batch, so Verify rejects it before anyone allocates for it.
const BatchBytesMax = 1 << 30

// Verify checks that b is exactly one whole, intact RecordBatch v2 and
// returns its header. It is the cheap structural check the log runs on every
// append and on every batch it reads back during crash recovery: it reads the
// fixed header and computes one CRC, and never decompresses.
//
// Rules (Kafka's DefaultRecordBatch.ensureValid plus header consistency):
//   - len(b) >= HeaderBytes, and LogOverheadBytes+Length == len(b);
//   - 0 <= Length and LogOverheadBytes+Length <= BatchBytesMax;
//   - Magic == 2, and the codec in Attributes is one Kafka defines;
//   - the stored CRC equals the CRC-32C over Attributes..end;
//   - LastOffsetDelta >= 0 and 0 <= RecordCount <= LastOffsetDelta+1.
//
// An empty batch (RecordCount 0) is legal here: Kafka's log cleaner keeps an
// empty batch when compaction removes every record of a producer's last batch,
// so the producer's sequence state survives (MemoryRecords.filterTo,
// DefaultRecordBatch.writeEmptyHeader). Such a batch is exactly a header,
// uncompressed, so Verify requires that an empty batch carries no record
// bytes. Produced batches must hold records: CheckProduced demands
// RecordCount == LastOffsetDelta+1 >= 1.
//
// Verify does not order FirstTimestamp against MaxTimestamp, because Kafka
// does not either: a LogAppendTime batch carries the broker's clock in
// MaxTimestamp and the producer's in FirstTimestamp, an empty batch has
// FirstTimestamp -1, and with attribute bit 6 (KIP-534) FirstTimestamp holds
// the delete horizon instead.
//
// Every error is an *Error.
func Verify(b []byte) (Header, error) {
	return verify(b, true)
}

// VerifyExceptCRC is Verify without the CRC-32C, for a batch whose CRC its
// caller has already checked (CheckProduced, Precheck.Finish) or computed
// (SetMaxTimestamp) since the batch last changed: the CRC pass is the one
// part of Verify whose cost grows with the batch, and the produce path
// would otherwise compute it twice. It checks every other rule of Verify.
func VerifyExceptCRC(b []byte) (Header, error) {
	return verify(b, false)
}

func verify(b []byte, checkCRC bool) (Header, error) {
	h, err := verifyFrame(b, checkCRC)
	if err == nil {
		err = verifyCounts(&h, len(b))
	}
	if err != nil {
		return h, err
	}
	return h, nil
}

// verifyFrame is Verify without its count rules (verifyCounts): framing,
// magic, CRC and codec, the checks Kafka makes of every batch before its
// LogValidator. The produce path runs it and then checkProducedHeader,
// whose stricter count rule Kafka answers INVALID_RECORD, not
// CORRUPT_MESSAGE.
func verifyFrame(b []byte, checkCRC bool) (Header, *Error) {
	if len(b) < HeaderBytes {
		return Header{}, errCorrupt("length", fmt.Sprintf("batch is %d bytes, shorter than the %d-byte header", len(b), HeaderBytes))
	}
	h, err := ParseHeader(b)
	if err != nil {
		panic(fmt.Sprintf("batch: header of %d bytes did not parse: %v", len(b), err)) // length checked above
	}
	if h.Length < 0 {
		return h, errCorrupt("length", fmt.Sprintf("negative length %d", h.Length))
	}
	if h.TotalBytes() > BatchBytesMax {
		return h, &Error{"length", fmt.Sprintf("batch of %d bytes exceeds the %d-byte maximum", h.TotalBytes(), BatchBytesMax), codeTooLarge}
	}
	if h.TotalBytes() != int64(len(b)) {
		return h, errCorrupt("length", fmt.Sprintf("length %d says the batch is %d bytes, but %d bytes were given", h.Length, h.TotalBytes(), len(b)))
	}
	if h.Magic != Magic {
		return h, errCorrupt("magic", fmt.Sprintf("magic %d, only %d is supported", h.Magic, Magic))
	}
	if checkCRC {
		if computed := ComputeCRC(b); computed != h.CRC {
			return h, errCorrupt("crc", fmt.Sprintf("stored 0x%08x, computed 0x%08x", h.CRC, computed))
		}
	}
	if c := h.Codec(); c > CodecZstd {
		return h, &Error{"attributes", fmt.Sprintf("unknown compression codec %d", c), codeUnsupportedCompression}
	}
	return h, nil
}

// verifyCounts checks a header's offset delta and record count against each
// other and the batch's size (the last rule of Verify).
func verifyCounts(h *Header, batchBytes int) *Error {
	if h.LastOffsetDelta < 0 {
		return errCorrupt("lastOffsetDelta", fmt.Sprintf("negative last offset delta %d", h.LastOffsetDelta))
	}
	if h.RecordCount < 0 {
		return errCorrupt("recordCount", fmt.Sprintf("negative record count %d", h.RecordCount))
	}
	if int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return errCorrupt("recordCount", fmt.Sprintf("%d records cannot fit in the %d offsets that last offset delta %d spans", h.RecordCount, int64(h.LastOffsetDelta)+1, h.LastOffsetDelta))
	}
	if h.RecordCount == 0 && batchBytes != HeaderBytes {
		return errCorrupt("records", fmt.Sprintf("empty batch carries %d record bytes", batchBytes-HeaderBytes))
	}
	return nil
}
