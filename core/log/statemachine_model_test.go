package log

import (
	"bytes"
	"fmt"
	"math"

	"strand/core/batch"
	"strand/core/log/checkpoint"
)

// This file is the model the state-machine test (statemachine_test.go)
// checks the Log against. It knows nothing of segments' internals, indexes
// or files: a log is a list of batches, a log start offset and a log end
// offset, and each question the Log answers is answered here by a linear
// scan of that list.

// modelBatch is one batch as the model knows it: its stamped bytes and the
// header fields the checks need.
type modelBatch struct {
	base, last int64
	epoch      int32
	maxTs      int64
	bytes      []byte
}

func (b modelBatch) next() int64 { return b.last + 1 }

// newModelBatch describes stamped batch bytes; b must be a valid batch.
func newModelBatch(b []byte) modelBatch {
	h, err := batch.Verify(b)
	if err != nil {
		panic(fmt.Sprintf("model: not a valid batch: %v", err))
	}
	return modelBatch{base: h.BaseOffset, last: h.LastOffset(), epoch: h.PartitionLeaderEpoch,
		maxTs: h.MaxTimestamp, bytes: b}
}

// logModel is what the log must hold.
type logModel struct {
	// batches are every batch in the log's segments, oldest first, with
	// contiguous offsets. Batches wholly below lso are possible only when
	// a crash resurrected an old segment straddling lso; reads never
	// return them.
	batches  []modelBatch
	lso, leo int64
	// syncedFloor is what the model knows to be durable: a flush issued by
	// the test, with no truncation since, completed for everything below
	// it. The log's recovery point must never be lower.
	syncedFloor int64
	// truncations counts truncations, so that a flush issued before one does
	// not raise syncedFloor.
	truncations uint64
	// incarnations holds, per base offset, every batch (as stamped bytes)
	// the test handed to an append at that offset since the last Writeback:
	// after a crash, unsynced data may come back from any of them (a
	// truncation is not durable until synced, as in Kafka).
	incarnations map[int64][][]byte
	// epochMax is the largest leader epoch the test used; epochs never
	// decrease.
	epochMax int32
	// epochCache is the leader epoch cache as Kafka's LeaderEpochFileCache
	// keeps it through the operations (see epochAssign and the truncations).
	// It can hold an entry no batch carries any more: retention that empties
	// the log keeps the latest epoch, moved to the new log start offset.
	epochCache []checkpoint.EpochEntry
	// durable says every batch of the model is on the medium (a Writeback,
	// or a power loss, since which nothing was appended or removed): a
	// crash must then lose none, synced or not.
	durable bool
	// failed says the log must be failed.
	failed bool
	// syncArms counts armed FailNextSyncs not yet seen to fail the log: only
	// they may fail it from a disk completion.
	syncArms int
}

func newLogModel() logModel {
	return logModel{incarnations: map[int64][][]byte{}}
}

// remember records that b was handed to an append at its base offset.
func (m *logModel) remember(b modelBatch) {
	for _, seen := range m.incarnations[b.base] {
		if bytes.Equal(seen, b.bytes) {
			return
		}
	}
	m.incarnations[b.base] = append(m.incarnations[b.base], b.bytes)
}

// isIncarnation reports whether b was once handed to an append.
func (m *logModel) isIncarnation(b []byte) bool {
	h, _ := batch.ParseHeader(b)
	for _, seen := range m.incarnations[h.BaseOffset] {
		if bytes.Equal(seen, b) {
			return true
		}
	}
	return false
}

// forgetGhosts is called once every change is durable (Writeback): only the
// batches now in the log can come back after a crash, and all of them must.
// But a truncation inside a pinned segment is done on the file only once the
// pins are released (cutPending): until then the truncated batches are still
// in the file, written back with the rest, and a crash may bring them back,
// as a crash before its truncation reached the disk would. Those ghosts are
// kept while a cut is pending.
func (m *logModel) forgetGhosts(cutPending bool) {
	m.durable = true
	if !cutPending {
		m.incarnations = map[int64][][]byte{}
	}
	for _, b := range m.batches {
		m.remember(b)
	}
}

// appended adds batches that an append accepted.
func (m *logModel) appended(bs ...modelBatch) {
	for _, b := range bs {
		if b.base != m.leo {
			panic(fmt.Sprintf("model: batch at %d appended at LEO %d", b.base, m.leo))
		}
		m.batches = append(m.batches, b)
		m.leo = b.next()
		m.durable = false
		m.epochAssign(b.epoch, b.base)
		m.epochMax = max(m.epochMax, b.epoch)
	}
}

// visible returns the batches a read may return: those holding an offset at
// or above the log start offset.
func (m *logModel) visible() []modelBatch {
	for i, b := range m.batches {
		if b.last >= m.lso {
			return m.batches[i:]
		}
	}
	return nil
}

// truncateTo is Log.TruncateTo: every batch whose last offset >= offset
// goes; the LEO becomes the end of what remains.
func (m *logModel) truncateTo(offset int64) {
	if offset >= m.leo {
		return
	}
	keep := 0
	for keep < len(m.batches) && m.batches[keep].last < offset {
		keep++
	}
	if keep < len(m.batches) {
		m.leo = m.batches[keep].base
	}
	m.batches = m.batches[:keep]
	m.durable = false
	m.lso = min(m.lso, m.leo)
	m.epochTruncateFromEnd(m.leo)
	m.syncedFloor = min(m.syncedFloor, m.leo)
	m.truncations++
}

// truncateFullyAndStartAt is Log.TruncateFullyAndStartAt.
func (m *logModel) truncateFullyAndStartAt(offset int64) {
	m.batches = nil
	m.durable = false
	m.lso, m.leo = offset, offset
	m.epochCache = nil
	m.syncedFloor = min(m.syncedFloor, offset)
	m.truncations++
}

// modelRead is what Log.Read must return: the batches, the first and next
// offsets, and whether the offset is out of range.
func (m *logModel) read(fetchOffset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (out []modelBatch, first, next int64, outOfRange bool) {
	if fetchOffset < m.lso || fetchOffset > m.leo {
		return nil, fetchOffset, fetchOffset, true
	}
	first, next = fetchOffset, fetchOffset
	if fetchOffset == m.leo || fetchOffset >= maxOffset || maxBytes < 0 {
		return nil, first, next, false
	}
	bytesLeft := int64(maxBytes)
	for _, b := range m.visible() {
		if b.last < fetchOffset {
			continue
		}
		size := int64(len(b.bytes))
		if b.last >= maxOffset || (size > bytesLeft && !(len(out) == 0 && minOneBatch)) {
			break
		}
		if len(out) == 0 {
			first = b.base
		}
		out = append(out, b)
		bytesLeft -= size
		next = b.next()
	}
	return out, first, next, false
}

// offsetForTimestamp is Log.OffsetForTimestamp by linear scan: the first
// record, at or above the log start offset, of a visible batch, whose
// timestamp >= timestampMs, as franz-go decodes the batches.
func (m *logModel) offsetForTimestamp(t fataler, timestampMs int64) (TimestampOffset, bool) {
	for _, b := range m.visible() {
		if b.maxTs < timestampMs {
			continue
		}
		if answer, found := firstRecordAtOrAfter(recordTimes(t, b.bytes), timestampMs, m.lso); found {
			return answer, true
		}
	}
	return TimestampOffset{}, false
}

// maxTimestamp is Log.MaxTimestamp by linear scan: the first record carrying
// the largest max timestamp, in the first batch that holds it, over the
// segments (bases) that hold an offset at or above the log start offset.
// Like Kafka's, the answer is per segment: when the log start offset lies
// inside the first segment (a crash brought back an old segment under a
// TruncateFullyAndStartAt), batches below it count too.
func (m *logModel) maxTimestamp(t fataler, bases []int64) (TimestampOffset, bool) {
	timestamp := int64(noTimestamp)
	var holder []byte
	for _, s := range m.segments(bases) {
		if s.next <= m.lso {
			continue
		}
		for _, b := range s.batches {
			if b.maxTs > timestamp {
				timestamp, holder = b.maxTs, b.bytes
			}
		}
	}
	if holder == nil {
		return TimestampOffset{}, false
	}
	return firstRecordAtOrAfter(recordTimes(t, holder), timestamp, math.MinInt64)
}

// epochAssign is LeaderEpochFileCache.assign for epochs that never
// decrease: a newer epoch starts an entry, replacing any entry that starts
// at or after it (one left at the LEO by retention).
func (m *logModel) epochAssign(epoch int32, startOffset int64) {
	if n := len(m.epochCache); epoch < 0 || (n > 0 && epoch <= m.epochCache[n-1].Epoch) {
		return
	}
	m.epochTruncateFromEnd(startOffset)
	m.epochCache = append(m.epochCache, checkpoint.EpochEntry{Epoch: epoch, StartOffset: startOffset})
}

// epochTruncateFromEnd drops the entries starting at or after endOffset.
func (m *logModel) epochTruncateFromEnd(endOffset int64) {
	var kept []checkpoint.EpochEntry
	for _, e := range m.epochCache {
		if e.StartOffset < endOffset {
			kept = append(kept, e)
		}
	}
	m.epochCache = kept
}

// epochTruncateFromStart drops the entries wholly before startOffset; the
// last one starting at or before it now starts there.
func (m *logModel) epochTruncateFromStart(startOffset int64) {
	var kept []checkpoint.EpochEntry
	for i, e := range m.epochCache {
		if i+1 < len(m.epochCache) && m.epochCache[i+1].StartOffset <= startOffset {
			continue
		}
		kept = append(kept, checkpoint.EpochEntry{Epoch: e.Epoch, StartOffset: max(e.StartOffset, startOffset)})
	}
	m.epochCache = kept
}

// epochsOfBatches is the epoch cache the batches imply, as Kafka derives it
// in recovery: an entry for each batch whose epoch is newer than every
// earlier batch's, the entry covering the log start offset moved up to it.
// While the log holds a visible batch, the cache must equal it.
func (m *logModel) epochsOfBatches() []checkpoint.EpochEntry {
	var entries []checkpoint.EpochEntry
	for _, b := range m.batches {
		if b.epoch >= 0 && (len(entries) == 0 || b.epoch > entries[len(entries)-1].Epoch) {
			entries = append(entries, checkpoint.EpochEntry{Epoch: b.epoch, StartOffset: b.base})
		}
	}
	// Drop the entries wholly before lso; the last one starting at or
	// before it now starts at lso.
	covering := -1
	for i, e := range entries {
		if e.StartOffset <= m.lso {
			covering = i
		}
	}
	if covering >= 0 {
		entries = append([]checkpoint.EpochEntry(nil), entries[covering:]...)
		entries[0].StartOffset = m.lso
	}
	return entries
}

// endOffsetForEpoch answers OffsetForLeaderEpoch from entries as Kafka's
// LeaderEpochFileCache.endOffsetFor does, by linear scan.
func endOffsetForEpoch(entries []checkpoint.EpochEntry, requested int32, leo int64) (int32, int64) {
	if requested == UndefinedEpoch || len(entries) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if entries[len(entries)-1].Epoch == requested {
		return requested, leo
	}
	floor := -1 // last entry with epoch <= requested
	for i, e := range entries {
		if e.Epoch <= requested {
			floor = i
		}
	}
	switch {
	case floor == len(entries)-1:
		return UndefinedEpoch, UndefinedEpochOffset // newer than every epoch
	case floor < 0:
		return requested, entries[0].StartOffset
	default:
		return entries[floor].Epoch, entries[floor+1].StartOffset
	}
}

// modelSegment is a segment as the model sees it: the batches whose base
// offset lies in [base, the next segment's base).
type modelSegment struct {
	base, next int64
	batches    []modelBatch
	bytes      int64
	maxTs      int64
}

// segments groups the model's batches by the log's segment base offsets.
// The last segment ends at the LEO.
func (m *logModel) segments(bases []int64) []modelSegment {
	segs := make([]modelSegment, len(bases))
	j := 0
	for i, base := range bases {
		s := modelSegment{base: base, next: m.leo, maxTs: noTimestamp}
		if i+1 < len(bases) {
			s.next = bases[i+1]
		}
		for j < len(m.batches) && m.batches[j].base < s.next {
			b := m.batches[j]
			s.batches = append(s.batches, b)
			s.bytes += int64(len(b.bytes))
			s.maxTs = max(s.maxTs, b.maxTs)
			j++
		}
		segs[i] = s
	}
	return segs
}

// retention is ApplyRetention as Kafka's deleteOldSegments specifies it:
// the three passes (retention.ms by the segment's largest timestamp, then
// retention.bytes against the size left after the first pass, then segments
// wholly below the log start offset), each deleting from the oldest, never
// the active segment nor one holding an offset at or above highWatermark.
// It returns how many segments go.
func retentionModel(segs []modelSegment, cfg Config, lso, nowMs, highWatermark int64) int {
	deleted := 0
	deletable := func(s modelSegment) bool { return deleted < len(segs)-1 && s.next <= highWatermark }
	if cfg.RetentionMs >= 0 {
		for deleted < len(segs) && deletable(segs[deleted]) && nowMs-segs[deleted].maxTs > cfg.RetentionMs {
			deleted++
		}
	}
	if cfg.RetentionBytes >= 0 {
		var size int64
		for _, s := range segs[deleted:] {
			size += s.bytes
		}
		excess := size - cfg.RetentionBytes
		for deleted < len(segs) && deletable(segs[deleted]) && excess-segs[deleted].bytes >= 0 {
			excess -= segs[deleted].bytes
			deleted++
		}
	}
	lso = max(lso, segs[deleted].base)
	for deleted < len(segs) && deletable(segs[deleted]) && segs[deleted].next <= lso {
		deleted++
	}
	return deleted
}
