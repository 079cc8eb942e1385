package log

import (
	"errors"
	"fmt"
	"io"

	"strand/core/batch"
	"strand/core/env"
)

// errCorruptData marks bytes that are not a valid batch where one should
// start: torn, zero-filled or corrupt. Recovery truncates there; a read
// failure of the device is a different error and fails the log.
var errCorruptData = errors.New("corrupt or torn batch")

// readHeader reads the batch header at position. It fails if fewer than
// batch.HeaderBytes bytes are there, or if the header's length is negative
// or runs past limit: bytes a reader must not trust.
func readHeader(f env.File, position, limit int64, scratch []byte) (batch.Header, error) {
	buf := scratch[:batch.HeaderBytes]
	if position+batch.HeaderBytes > limit {
		return batch.Header{}, fmt.Errorf("%s at %d: %d bytes left, less than a batch header: %w", f.Path(), position, limit-position, errCorruptData)
	}
	if _, err := f.ReadAt(buf, position); err != nil {
		return batch.Header{}, fmt.Errorf("read %s at %d: %w", f.Path(), position, err)
	}
	h, err := batch.ParseHeader(buf)
	if err != nil {
		panic(fmt.Sprintf("log: a %d-byte header did not parse: %v", len(buf), err))
	}
	if h.Length < batch.HeaderBytes-batch.LogOverheadBytes || position+h.TotalBytes() > limit {
		return h, fmt.Errorf("%s at %d: batch length %d does not fit in %d bytes: %w", f.Path(), position, h.Length, limit-position, errCorruptData)
	}
	return h, nil
}

// readVerified reads the whole batch at position and runs batch.Verify on it.
// buf is a reusable scratch buffer; the returned slice aliases it.
func readVerified(f env.File, position, limit int64, buf []byte) (batch.Header, []byte, error) {
	h, err := readHeader(f, position, limit, buf[:cap(buf)])
	if err != nil {
		return h, buf, err
	}
	if int64(cap(buf)) < h.TotalBytes() {
		buf = make([]byte, h.TotalBytes())
	}
	whole := buf[:h.TotalBytes()]
	if _, err := f.ReadAt(whole, position); err != nil && !errors.Is(err, io.EOF) {
		return h, buf, fmt.Errorf("read %s at %d: %w", f.Path(), position, err)
	}
	verified, err := batch.Verify(whole)
	if err != nil {
		return h, buf, fmt.Errorf("%s at %d: %w: %w", f.Path(), position, errCorruptData, err)
	}
	return verified, buf, nil
}

// scratchBytes sizes the buffer recovery reads batches into; larger batches
// get a buffer of their own.
const scratchBytes = 64 << 10

// batchAt is a batch's header and where it starts.
type batchAt struct {
	header   batch.Header
	position int64
}

// walkHeaders calls visit for each batch from position to the segment's end,
// reading headers only, until visit returns false. It trusts the segment's
// structure (callers use it on data already verified or trusted).
func (s *segment) walkHeaders(position int64, scratch []byte, visit func(batchAt) bool) error {
	for position < s.bytes {
		h, err := readHeader(s.log, position, s.bytes, scratch)
		if err != nil {
			return fmt.Errorf("segment %d: %w", s.baseOffset, err)
		}
		if !visit(batchAt{header: h, position: position}) {
			return nil
		}
		position += h.TotalBytes()
	}
	return nil
}

// indexStart is where the offset index says a walk for an offset begins:
// the entry with the largest offset <= it, (lastOffset, position), or the
// segment's start when there is none (found false).
type indexStart struct {
	position, lastOffset int64
	found                bool
}

// lookup returns where to walk from for offset. The index is read from its
// file on demand, so a bit that rots on the device after the load's checks
// would otherwise send a read past the batch it wants (serving later
// batches as if the earlier ones did not exist) or into the middle of one:
// lookup checks that the entry lies in the segment, and walkFrom that the
// batch at its position ends where it says, on the header the walk reads
// anyway. Such an entry is corrupt data.
func (s *segment) lookup(offset int64) (indexStart, error) {
	position, lastOffset, found, err := s.index.lookup(offset)
	if err != nil || !found {
		return indexStart{}, err
	}
	if position < 0 || position >= s.bytes || lastOffset < s.baseOffset || lastOffset >= s.nextOffset {
		return indexStart{}, fmt.Errorf("segment %d: offset index entry (%d, %d) lies outside the segment: %w",
			s.baseOffset, lastOffset, position, errCorruptData)
	}
	return indexStart{position: position, lastOffset: lastOffset, found: true}, nil
}

// walkFrom is walkHeaders from start, failing with corrupt data when the
// first batch does not end where start's index entry says.
func (s *segment) walkFrom(start indexStart, scratch []byte, visit func(batchAt) bool) error {
	if !start.found {
		return s.walkHeaders(0, scratch, visit)
	}
	var mismatch error
	checked := false
	err := s.walkHeaders(start.position, scratch, func(b batchAt) bool {
		if !checked {
			checked = true
			if mismatch = s.checkIndexEntry(b.header, start.position, start.lastOffset); mismatch != nil {
				return false
			}
		}
		return visit(b)
	})
	if err != nil {
		return err
	}
	return mismatch
}

// checkIndexEntry checks that h, the batch at position, ends at lastOffset,
// as the offset index entry (lastOffset, position) says.
func (s *segment) checkIndexEntry(h batch.Header, position, lastOffset int64) error {
	if h.LastOffset() != lastOffset {
		return fmt.Errorf("segment %d: offset index entry (%d, %d) names a batch ending at %d: %w",
			s.baseOffset, lastOffset, position, h.LastOffset(), errCorruptData)
	}
	return nil
}

// findBatch returns the first batch whose last offset >= offset, using the
// offset index, and whether there is one.
func (s *segment) findBatch(offset int64, scratch []byte) (batchAt, bool, error) {
	start, err := s.lookup(offset)
	if err != nil {
		return batchAt{}, false, err
	}
	var found batchAt
	ok := false
	visit := func(b batchAt) bool {
		if b.header.LastOffset() >= offset {
			found, ok = b, true
			return false
		}
		return true
	}
	if last := s.lastBatch; s.lastBatchSet && last.position < s.bytes && last.position > start.position &&
		last.header.BaseOffset <= offset {
		// Every batch before lastBatch ends below its base offset: the
		// walk can start there (reading its header from the file, as
		// the walk from an index entry would).
		err = s.walkHeaders(last.position, scratch, visit)
	} else {
		err = s.walkFrom(start, scratch, visit)
	}
	return found, ok, err
}
