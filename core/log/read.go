package log

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"strand/core/env"
)

// Region is a byte range of a segment file holding whole batches. It refers
// to the file; it is not a copy. realnet sends it with sendfile, the
// simulator reads it from its disk (env.Frame).
//
// A Region is valid while the log keeps the segment's bytes: until the next
// truncation, deletion or cleaner swap of the segment, unless it is pinned
// (Log.Pin), in which case the file is neither closed nor physically
// truncated until the pin is released.
type Region struct {
	File     env.File
	Position int64
	Bytes    int64
	// seg is the segment the region lies in, which Pin holds.
	seg *segment
}

// ReadResult is what Read found.
type ReadResult struct {
	// Regions hold whole batches, in offset order, contiguous in offsets.
	Regions []Region
	// FirstOffset is the base offset of the first batch returned, or the
	// fetch offset when nothing is returned.
	FirstOffset int64
	// NextOffset is the offset after the last batch returned, or the fetch
	// offset when nothing is returned.
	NextOffset int64
	// LogStartOffset and LogEndOffset are the log's at the time of the read.
	LogStartOffset int64
	LogEndOffset   int64
}

// Bytes is the total size of the regions.
func (r ReadResult) Bytes() int64 {
	var total int64
	for _, region := range r.Regions {
		total += region.Bytes
	}
	return total
}

// Read returns whole batches starting with the one that holds fetchOffset,
// batch-aligned as Kafka does: it stops before the first batch whose last
// offset >= maxOffset (the HW for consumers, the LEO for followers) and keeps
// within maxBytes, except that with minOneBatch the first batch comes whole
// even if larger (KIP-74). A fetchOffset below the log start offset or above
// the LEO gives ErrOffsetOutOfRange.
func (l *Log) Read(fetchOffset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	if l.failed != nil {
		return ReadResult{}, l.failed
	}
	result := ReadResult{FirstOffset: fetchOffset, NextOffset: fetchOffset,
		LogStartOffset: l.logStartOffset, LogEndOffset: l.LogEndOffset()}
	if fetchOffset < l.logStartOffset || fetchOffset > l.LogEndOffset() {
		return result, fmt.Errorf("read %s at %d: log spans [%d, %d]: %w", l.dir, fetchOffset,
			l.logStartOffset, l.LogEndOffset(), ErrOffsetOutOfRange)
	}
	if fetchOffset == l.LogEndOffset() || fetchOffset >= maxOffset || maxBytes < 0 {
		return result, nil
	}
	r := reader{log: l, result: &result, bytesLeft: int64(maxBytes), maxOffset: maxOffset, minOneBatch: minOneBatch}
	i := l.segmentFor(fetchOffset)
	if start, ok, err := l.readHints.find(l, l.segments[i], fetchOffset); err != nil {
		return ReadResult{}, l.failRead(err)
	} else if ok {
		if err := r.readSegmentFrom(l.segments[i], start); err != nil {
			return ReadResult{}, l.failRead(err)
		}
		i++
	}
	for ; i < len(l.segments) && !r.done; i++ {
		if err := r.readSegment(l.segments[i], fetchOffset); err != nil {
			return ReadResult{}, l.failRead(err)
		}
	}
	if len(result.Regions) > 0 {
		last := result.Regions[len(result.Regions)-1]
		l.readHints.add(readHint{offset: result.NextOffset, seg: last.seg, position: last.Position + last.Bytes,
			truncations: l.flush.truncations})
	}
	return result, nil
}

// readHintsMax is how many read ends a log remembers: enough for the
// followers and a few tailing consumers of a partition.
const readHintsMax = 4

// readHint says that every batch of seg before position ends below offset,
// and that position is a batch boundary or the segment's end: a read at
// offset may start at the batch at position instead of searching the
// offset index and walking the headers after its entry. Followers and
// tailing consumers fetch next where their last read ended, so most reads
// start at a hint.
//
// A hint holds while seg is still in the log with those bytes: segments
// that leave the log (retention, cleaner swaps, full truncation) fail the
// seg comparison, and a truncation, which may cut below position and let
// appends refill it with other batches, moves Log.flush.truncations.
type readHint struct {
	offset      int64
	seg         *segment
	position    int64
	truncations uint64
}

// readHints is a small ring of read ends, newest overwriting oldest.
type readHints struct {
	hints [readHintsMax]readHint
	next  int
}

// add remembers h, replacing a hint for the same offset.
func (rh *readHints) add(h readHint) {
	for i := range rh.hints {
		if rh.hints[i].offset == h.offset && rh.hints[i].seg == h.seg {
			rh.hints[i] = h
			return
		}
	}
	rh.hints[rh.next] = h
	rh.next = (rh.next + 1) % readHintsMax
}

// find returns the first batch of s whose last offset >= offset, if a
// valid hint names it.
func (rh *readHints) find(l *Log, s *segment, offset int64) (batchAt, bool, error) {
	for _, h := range rh.hints {
		if h.seg != s || h.offset != offset || h.truncations != l.flush.truncations || h.position >= s.bytes {
			continue
		}
		header, err := readHeader(s.log, h.position, s.bytes, l.scratch)
		if err != nil {
			return batchAt{}, false, fmt.Errorf("segment %d: %w", s.baseOffset, err)
		}
		if header.LastOffset() < offset { // the header rotted on the device
			return batchAt{}, false, fmt.Errorf("segment %d: batch at %d ends at %d, below %d where a read ended: %w",
				s.baseOffset, h.position, header.LastOffset(), offset, errCorruptData)
		}
		return batchAt{header: header, position: h.position}, true, nil
	}
	return batchAt{}, false, nil
}

// failRead fails the log on a read error. That includes headers that no
// longer parse: bytes the log wrote or verified have rotted on the device,
// which is a storage failure like EIO.
func (l *Log) failRead(err error) error { return l.fail(err) }

// segmentFor returns the index of the segment holding offset: the last one
// whose base offset <= offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })
	return max(i-1, 0)
}

// reader accumulates regions across segments.
type reader struct {
	log         *Log
	result      *ReadResult
	bytesLeft   int64
	maxOffset   int64
	minOneBatch bool
	done        bool
}

// CopyRegions reads the regions into one new buffer: for readers inside the
// node (the group coordinator's load) and tests. Fetch never copies: it
// sends the regions themselves (SPEC.md §2.2).
func CopyRegions(regions []Region) ([]byte, error) {
	var total int64
	for _, r := range regions {
		total += r.Bytes
	}
	out := make([]byte, total)
	at := int64(0)
	for _, r := range regions {
		n, err := r.File.ReadAt(out[at:at+r.Bytes], r.Position)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == r.Bytes) {
			return nil, fmt.Errorf("copy region %s at %d: %w", r.File.Path(), r.Position, err)
		}
		at += r.Bytes
	}
	return out, nil
}
