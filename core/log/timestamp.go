package log

// OffsetForTimestamp answers ListOffsets by timestamp: the first batch, at
// or after the log start offset, whose max timestamp >= timestampMs, found
// through the segments' max timestamps, the time index and a header scan. It
// returns that batch's base offset and max timestamp, and found=false when no
// batch is that recent.
//
// Kafka answers with the exact record; Strand answers at batch granularity
// (the batch's first offset), because the log does not decode records. A
// consumer seeking there reads at most one batch of earlier records.
func (l *Log) OffsetForTimestamp(timestampMs int64) (offset, timestamp int64, found bool, err error) {
	if l.failed != nil {
		return 0, 0, false, l.failed
	}
	for _, s := range l.segments {
		if s.nextOffset <= l.logStartOffset || s.maxTimestamp < timestampMs {
			continue
		}
		offset, timestamp, found, err := l.searchSegmentByTime(s, timestampMs)
		if err != nil || found {
			return offset, timestamp, found, err
		}
	}
	return 0, 0, false, nil
}

func (l *Log) searchSegmentByTime(s *segment, timestampMs int64) (offset, timestamp int64, found bool, err error) {
	_, indexedOffset, err := s.timeIndex.lookup(timestampMs)
	if err != nil {
		return 0, 0, false, l.fail(err)
	}
	position, err := s.index.lookup(max(indexedOffset, l.logStartOffset))
	if err != nil {
		return 0, 0, false, l.fail(err)
	}
	err = s.walkHeaders(position, l.scratch, func(b batchAt) bool {
		if b.header.LastOffset() < l.logStartOffset || b.header.MaxTimestamp < timestampMs {
			return true
		}
		offset, timestamp, found = max(b.header.BaseOffset, l.logStartOffset), b.header.MaxTimestamp, true
		return false
	})
	if err != nil {
		return 0, 0, false, l.fail(err)
	}
	return offset, timestamp, found, nil
}

// MaxTimestamp answers ListOffsets with MAX_TIMESTAMP (KIP-734): the largest
// batch max timestamp in the log and the last offset of the batch that holds
// it. found is false when the log holds no timestamped batch.
func (l *Log) MaxTimestamp() (offset, timestamp int64, found bool) {
	timestamp = noTimestamp
	for _, s := range l.segments {
		if s.nextOffset > l.logStartOffset && s.maxTimestamp > timestamp {
			timestamp, offset = s.maxTimestamp, s.offsetOfMaxTimestamp
		}
	}
	return offset, timestamp, timestamp != noTimestamp
}
