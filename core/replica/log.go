package replica

// Sentinels shared with Kafka's protocol, where -1 means "absent".
const (
	// NoEpoch is Kafka's UNDEFINED_EPOCH: no leader epoch known or sent.
	NoEpoch int32 = -1
	// NoOffset is Kafka's UNDEFINED_EPOCH_OFFSET: no offset known.
	NoOffset int64 = -1
	// NoLeader is the leader id of a partition that has no leader.
	NoLeader int32 = -1
)

// Log is all a replica reads of its local log. core/log satisfies it; the
// replica never mutates the log itself (SPEC.md §4: the core performs the
// effects the replica decides).
//
// The epoch cache behind LatestEpoch and EndOffsetForEpoch is Kafka's
// LeaderEpochFileCache: a map epoch → start offset, strictly increasing in
// both, entries appended when a batch with a new PartitionLeaderEpoch is
// appended, removed by truncation.
type Log interface {
	// LogStartOffset is the first offset still held.
	LogStartOffset() int64
	// LogEndOffset (LEO) is the offset the next appended record will get.
	LogEndOffset() int64
	// LatestEpoch is the largest epoch in the epoch cache (the epoch of the
	// last batch), or NoEpoch if the cache is empty.
	LatestEpoch() int32
	// EndOffsetForEpoch answers as Kafka's LeaderEpochFileCache.endOffsetFor:
	//   - requested == NoEpoch: (NoEpoch, NoOffset);
	//   - requested == LatestEpoch(): (requested, LogEndOffset());
	//   - no cached epoch is larger than requested: (NoEpoch, NoOffset);
	//   - no cached epoch is <= requested: (requested, start offset of the
	//     first cached epoch);
	//   - otherwise (largest cached epoch <= requested, start offset of the
	//     first cached epoch > requested).
	EndOffsetForEpoch(requested int32) (foundEpoch int32, endOffset int64)
}

// EpochEndOffset is an (epoch, end offset) pair, as in Fetch's
// DivergingEpoch and OffsetForLeaderEpoch's answer.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}
