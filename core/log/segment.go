package log

import (
	"errors"
	"fmt"
	"math"

	"strand/core/batch"
	"strand/core/env"
)

// File name suffixes of a segment, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segmentFileName is Kafka's name for a segment file: the base offset as 20
// zero-padded digits, then the suffix.
func segmentFileName(baseOffset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", baseOffset, suffix)
}

// segment is one .log file and its two indexes. Its batches cover offsets
// [baseOffset, nextOffset) contiguously, the first starting at baseOffset.
type segment struct {
	baseOffset int64
	nextOffset int64
	// bytes is the logical size of the .log file: the valid batches.
	bytes     int64
	log       env.File
	index     *offsetIndex
	timeIndex *timeIndex
	// maxTimestamp is the largest batch MaxTimestamp, noTimestamp if none;
	// offsetOfMaxTimestamp is the last offset of the batch that holds it.
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	// firstBatchTimestamp is the first batch's MaxTimestamp, what Kafka's
	// time-based roll measures from (rollingBasedTimestamp), noTimestamp if
	// the segment is empty.
	firstBatchTimestamp int64
	// createdMs is when the segment was created or loaded, the fallback for
	// time-based roll when batches carry no timestamp.
	createdMs int64
	// bytesSinceIndexEntry counts log bytes since the last offset index entry.
	bytesSinceIndexEntry int64
	// indexIntervalBytes is index.interval.bytes.
	indexIntervalBytes int64
	// truncated is set when the files were cut since the last flush, so
	// that the next flush syncs the cut even if no data follows it.
	truncated bool
	// indexesMissing is set at load when an index file did not exist.
	indexesMissing bool
	// lastBatch is the newest batch indexBatch saw, if lastBatchSet: a
	// batch boundary findBatch may start from instead of the offset index's
	// entry, which is up to index.interval.bytes of headers earlier. Most
	// reads (followers, tailing consumers) ask for the newest batches. It
	// stays a boundary while its position is below bytes: a cut keeps the
	// bytes before it, and every append moves lastBatch to the new batch.
	lastBatch    batchAt
	lastBatchSet bool
	// pins counts the regions of in-flight responses that refer to the
	// .log file (pin.go). While pinned, the file is neither closed
	// (closed waits) nor cut (cutPending waits).
	pins int
	// closed is set once the segment left the log (close); the .log file
	// stays open until the last pin goes.
	closed bool
	// cutPending is set when a truncation cut the segment while it was
	// pinned: bytes is its logical size, the file still longer. The segment
	// takes no more appends.
	cutPending bool
}

// openSegmentFiles opens (creating if asked) the three files of a segment.
func openSegmentFiles(disk env.Disk, dir string, baseOffset int64, cfg Config, create bool) (*segment, error) {
	logFile, err := disk.Open(joinPath(dir, segmentFileName(baseOffset, logSuffix)), env.OpenOptions{Create: create})
	if err != nil {
		return nil, err
	}
	indexOpts := env.OpenOptions{Create: true, MappedBytesMax: cfg.SegmentIndexBytes}
	indexFile, err := disk.Open(joinPath(dir, segmentFileName(baseOffset, indexSuffix)), indexOpts)
	if err != nil {
		return nil, errors.Join(err, logFile.Close())
	}
	timeFile, err := disk.Open(joinPath(dir, segmentFileName(baseOffset, timeIndexSuffix)), indexOpts)
	if err != nil {
		return nil, errors.Join(err, logFile.Close(), indexFile.Close())
	}
	return &segment{
		baseOffset:           baseOffset,
		nextOffset:           baseOffset,
		bytes:                logFile.Size(),
		log:                  logFile,
		index:                newOffsetIndex(indexFile, baseOffset, cfg.SegmentIndexBytes),
		timeIndex:            newTimeIndex(timeFile, baseOffset, cfg.SegmentIndexBytes),
		maxTimestamp:         noTimestamp,
		offsetOfMaxTimestamp: baseOffset,
		firstBatchTimestamp:  noTimestamp,
		indexIntervalBytes:   cfg.IndexIntervalBytes,
	}, nil
}

// createSegment creates an empty segment at baseOffset, emptying any files
// left there by an earlier incarnation.
func createSegment(disk env.Disk, dir string, baseOffset int64, cfg Config, nowMs int64) (*segment, error) {
	s, err := openSegmentFiles(disk, dir, baseOffset, cfg, true)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", baseOffset, err)
	}
	s.createdMs = nowMs
	if err := s.truncateFiles(0); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// truncateFiles empties the indexes and cuts the .log file at logBytes,
// before an index rebuild or a recreation.
func (s *segment) truncateFiles(logBytes int64) error {
	if s.log.Size() != logBytes {
		if err := s.log.Truncate(logBytes); err != nil {
			return fmt.Errorf("truncate %s: %w", s.log.Path(), err)
		}
	}
	s.bytes = logBytes
	if err := s.index.truncateEntries(0); err != nil {
		return err
	}
	return s.timeIndex.truncateEntries(0)
}

// resetStats forgets everything learnt from the segment's batches, before a
// scan rebuilds it.
func (s *segment) resetStats() {
	s.nextOffset = s.baseOffset
	s.maxTimestamp, s.offsetOfMaxTimestamp = noTimestamp, s.baseOffset
	s.firstBatchTimestamp = noTimestamp
	s.bytesSinceIndexEntry = 0
}

// canHold reports whether a batch with this last offset fits the indexes'
// 32-bit relative offsets.
func (s *segment) canHold(lastOffset int64) bool {
	return lastOffset-s.baseOffset <= math.MaxInt32
}

// append writes one batch, already stamped, at the end of the segment and
// indexes it as Kafka's LogSegment.append does. It takes ownership of b.
func (s *segment) append(b []byte, h batch.Header) error {
	if h.BaseOffset != s.nextOffset || !s.canHold(h.LastOffset()) || s.bytes+int64(len(b)) > positionMax || s.cutPending {
		panic(fmt.Sprintf("log: segment %d: batch at %d (%d bytes) does not follow next offset %d at %d bytes",
			s.baseOffset, h.BaseOffset, len(b), s.nextOffset, s.bytes))
	}
	position := s.bytes
	if err := s.log.Append(b); err != nil {
		return fmt.Errorf("append to %s: %w", s.log.Path(), err)
	}
	s.bytes += h.TotalBytes()
	s.nextOffset = h.NextOffset()
	return s.indexBatch(h, position)
}

// indexBatch updates the timestamps and the indexes for a batch at position,
// on append and on recovery alike.
func (s *segment) indexBatch(h batch.Header, position int64) error {
	if position == 0 {
		s.firstBatchTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
	}
	// Kafka's rule: strictly more than the interval. A full index (possible
	// when recovery meets a segment indexed under a larger
	// segment.index.bytes) just stays sparser.
	if s.bytesSinceIndexEntry > s.indexIntervalBytes && !s.index.isFull() && !s.timeIndex.isFull() {
		if err := s.index.append(h.LastOffset(), position); err != nil {
			return err
		}
		if err := s.timeIndex.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
			return err
		}
		s.bytesSinceIndexEntry = 0
	}
	s.bytesSinceIndexEntry += h.TotalBytes()
	s.lastBatch, s.lastBatchSet = batchAt{header: h, position: position}, true
	return nil
}

// close closes the indexes, and the .log file unless a region pins it:
// then the last unpin closes it.
func (s *segment) close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := errors.Join(s.index.file.Close(), s.timeIndex.file.Close())
	if s.pins == 0 {
		err = errors.Join(s.log.Close(), err)
	}
	return err
}

// remove closes the segment and deletes its files. A pinned .log file loses
// its name at once and stays readable until the last pin goes.
func (s *segment) remove(disk env.Disk) error {
	err := s.close()
	for _, f := range []env.File{s.timeIndex.file, s.index.file, s.log} {
		if removeErr := disk.Remove(f.Path()); removeErr != nil && !errors.Is(removeErr, env.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", f.Path(), removeErr))
		}
	}
	return err
}

// files are the segment's three files, the ones a flush syncs.
func (s *segment) files() []env.File {
	return []env.File{s.log, s.index.file, s.timeIndex.file}
}

// becomeInactive writes the final time index entry, the segment's max
// timestamp, as Kafka's onBecomeInactiveSegment does, so that retention and
// the max-timestamp lookup find it after a restart without a scan.
func (s *segment) becomeInactive() error {
	return s.timeIndex.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, true)
}

func joinPath(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// recomputeMaxTimestamp rebuilds the max timestamp after a truncation, as
// Kafka's readLargestTimestamp does: the last time index entry, then a header
// scan from the batch it names to the end.
//
// The last entry, if it has a timestamp, must name a batch the walk meets,
// by its last offset, with that batch's max timestamp (indexBatch writes
// no other entry): an
// entry that does not is corrupt, and the error sends the segment to
// recovery, which rebuilds the indexes. The load's checks (order, range)
// cannot see a flipped bit that keeps the entry in order.
func (s *segment) recomputeMaxTimestamp(scratch []byte) error {
	entryTimestamp, entryOffset := s.timeIndex.lastTimestamp, s.timeIndex.lastOffset
	s.maxTimestamp, s.offsetOfMaxTimestamp = entryTimestamp, entryOffset
	start, err := s.lookup(entryOffset)
	if err != nil {
		return err
	}
	// An entry without a timestamp (batches that carry none) names the
	// segment's base offset, not a batch: nothing to match.
	matchEntry := s.timeIndex.entries > 0 && entryTimestamp != noTimestamp
	entryMatched := !matchEntry
	err = s.walkFrom(start, scratch, func(b batchAt) bool {
		if matchEntry && b.header.LastOffset() == entryOffset {
			entryMatched = b.header.MaxTimestamp == entryTimestamp
		}
		if b.header.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = b.header.MaxTimestamp, b.header.LastOffset()
		}
		return true
	})
	if err == nil && !entryMatched {
		err = fmt.Errorf("segment %d: time index entry (%d, %d) names no batch with that max timestamp", s.baseOffset, entryTimestamp, entryOffset)
	}
	return err
}
