package log

import (
	"fmt"

	"strand/core/batch"
)

// readSegment adds to r the batches of s from the one holding fetchOffset,
// within r's limits. It reads batch headers only where it must: between two
// offset index entries lie whole batches whose last offsets are below the
// later entry's, so a span that fits the limits is taken whole from the
// index. A large read of a segment costs a few header reads, not one per
// batch, and index reads come from a memory map in the real build.
func (r *reader) readSegment(s *segment, fetchOffset int64) error {
	start, found, err := s.findBatch(fetchOffset, r.log.scratch)
	if err != nil || !found {
		return err
	}
	return r.readSegmentFrom(s, start)
}

// readSegmentFrom adds to r the batches of s from start, the first batch
// whose last offset >= the fetch offset.
func (r *reader) readSegmentFrom(s *segment, start batchAt) error {
	c := segmentCursor{reader: r, s: s, region: Region{File: s.log, Position: start.position, seg: s}, position: start.position}
	err := c.run(start)
	if c.region.Bytes > 0 {
		r.result.Regions = append(r.result.Regions, c.region)
	}
	return err
}

// segmentCursor walks one segment for a reader.
type segmentCursor struct {
	*reader
	s      *segment
	region Region
	// position is the end of what is taken, always a batch boundary.
	position int64
	// nextKnown says whether result.NextOffset is the offset at position.
	nextKnown bool
	// indexedLastOffset is where the batch at position ends by the offset
	// index entry a span was taken to, to be checked when its header is
	// read; indexedLastOffsetSet says whether one is pending.
	indexedLastOffset    int64
	indexedLastOffsetSet bool
}

func (c *segmentCursor) run(first batchAt) error {
	if !c.take(first.header) {
		return nil
	}
	entry, err := c.s.index.searchPositionAfter(c.position)
	if err != nil {
		return err
	}
	for ; !c.done && c.position < c.s.bytes; entry++ {
		boundary, spanLastOffsetMax := c.s.bytes, c.s.nextOffset-1
		var entryLastOffset int64
		if entry < c.s.index.entries {
			var entryPosition int64
			entryLastOffset, entryPosition, err = c.s.index.entry(entry)
			if err != nil {
				return err
			}
			if entryPosition <= c.position || entryPosition >= c.s.bytes {
				return fmt.Errorf("segment %d: offset index entry %d (%d, %d) does not lie between %d and the segment's end %d: %w",
					c.s.baseOffset, entry, entryLastOffset, entryPosition, c.position, c.s.bytes, errCorruptData)
			}
			boundary, spanLastOffsetMax = entryPosition, entryLastOffset-1
		}
		if spanLastOffsetMax < c.maxOffset && boundary-c.position <= c.bytesLeft {
			c.region.Bytes += boundary - c.position
			c.bytesLeft -= boundary - c.position
			c.position, c.nextKnown = boundary, false
			if boundary < c.s.bytes {
				// The span was taken on the entry's word: the batch at
				// boundary must end where it says, or the span's limits
				// were judged on rotted bytes. The walk or the settling
				// reads that header next anyway.
				c.indexedLastOffset, c.indexedLastOffsetSet = entryLastOffset, true
			}
			continue
		}
		if err := c.walk(boundary); err != nil {
			return err
		}
	}
	return c.settleNextOffset()
}

// checkIndexed checks the header read at c.position against the offset
// index entry a span ended at, if one did.
func (c *segmentCursor) checkIndexed(h batch.Header) error {
	if !c.indexedLastOffsetSet {
		return nil
	}
	c.indexedLastOffsetSet = false
	return c.s.checkIndexEntry(h, c.position, c.indexedLastOffset)
}

// walk takes batches one header at a time up to boundary, or until a limit.
func (c *segmentCursor) walk(boundary int64) error {
	var indexErr error
	err := c.s.walkHeaders(c.position, c.log.scratch, func(b batchAt) bool {
		if indexErr = c.checkIndexed(b.header); indexErr != nil {
			return false
		}
		return b.position < boundary && c.take(b.header)
	})
	if err != nil {
		return err
	}
	return indexErr
}

// take adds the batch at position if the limits allow, else marks the read
// done.
func (c *segmentCursor) take(h batch.Header) bool {
	size := h.TotalBytes()
	first := len(c.result.Regions) == 0 && c.region.Bytes == 0
	if h.LastOffset() >= c.maxOffset || (size > c.bytesLeft && !(first && c.minOneBatch)) {
		c.done = true
		if !first {
			c.result.NextOffset, c.nextKnown = h.BaseOffset, true
		}
		return false
	}
	if first {
		c.result.FirstOffset = h.BaseOffset
	}
	c.region.Bytes += size
	c.bytesLeft -= size
	c.position += size
	c.result.NextOffset, c.nextKnown = h.NextOffset(), true
	return true
}

// settleNextOffset sets result.NextOffset after spans taken from the index:
// the base offset of the batch at position.
func (c *segmentCursor) settleNextOffset() error {
	if c.nextKnown {
		return nil
	}
	if c.position == c.s.bytes {
		c.result.NextOffset = c.s.nextOffset
		return nil
	}
	h, err := readHeader(c.s.log, c.position, c.s.bytes, c.log.scratch)
	if err != nil {
		return err
	}
	if err := c.checkIndexed(h); err != nil {
		return err
	}
	c.result.NextOffset = h.BaseOffset
	return nil
}
