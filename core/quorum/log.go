package quorum

import (
	"fmt"
	"sort"
)

// Entry is one record of the replicated log. Offsets are consecutive from
// the log's start; epochs never decrease along the log.
type Entry struct {
	Offset int64
	Epoch  int32
	// Data is the payload; nil for the leader-change entry a new leader
	// appends. Never modified once appended.
	Data []byte
}

// entryLog is the in-memory copy of the replicated log (durable or not).
type entryLog struct {
	entries []Entry
}

// endOffset is the offset the next entry gets.
func (l *entryLog) endOffset() int64 { return int64(len(l.entries)) }

// lastEpoch is the epoch of the last entry, 0 for an empty log.
func (l *entryLog) lastEpoch() int32 {
	if len(l.entries) == 0 {
		return 0
	}
	return l.entries[len(l.entries)-1].Epoch
}

// epochAt is the epoch of the entry at offset, which must be held.
func (l *entryLog) epochAt(offset int64) int32 { return l.entries[offset].Epoch }

// append adds e, which must come next and carry no smaller epoch.
func (l *entryLog) append(e Entry) {
	if e.Offset != l.endOffset() || e.Epoch < l.lastEpoch() {
		panic(fmt.Sprintf("quorum: append offset %d epoch %d to log ending at %d epoch %d",
			e.Offset, e.Epoch, l.endOffset(), l.lastEpoch()))
	}
	l.entries = append(l.entries, e)
}

// truncateTo drops every entry at offset end and above.
func (l *entryLog) truncateTo(end int64) {
	if end < 0 || end > l.endOffset() {
		panic(fmt.Sprintf("quorum: truncate to %d of log ending at %d", end, l.endOffset()))
	}
	clear(l.entries[end:])
	l.entries = l.entries[:end]
}

// slice returns entries [from, to); the result aliases the log.
func (l *entryLog) slice(from, to int64) []Entry { return l.entries[from:to:to] }

// endOffsetForEpoch answers KIP-595's question: the largest epoch in the
// log not above epoch, and the offset where it ends (the start of the next
// larger epoch, or the log end). With no such epoch: (-1, 0).
func (l *entryLog) endOffsetForEpoch(epoch int32) (int32, int64) {
	// The first entry with a larger epoch ends the answer's epoch.
	end := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Epoch > epoch })
	if end == 0 {
		return -1, 0
	}
	return l.entries[end-1].Epoch, int64(end)
}
