package log

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"strand/core/env"
	"strand/core/log/checkpoint"
)

// OpenOptions carries what the log directory's checkpoints say about a log.
type OpenOptions struct {
	// RecoveryPoint is from recovery-point-offset-checkpoint (0 if absent):
	// batches below it were synced and are trusted.
	RecoveryPoint int64
	// LogStartOffset is from log-start-offset-checkpoint (0 if absent).
	LogStartOffset int64
	// NowMs is the wall clock, for the segments' creation time.
	NowMs int64
	// CleanerOffset is from cleaner-offset-checkpoint (0 if absent): the
	// cleaner point of a compacted log.
	CleanerOffset int64
	// Scratch, if set, is a buffer of at least scratchBytes (NewScratch)
	// the log reads headers and recovers batches into, shared with the
	// other logs of one owner that calls them one at a time (a Manager):
	// 64 KiB a log would be most of a partition's memory, 200 MiB for
	// 3,000 partitions. Nil gives the log a buffer of its own.
	Scratch []byte
}

// NewScratch returns a buffer for OpenOptions.Scratch.
func NewScratch() []byte { return make([]byte, scratchBytes) }

// Open loads the log in dir, creating an empty one if dir holds none, and
// recovers it after a crash:
//   - leftover checkpoint temp files are removed, and index files without
//     a .log;
//   - segments wholly below the recovery point are trusted; their indexes
//     are checked and rebuilt if inconsistent;
//   - from the segment holding the recovery point on, every batch is
//     verified (batch.Verify, contiguous offsets); the log is truncated at
//     the first failure, later segments deleted, and the indexes rebuilt;
//   - the epoch cache is rebuilt from the verified batches' epochs.
func Open(disk env.Disk, dir string, cfg Config, opts OpenOptions) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := disk.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if err := checkpoint.RemoveTemps(disk, dir); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	epochs, err := loadEpochCache(disk, dir)
	if errors.Is(err, errBadEpochCheckpoint) {
		// Rebuild the cache from every batch's epoch: verify from the start.
		epochs, _ = NewEpochCache(nil)
		opts.RecoveryPoint = 0
	} else if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l := &Log{
		disk: disk, dir: dir, cfg: cfg, epochs: epochs,
		epochWriter: checkpoint.NewWriter(disk, dir, EpochCheckpointName),
		scratch:     opts.Scratch,
	}
	if len(l.scratch) < scratchBytes {
		l.scratch = NewScratch()
	}
	l.epochVersionWritten = epochs.version
	if err := l.loadSegments(opts); err != nil {
		return nil, errors.Join(fmt.Errorf("open log %s: %w", dir, err), l.Close())
	}
	l.flush.lastFlushMs = opts.NowMs
	// A process crash keeps directory entries that were never synced (a
	// segment created by a roll whose flush did not finish): the first
	// flush syncs the log's directory, and its parent, whatever it finds.
	l.flush.dirDirty, l.flush.parentDirty = true, true
	l.checkInvariants()
	l.persistEpochs(nil)
	return l, nil
}

func loadEpochCache(disk env.Disk, dir string) (*EpochCache, error) {
	data, err := checkpoint.ReadFile(disk, joinPath(dir, EpochCheckpointName))
	if errors.Is(err, env.ErrNotExist) {
		return NewEpochCache(nil)
	}
	if err != nil {
		return nil, err
	}
	entries, err := checkpoint.ParseEpochs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", EpochCheckpointName, errBadEpochCheckpoint, err)
	}
	cache, err := NewEpochCache(entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", EpochCheckpointName, errBadEpochCheckpoint, err)
	}
	return cache, nil
}

// errBadEpochCheckpoint marks a leader-epoch-checkpoint that does not parse
// or breaks the cache's ordering. Its writes are atomic, so only corruption
// makes one; Open then rebuilds the cache from the batches.
var errBadEpochCheckpoint = errors.New("corrupt leader epoch checkpoint")

// loadSegments opens, checks and recovers every segment, then settles the
// log start offset, recovery point and epoch cache.
func (l *Log) loadSegments(opts OpenOptions) error {
	if err := l.completeSwaps(); err != nil {
		return err
	}
	bases, present, err := l.listSegments()
	if err != nil {
		return err
	}
	if err := l.openAll(bases, present, opts.NowMs); err != nil {
		return err
	}
	if err := l.dropBelowStart(opts.LogStartOffset); err != nil {
		return err
	}
	recoverFrom := l.loadTrusted(opts.RecoveryPoint)
	if recoverFrom < len(l.segments) {
		l.epochs.truncateFromEnd(l.segments[recoverFrom].baseOffset)
		if err := l.recoverFrom(recoverFrom); err != nil {
			return err
		}
	}
	if len(l.segments) == 0 {
		if err := l.startAt(max(opts.LogStartOffset, 0), opts.NowMs); err != nil {
			return err
		}
	}
	l.logStartOffset = max(opts.LogStartOffset, l.segments[0].baseOffset)
	if l.logStartOffset > l.LogEndOffset() {
		// The checkpoint is ahead of the data (e.g. a follower restarted
		// from the leader's log start): start empty there, as Kafka does.
		if err := l.removeSegments(0); err != nil {
			return err
		}
		if err := l.startAt(l.logStartOffset, opts.NowMs); err != nil {
			return err
		}
	}
	// Never above the checkpoint, even when the log now starts above it
	// (segments dropped below the log start offset, or the log restarted
	// empty there): those removals and creations are not durable until a
	// flush has synced the directory, and a crash before it brings back
	// what was removed, which loadSyncedActive would then trust. As in
	// TruncateFullyAndStartAt, the next flush raises it.
	l.recoveryPoint = min(opts.RecoveryPoint, l.LogEndOffset())
	l.epochs.truncateFromEnd(l.LogEndOffset())
	l.epochs.truncateFromStart(l.logStartOffset)
	l.clean = newCleanerState(opts.CleanerOffset)
	if l.clean.point < l.logStartOffset || l.clean.point > l.LogEndOffset() {
		l.clean.point = l.logStartOffset // as Kafka resets an out-of-range checkpoint
	}
	if l.LogEndOffset() == l.logStartOffset {
		// No batch implies any epoch. An entry left here can only come
		// from a checkpoint whose clearing (TruncateFullyAndStartAt) a
		// crash undid.
		l.epochs.truncateFromEnd(0)
	}
	return nil
}

// dropBelowStart deletes, unread, the segments wholly below the log start
// offset: retention deleted them, but a crash undid the unsynced deletion.
func (l *Log) dropBelowStart(logStartOffset int64) error {
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].baseOffset <= logStartOffset {
		n++
	}
	var err error
	for _, s := range l.segments[:n] {
		err = errors.Join(err, s.remove(l.disk))
	}
	l.segments = l.segments[n:]
	if n > 0 {
		l.flush.dirDirty = true
	}
	return err
}

// listSegments returns the base offsets of the .log files in dir, sorted,
// and the names present; it removes index files that have no .log.
func (l *Log) listSegments() ([]int64, map[string]bool, error) {
	names, err := l.disk.List(l.dir)
	if err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	logs := map[int64]bool{}
	var bases []int64
	var orphans []string
	for _, name := range names {
		present[name] = true
		base, suffix, ok := parseSegmentFileName(name)
		if ok && suffix == logSuffix {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	for _, name := range names {
		base, suffix, ok := parseSegmentFileName(name)
		if ok && suffix != logSuffix && !logs[base] {
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		if err := l.disk.Remove(joinPath(l.dir, name)); err != nil {
			return nil, nil, fmt.Errorf("remove orphan index %s: %w", name, err)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, present, nil
}

// parseSegmentFileName splits "<20 digits><suffix>" for the three suffixes.
func parseSegmentFileName(name string) (baseOffset int64, suffix string, ok bool) {
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		digits, found := strings.CutSuffix(name, suffix)
		if !found || len(digits) != 20 {
			continue
		}
		base, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || base < 0 {
			return 0, "", false
		}
		return base, suffix, true
	}
	return 0, "", false
}

// openAll opens the segments' files, noting those whose index files were
// missing (and are created empty): they are rebuilt.
func (l *Log) openAll(bases []int64, present map[string]bool, nowMs int64) error {
	for _, base := range bases {
		s, err := openSegmentFiles(l.disk, l.dir, base, l.cfg, false)
		if err != nil {
			return fmt.Errorf("open segment %d: %w", base, err)
		}
		s.createdMs = nowMs
		s.indexesMissing = !present[segmentFileName(base, indexSuffix)] || !present[segmentFileName(base, timeIndexSuffix)]
		l.segments = append(l.segments, s)
	}
	return nil
}

// startAt makes the log a single empty segment at offset.
func (l *Log) startAt(offset int64, nowMs int64) error {
	s, err := createSegment(l.disk, l.dir, offset, l.cfg, nowMs)
	if err != nil {
		return err
	}
	l.segments = append(l.segments, s)
	l.flush.dirDirty = true
	return nil
}

// removeSegments deletes segments[from:] and their files.
func (l *Log) removeSegments(from int) error {
	l.abortCleaning()
	var err error
	for _, s := range l.segments[from:] {
		err = errors.Join(err, s.remove(l.disk))
	}
	l.segments = l.segments[:from]
	l.flush.dirDirty = true
	return err
}
