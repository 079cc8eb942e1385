package log

import (
	"fmt"
	"math"

	"strand/core/batch"
)

// Log compaction (cleanup.policy=compact), as Kafka's LogCleaner does it,
// but as bounded steps on the event loop instead of a cleaner thread.
//
// A pass runs in three phases, each a sequence of CleanStep calls:
//
//  1. Map: read the dirty section, from the cleaner point (Kafka's first
//     dirty offset) up to the first uncleanable offset (the active segment's
//     base, the high watermark, min.compaction.lag.ms), and record each key's
//     latest offset. The map is bounded (CleanLimits.KeysMax, KeyBytesMax);
//     when it is full the pass cleans only the prefix it covers, as Kafka's
//     does. The pass's end offset is the offset after the last mapped batch.
//  2. Copy: for each group of segments from the log's first up to the end
//     offset (grouped so that the result fits segment.bytes and the index
//     size, as Kafka's groupSegmentsBySize does), write a cleaned segment
//     into <base>.log.cleaned and its indexes: a record stays if it is the
//     latest of its key, if its key is null, or if it lies at or beyond the
//     end offset; a tombstone stays until its batch's delete horizon.
//  3. Swap (cleaner_swap.go): sync the .cleaned files, rename them to .swap,
//     sync the directory, delete the group's old segments and rename the
//     .swap files to the segment's names, sync the directory. Open completes
//     a swap a crash interrupted (.swap files) and deletes .cleaned files.
//
// When the last group is swapped, the cleaner point moves to the end offset
// and CleanStep reports CleanPassDone: the owner then writes
// cleaner-offset-checkpoint (Manager.CleanStep does).
//
// Batches keep BaseOffset, LastOffsetDelta, PartitionLeaderEpoch, producer
// fields, MaxTimestamp and codec, so offsets never move, the epoch cache
// stays right and producer state survives. A batch whose records all go is
// kept as an empty, header-only batch: unlike Kafka, which drops such a batch
// unless it holds a producer's latest state, Strand keeps every batch
// boundary, so that segments stay contiguous in batch offsets, which its
// recovery and segment invariants check. Offsets of records become strictly
// increasing rather than contiguous.
//
// Tombstones: a cleaned batch that keeps a tombstone and has no delete
// horizon gets one, nowMs + delete.retention.ms, in FirstTimestamp with
// attribute bit 6 (KIP-534); record timestamp deltas are rewritten relative
// to it, so record timestamps do not change. A later pass drops the
// batch's tombstones once nowMs reaches the horizon.
//
// Reads: a Region returned by Read before a swap that points into a
// replaced segment must not be used after the swap: its file is closed (and
// removed, except the first of a group, whose name the cleaned segment
// takes). Issue 6 will pin regions so that the swap waits for them.
//
// Structural changes abort a pass: TruncateTo, TruncateFullyAndStartAt and
// retention deletions remove its .cleaned or .swap files first, so that a
// crash cannot bring a swap back over a truncated log. Close abandons it; the
// next Open tidies up.

// CleanLimits bounds the cleaner's work and memory.
type CleanLimits struct {
	// StepBytesMax is the most batch bytes one CleanStep reads (at least
	// one batch is read per step).
	StepBytesMax int64
	// KeysMax is the most keys the offset map holds (Kafka sizes it by
	// log.cleaner.dedupe.buffer.size).
	KeysMax int
	// KeyBytesMax is the most key bytes the offset map holds.
	KeyBytesMax int64
}

// DefaultCleanLimits are limits for a production broker: about a
// millisecond of work per step, and an offset map of at most 64 MiB of keys.
func DefaultCleanLimits() CleanLimits {
	return CleanLimits{StepBytesMax: 1 << 20, KeysMax: 1 << 20, KeyBytesMax: 64 << 20}
}

// CleanStatus says what a CleanStep did.
type CleanStatus int

const (
	// CleanIdle: nothing to clean.
	CleanIdle CleanStatus = iota
	// CleanWorking: a pass is under way; call again.
	CleanWorking
	// CleanWaiting: a pass waits for a disk completion; call again later.
	CleanWaiting
	// CleanPassDone: a pass finished in this step and moved the cleaner
	// point; the owner should write cleaner-offset-checkpoint.
	CleanPassDone
)

// cleanerState is the log's side of compaction.
type cleanerState struct {
	// point is the cleaner point (Kafka's first dirty offset): below it
	// every key appears at most once, as its latest record below it.
	point int64
	pass  *cleanPass
	// tombstoneHorizonMs is the earliest delete horizon of a batch that
	// the last pass kept with tombstones, math.MaxInt64 if none or not yet
	// known (after Open, until a pass has read the log): once the clock
	// passes it, the log is due for a pass that drops them, as KIP-534 makes
	// Kafka's cleaner do.
	tombstoneHorizonMs int64
}

// newCleanerState is the state of a log opened with this cleaner point.
func newCleanerState(point int64) cleanerState {
	return cleanerState{point: point, tombstoneHorizonMs: math.MaxInt64}
}

type cleanPhase int

const (
	phaseMap cleanPhase = iota
	phaseCopy
	phaseFinished
)

// cleanPass is one cleaning pass in progress.
type cleanPass struct {
	phase  cleanPhase
	limits CleanLimits
	// firstDirty is where the map starts; dirtyEnd is the first offset the
	// pass must not map; endOffset is the offset after the last mapped batch.
	firstDirty, dirtyEnd, endOffset int64
	keys                            map[string]int64
	keyBytes                        int64
	// mapSegment and mapPosition are the map phase's cursor.
	mapSegment  int
	mapPosition int64

	groups   [][]*segment
	group    int
	source   int
	position int64
	out      *segment
	// swapNamed says the out files were renamed from .cleaned to .swap.
	swapNamed bool
	waiting   bool
	buf       []byte
	// tombstoneHorizonMs is the earliest delete horizon of a batch copied
	// with tombstones so far.
	tombstoneHorizonMs int64
	// tombstonesDue says the pass began with tombstones past their delete
	// horizon: it rewrites the clean section even if nothing is dirty.
	tombstonesDue bool
}

// CleanerPoint is the cleaner point: every key appears at most once below it.
func (l *Log) CleanerPoint() int64 { return l.clean.point }

// Cleaning reports whether a cleaning pass is under way.
func (l *Log) Cleaning() bool { return l.clean.pass != nil }

// DirtyRatio reports the share of the log's cleanable bytes that is dirty
// and whether the log is due for cleaning now: it is compacted, has a dirty
// section below highWatermark, and its ratio reaches
// min.cleanable.dirty.ratio or its first dirty segment is older than
// max.compaction.lag.ms.
func (l *Log) DirtyRatio(nowMs, highWatermark int64) (ratio float64, due bool) {
	if !l.cfg.Compaction.Compact || l.failed != nil {
		return 0, false
	}
	firstDirty, dirtyEnd := l.dirtyRange(nowMs, highWatermark)
	tombstonesExpired := nowMs >= l.clean.tombstoneHorizonMs && firstDirty > l.logStartOffset
	if dirtyEnd <= firstDirty {
		return 0, tombstonesExpired
	}
	var cleanBytes, dirtyBytes int64
	oldestDirtyMs := int64(math.MaxInt64)
	for _, s := range l.segments {
		switch {
		case s.nextOffset <= firstDirty:
			cleanBytes += s.bytes
		case s.baseOffset < dirtyEnd:
			dirtyBytes += s.bytes
			if s.firstBatchTimestamp >= 0 {
				oldestDirtyMs = min(oldestDirtyMs, s.firstBatchTimestamp)
			}
		}
	}
	if dirtyBytes == 0 {
		return 0, tombstonesExpired
	}
	ratio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	lagged := oldestDirtyMs != math.MaxInt64 && nowMs-oldestDirtyMs > l.cfg.Compaction.MaxCompactionLagMs
	return ratio, ratio >= l.cfg.Compaction.MinCleanableDirtyRatio || lagged || tombstonesExpired
}

// dirtyRange is [first dirty offset, first uncleanable offset): never the
// active segment, nothing at or above the high watermark, and no segment
// younger than min.compaction.lag.ms.
func (l *Log) dirtyRange(nowMs, highWatermark int64) (firstDirty, dirtyEnd int64) {
	firstDirty = max(l.clean.point, l.logStartOffset)
	dirtyEnd = min(l.active().baseOffset, highWatermark)
	if lag := l.cfg.Compaction.MinCompactionLagMs; lag > 0 {
		for _, s := range l.segments[l.segmentFor(firstDirty):] {
			if s.baseOffset >= dirtyEnd {
				break
			}
			if s.maxTimestamp > nowMs-lag {
				dirtyEnd = s.baseOffset
				break
			}
		}
	}
	return firstDirty, dirtyEnd
}

// CleanStep does a bounded amount of cleaning: it starts a pass if the log
// is due (DirtyRatio), or continues the pass under way, reading at most
// limits.StepBytesMax batch bytes. The broker calls it on a timer with the
// wall clock and the partition's high watermark (Manager.CleanStep picks the
// log). Disk completions move a waiting pass on; the next call continues.
func (l *Log) CleanStep(nowMs, highWatermark int64, limits CleanLimits) (CleanStatus, error) {
	if l.failed != nil {
		return CleanIdle, l.failed
	}
	if limits.StepBytesMax < 1 || limits.KeysMax < 1 || limits.KeyBytesMax < 1 {
		return CleanIdle, fmt.Errorf("clean %s: limits %+v must all be positive", l.dir, limits)
	}
	p := l.clean.pass
	if p == nil {
		if _, due := l.DirtyRatio(nowMs, highWatermark); !due {
			return CleanIdle, nil
		}
		p = l.startPass(nowMs, highWatermark, limits)
	}
	for budget := p.limits.StepBytesMax; budget > 0; {
		if p.waiting {
			return CleanWaiting, nil
		}
		var used int64
		var err error
		switch p.phase {
		case phaseMap:
			used, err = l.mapStep(p)
		case phaseCopy:
			used, err = l.copyStep(p, nowMs)
		case phaseFinished:
			l.clean.point = max(l.clean.point, p.endOffset)
			l.clean.tombstoneHorizonMs = p.tombstoneHorizonMs
			l.clean.pass = nil
			return CleanPassDone, nil
		}
		if err != nil {
			l.abortCleaning()
			return CleanIdle, l.fail(err)
		}
		budget -= used
	}
	if p.waiting {
		return CleanWaiting, nil
	}
	return CleanWorking, nil
}

func (l *Log) startPass(nowMs, highWatermark int64, limits CleanLimits) *cleanPass {
	firstDirty, dirtyEnd := l.dirtyRange(nowMs, highWatermark)
	p := &cleanPass{
		limits: limits, firstDirty: firstDirty, dirtyEnd: dirtyEnd, endOffset: firstDirty,
		keys: map[string]int64{}, mapSegment: l.segmentFor(firstDirty), mapPosition: -1,
		buf: make([]byte, scratchBytes), tombstoneHorizonMs: math.MaxInt64,
		tombstonesDue: nowMs >= l.clean.tombstoneHorizonMs,
	}
	l.clean.pass = p
	return p
}

// mapStep maps one batch of the dirty section, or ends the map phase.
func (l *Log) mapStep(p *cleanPass) (int64, error) {
	if p.mapSegment >= len(l.segments)-1 {
		return 0, l.endMapPhase(p)
	}
	s := l.segments[p.mapSegment]
	if p.mapPosition < 0 {
		at, found, err := s.findBatch(p.endOffset, l.scratch)
		if err != nil {
			return 0, err
		}
		if !found {
			p.mapSegment, p.mapPosition = p.mapSegment+1, -1
			return 0, nil
		}
		p.mapPosition = at.position
	}
	if p.mapPosition >= s.bytes {
		p.mapSegment, p.mapPosition = p.mapSegment+1, 0
		return 0, nil
	}
	h, b, err := l.readStored(p, s, p.mapPosition)
	if err != nil {
		return 0, err
	}
	if h.LastOffset() >= p.dirtyEnd {
		return h.TotalBytes(), l.endMapPhase(p)
	}
	fits, err := p.mapBatch(b, h)
	if err != nil {
		return 0, fmt.Errorf("clean %s: batch at %d: %w", l.dir, h.BaseOffset, err)
	}
	if !fits {
		return h.TotalBytes(), l.endMapPhase(p)
	}
	p.endOffset = h.NextOffset()
	p.mapPosition += h.TotalBytes()
	return h.TotalBytes(), nil
}

// readStored reads and verifies the stored batch at position of s. The
// bytes alias p.buf until the next read.
func (l *Log) readStored(p *cleanPass, s *segment, position int64) (batch.Header, []byte, error) {
	h, buf, err := readVerified(s.log, position, s.bytes, p.buf)
	p.buf = buf
	if err != nil {
		return h, nil, fmt.Errorf("clean %s: segment %d: %w", l.dir, s.baseOffset, err)
	}
	return h, buf[:h.TotalBytes()], nil
}

// mapBatch adds the batch's keys to the map, unless the map cannot hold
// them (a batch always fits an empty map, so that every pass progresses).
func (p *cleanPass) mapBatch(b []byte, h batch.Header) (bool, error) {
	if h.IsControl() || h.RecordCount == 0 {
		return true, nil
	}
	records, err := storedRecords(b, h)
	if err != nil {
		return false, err
	}
	newKeys, newBytes := 0, int64(0)
	for i := range records {
		if _, ok := p.keys[string(records[i].key)]; !ok && !records[i].keyIsNull {
			newKeys++
			newBytes += int64(len(records[i].key))
		}
	}
	if len(p.keys) > 0 && (len(p.keys)+newKeys > p.limits.KeysMax || p.keyBytes+newBytes > p.limits.KeyBytesMax) {
		return false, nil
	}
	for i := range records {
		r := &records[i]
		if r.keyIsNull {
			continue
		}
		if _, ok := p.keys[string(r.key)]; !ok {
			p.keyBytes += int64(len(r.key))
		}
		p.keys[string(r.key)] = h.BaseOffset + int64(r.offsetDelta)
	}
	return true, nil
}

// storedRecords decompresses and parses a stored batch's records.
func storedRecords(b []byte, h batch.Header) ([]storedRecord, error) {
	raw, err := batch.Decompress(h.Codec(), b[batch.HeaderBytes:], cleanerRecordsBytesMax)
	if err != nil {
		return nil, err
	}
	return parseStoredRecords(raw, h.RecordCount)
}

// endMapPhase plans the copy: groups of the segments from the first up to
// the end offset. A pass that mapped nothing finishes at once.
func (l *Log) endMapPhase(p *cleanPass) error {
	p.phase, p.buf = phaseCopy, p.buf[:cap(p.buf)]
	if p.endOffset <= p.firstDirty && !(p.tombstonesDue && p.firstDirty > l.logStartOffset) {
		p.phase = phaseFinished
		return nil
	}
	// With nothing dirty mapped, the pass still rewrites the clean section:
	// it was started for tombstones past their delete horizon.
	var group []*segment
	var groupBytes, indexBytes, timeIndexBytes int64
	for _, s := range l.segments {
		if s.baseOffset >= p.endOffset {
			break
		}
		if len(group) > 0 && (groupBytes+s.bytes > l.cfg.SegmentBytes ||
			indexBytes+s.index.entries*offsetIndexEntryBytes > l.cfg.SegmentIndexBytes ||
			timeIndexBytes+s.timeIndex.entries*timeIndexEntryBytes > l.cfg.SegmentIndexBytes ||
			s.nextOffset-1-group[0].baseOffset > math.MaxInt32) {
			p.groups = append(p.groups, group)
			group, groupBytes, indexBytes, timeIndexBytes = nil, 0, 0, 0
		}
		group = append(group, s)
		groupBytes += s.bytes
		indexBytes += s.index.entries * offsetIndexEntryBytes
		timeIndexBytes += s.timeIndex.entries * timeIndexEntryBytes
	}
	p.groups = append(p.groups, group)
	return nil
}

// copyStep copies one batch of the current group into the cleaned segment,
// or, once the group is copied, starts its swap.
func (l *Log) copyStep(p *cleanPass, nowMs int64) (int64, error) {
	group := p.groups[p.group]
	if p.out == nil {
		out, err := createCleanedSegment(l, group[0].baseOffset, nowMs)
		if err != nil {
			return 0, err
		}
		out.createdMs = group[0].createdMs
		p.out, p.source, p.position, p.swapNamed = out, 0, 0, false
	}
	if p.position >= group[p.source].bytes {
		p.source, p.position = p.source+1, 0
		if p.source == len(group) {
			return 0, l.startSwap(p)
		}
		return 0, nil
	}
	h, b, err := l.readStored(p, group[p.source], p.position)
	if err != nil {
		return 0, err
	}
	cleaned, err := p.cleanBatch(b, h, nowMs, l.cfg.Compaction.DeleteRetentionMs)
	if err != nil {
		return 0, fmt.Errorf("clean %s: batch at %d: %w", l.dir, h.BaseOffset, err)
	}
	cleanedHeader, err := batch.ParseHeader(cleaned)
	if err != nil {
		panic(fmt.Sprintf("log: cleaned batch header did not parse: %v", err))
	}
	if p.out.bytes+int64(len(cleaned)) > positionMax {
		return 0, fmt.Errorf("clean %s: cleaned segment %d would exceed %d bytes", l.dir, p.out.baseOffset, int64(positionMax))
	}
	if err := p.out.append(cleaned, cleanedHeader); err != nil {
		return 0, err
	}
	p.position += h.TotalBytes()
	return h.TotalBytes(), nil
}

// cleanBatch returns the batch as the cleaner leaves it: a new slice, the
// original bytes copied when nothing changes.
func (p *cleanPass) cleanBatch(b []byte, h batch.Header, nowMs, deleteRetentionMs int64) ([]byte, error) {
	if h.IsControl() || h.RecordCount == 0 || h.BaseOffset >= p.endOffset {
		return append([]byte(nil), b...), nil
	}
	records, err := storedRecords(b, h)
	if err != nil {
		return nil, err
	}
	hasHorizon := h.Attributes&attrDeleteHorizon != 0
	horizonPassed := hasHorizon && nowMs >= h.FirstTimestamp
	kept := make([]*storedRecord, 0, len(records))
	keptTombstone := false
	for i := range records {
		r := &records[i]
		if !r.keyIsNull {
			if latest, ok := p.keys[string(r.key)]; ok && latest > h.BaseOffset+int64(r.offsetDelta) {
				continue
			}
			if r.valueIsNull && horizonPassed {
				continue
			}
			keptTombstone = keptTombstone || r.valueIsNull
		}
		kept = append(kept, r)
	}
	stamp := keptTombstone && !hasHorizon
	horizon := h.FirstTimestamp
	if stamp {
		horizon = nowMs + min(deleteRetentionMs, math.MaxInt64-nowMs)
	}
	if keptTombstone {
		p.tombstoneHorizonMs = min(p.tombstoneHorizonMs, horizon)
	}
	if len(kept) == len(records) && !stamp {
		return append([]byte(nil), b...), nil
	}
	attributes, firstTimestamp := h.Attributes, h.FirstTimestamp
	if stamp {
		attributes |= attrDeleteHorizon
		firstTimestamp = horizon
	}
	var raw []byte
	for _, r := range kept {
		if firstTimestamp == h.FirstTimestamp {
			raw = append(raw, r.raw...)
		} else {
			raw = r.appendWithTimestampDelta(raw, h.FirstTimestamp+r.timestampDelta-firstTimestamp)
		}
	}
	return rebuildBatch(h, attributes, firstTimestamp, int32(len(kept)), raw)
}
