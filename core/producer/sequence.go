package producer

import "math"

// lastSequence is the sequence of a batch's last record: base sequence plus
// the offset delta, wrapping past math.MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.incrementSequence does.
func lastSequence(baseSequence, lastOffsetDelta int32) int32 {
	if baseSequence > math.MaxInt32-lastOffsetDelta {
		return lastOffsetDelta - (math.MaxInt32 - baseSequence) - 1
	}
	return baseSequence + lastOffsetDelta
}

// firstSequence inverts lastSequence (DefaultRecordBatch.decrementSequence).
func firstSequence(lastSeq, offsetDelta int32) int32 {
	if lastSeq < offsetDelta {
		return math.MaxInt32 - (offsetDelta - lastSeq) + 1
	}
	return lastSeq - offsetDelta
}

// inSequence reports whether next directly follows last, 0 following
// math.MaxInt32 (ProducerAppendInfo.inSequence).
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}
