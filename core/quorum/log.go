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

// entryLog is the in-memory copy of the replicated log (durable or not)
// above the latest snapshot: entries[i] has offset start+i, and the entry
// at start-1, folded into the snapshot, had epoch startEpoch.
type entryLog struct {
	start      int64
	startEpoch int32
	entries    []Entry
}

// endOffset is the offset the next entry gets.
func (l *entryLog) endOffset() int64 { return l.start + int64(len(l.entries)) }

// lastEpoch is the epoch of the last entry (or of the snapshot's), 0 for
// an empty log.
func (l *entryLog) lastEpoch() int32 {
	if len(l.entries) == 0 {
		return l.startEpoch
	}
	return l.entries[len(l.entries)-1].Epoch
}

// epochAt is the epoch of the entry at offset, which must be held or be
// the snapshot's last.
func (l *entryLog) epochAt(offset int64) int32 {
	if offset == l.start-1 {
		return l.startEpoch
	}
	return l.entries[offset-l.start].Epoch
}

// append adds e, which must come next and carry no smaller epoch.
func (l *entryLog) append(e Entry) {
	if e.Offset != l.endOffset() || e.Epoch < l.lastEpoch() {
		panic(fmt.Sprintf("quorum: append offset %d epoch %d to log ending at %d epoch %d",
			e.Offset, e.Epoch, l.endOffset(), l.lastEpoch()))
	}
	l.entries = append(l.entries, e)
}

// truncateTo drops every entry at offset end and above; end is at least
// the log start (the snapshot is committed and never truncated).
func (l *entryLog) truncateTo(end int64) {
	if end < l.start || end > l.endOffset() {
		panic(fmt.Sprintf("quorum: truncate to %d of log [%d, %d)", end, l.start, l.endOffset()))
	}
	clear(l.entries[end-l.start:])
	l.entries = l.entries[:end-l.start]
}

// compactTo drops the entries below end, which a snapshot ending at end
// (its last entry of epoch endEpoch) now covers. With end beyond the log,
// the log restarts empty at end.
func (l *entryLog) compactTo(end int64, endEpoch int32) {
	if end <= l.start {
		return
	}
	if end >= l.endOffset() {
		l.entries = nil
	} else {
		l.entries = append([]Entry(nil), l.entries[end-l.start:]...)
	}
	l.start, l.startEpoch = end, endEpoch
}

// slice returns entries [from, to), from at least the log start; the
// result aliases the log.
func (l *entryLog) slice(from, to int64) []Entry {
	return l.entries[from-l.start : to-l.start : to-l.start]
}

// endOffsetForEpoch answers KIP-595's question: the largest epoch in the
// log not above epoch, and the offset where it ends (the start of the next
// larger epoch, or the log end). With no such epoch: (-1, log start).
func (l *entryLog) endOffsetForEpoch(epoch int32) (int32, int64) {
	// The first entry with a larger epoch ends the answer's epoch.
	end := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Epoch > epoch })
	if end > 0 {
		return l.entries[end-1].Epoch, l.start + int64(end)
	}
	if l.start == 0 || epoch < l.startEpoch {
		return -1, l.start
	}
	return l.startEpoch, l.start
}
