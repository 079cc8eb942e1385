package log

import (
	"fmt"
	"sort"

	"strand/core/log/checkpoint"
)

// UndefinedEpoch and UndefinedEpochOffset are Kafka's answers for an epoch
// the cache cannot place (OffsetsForLeaderEpochResponse).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochCache maps each leader epoch to the first offset written in it, as
// Kafka's LeaderEpochFileCache does. Epochs and start offsets are strictly
// increasing. It is in memory; the Log persists it to
// leader-epoch-checkpoint whenever it changes, which is why only the Log
// changes it (see Log.AssignEpochStartOffset).
type EpochCache struct {
	entries []checkpoint.EpochEntry
	// version counts changes, so that the Log knows what is persisted.
	version uint64
}

// NewEpochCache returns a cache holding entries, which must be strictly
// increasing in both fields.
func NewEpochCache(entries []checkpoint.EpochEntry) (*EpochCache, error) {
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return nil, fmt.Errorf("epoch cache entry %d (%d, %d): negative", i, e.Epoch, e.StartOffset)
		}
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset) {
			return nil, fmt.Errorf("epoch cache entry %d (%d, %d): does not follow (%d, %d)", i,
				e.Epoch, e.StartOffset, entries[i-1].Epoch, entries[i-1].StartOffset)
		}
	}
	return &EpochCache{entries: append([]checkpoint.EpochEntry(nil), entries...)}, nil
}

// Entries returns a copy of the entries, oldest first.
func (c *EpochCache) Entries() []checkpoint.EpochEntry {
	return append([]checkpoint.EpochEntry(nil), c.entries...)
}

// LatestEpoch returns the newest epoch, or UndefinedEpoch when empty.
func (c *EpochCache) LatestEpoch() int32 {
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records that epoch starts at startOffset, as Kafka's assign does:
// nothing happens if epoch is already the latest and starts no later;
// otherwise every entry with an epoch >= epoch or a start offset >=
// startOffset is dropped (they can no longer be true) and the entry added.
// It reports whether the cache changed.
func (c *EpochCache) assign(epoch int32, startOffset int64) bool {
	if epoch < 0 || startOffset < 0 {
		return false // Kafka ignores batches without a leader epoch
	}
	if n := len(c.entries); n > 0 {
		latest := c.entries[n-1]
		if latest.Epoch == epoch && latest.StartOffset <= startOffset {
			return false
		}
	}
	keep := len(c.entries)
	for keep > 0 && (c.entries[keep-1].Epoch >= epoch || c.entries[keep-1].StartOffset >= startOffset) {
		keep--
	}
	c.entries = append(c.entries[:keep], checkpoint.EpochEntry{Epoch: epoch, StartOffset: startOffset})
	c.changed()
	return true
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's endOffsetFor does:
// the largest epoch <= requested and the offset where the next larger epoch
// starts, or logEndOffset if requested is the latest epoch. A requested epoch
// below every known epoch answers (requested, first start offset); one above
// them all, or any request on an empty cache, answers undefined.
func (c *EpochCache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	if requested == UndefinedEpoch || len(c.entries) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if c.LatestEpoch() == requested {
		return requested, logEndOffset
	}
	// higher is the first entry with an epoch > requested.
	higher := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > requested })
	if higher == len(c.entries) {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// truncateFromEnd drops every entry that starts at or after endOffset, after
// the log is truncated to endOffset.
func (c *EpochCache) truncateFromEnd(endOffset int64) {
	keep := len(c.entries)
	for keep > 0 && c.entries[keep-1].StartOffset >= endOffset {
		keep--
	}
	if keep != len(c.entries) {
		c.entries = c.entries[:keep]
		c.changed()
	}
}

// truncateFromStart drops the entries wholly before startOffset, after the
// log start offset moves there: the last entry starting at or before it is
// kept, moved to start at startOffset, as Kafka does.
func (c *EpochCache) truncateFromStart(startOffset int64) {
	covering := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > startOffset }) - 1
	if covering < 0 || (covering == 0 && c.entries[0].StartOffset == startOffset) {
		return
	}
	rest := c.entries[covering:]
	rest[0].StartOffset = startOffset
	c.entries = append([]checkpoint.EpochEntry(nil), rest...)
	c.changed()
}

// changed bumps the version and asserts the ordering invariant.
func (c *EpochCache) changed() {
	c.version++
	for i := 1; i < len(c.entries); i++ {
		if c.entries[i].Epoch <= c.entries[i-1].Epoch || c.entries[i].StartOffset <= c.entries[i-1].StartOffset {
			panic(fmt.Sprintf("log: epoch cache not strictly increasing at %d: %v", i, c.entries))
		}
	}
}
