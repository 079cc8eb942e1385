package log

import (
	"errors"
	"fmt"
	"strings"

	"strand/core/env"
)

// File name suffixes of the cleaner, as Kafka names them: a cleaned segment
// is written as <base>.log.cleaned (and .index.cleaned, .timeindex.cleaned),
// renamed to .swap once durable, and to the segment's names at the end.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// segmentSuffixes are the three files of a segment, the .log last: the swap
// renames it last, so that a .log.swap on disk means the swap is not done.
var segmentSuffixes = []string{indexSuffix, timeIndexSuffix, logSuffix}

// createCleanedSegment creates the empty .cleaned files of a segment at
// baseOffset, emptying any left by an abandoned pass.
func createCleanedSegment(l *Log, baseOffset, nowMs int64) (*segment, error) {
	opened := make([]env.File, 0, len(segmentSuffixes))
	for _, suffix := range segmentSuffixes {
		opts := env.OpenOptions{Create: true}
		if suffix != logSuffix {
			opts.MappedBytesMax = l.cfg.SegmentIndexBytes
		}
		f, err := l.disk.Open(joinPath(l.dir, segmentFileName(baseOffset, suffix)+cleanedSuffix), opts)
		if err == nil && f.Size() > 0 {
			err = f.Truncate(0)
		}
		if err != nil {
			for _, g := range opened {
				err = errors.Join(err, g.Close())
			}
			return nil, fmt.Errorf("create cleaned segment %d: %w", baseOffset, err)
		}
		opened = append(opened, f)
	}
	l.flush.dirDirty = true
	return &segment{
		baseOffset: baseOffset, nextOffset: baseOffset, log: opened[2],
		index:                newOffsetIndex(opened[0], baseOffset, l.cfg.SegmentIndexBytes),
		timeIndex:            newTimeIndex(opened[1], baseOffset, l.cfg.SegmentIndexBytes),
		maxTimestamp:         noTimestamp,
		offsetOfMaxTimestamp: baseOffset,
		firstBatchTimestamp:  noTimestamp,
		createdMs:            nowMs,
		indexIntervalBytes:   l.cfg.IndexIntervalBytes,
	}, nil
}

// completion counts n completions and calls done once with the first error.
func completion(n int, done func(error)) func(error) {
	var first error
	return func(err error) {
		if err != nil && first == nil {
			first = err
		}
		n--
		if n == 0 {
			done(first)
		}
		if n < 0 {
			panic("log: more completions than expected")
		}
	}
}

// startSwap finishes the cleaned segment and syncs its files; the swap goes
// on in the completions.
func (l *Log) startSwap(p *cleanPass) error {
	if err := p.out.becomeInactive(); err != nil {
		return err
	}
	p.waiting = true
	files := p.out.files()
	synced := completion(len(files), func(err error) { l.swapCleanedSynced(p, err) })
	for _, f := range files {
		f.Sync(synced)
	}
	return nil
}

// swapCleanedSynced renames the durable .cleaned files to .swap, the index
// files first, and syncs the directory.
func (l *Log) swapCleanedSynced(p *cleanPass, err error) {
	if l.clean.pass != p {
		return // aborted or abandoned meanwhile
	}
	if err == nil {
		for _, suffix := range segmentSuffixes {
			name := joinPath(l.dir, segmentFileName(p.out.baseOffset, suffix))
			if err = l.disk.Rename(name+cleanedSuffix, name+swapSuffix); err != nil {
				break
			}
			p.swapNamed = true
		}
	}
	if err != nil {
		l.abortCleaning()
		_ = l.fail(fmt.Errorf("clean %s: %w", l.dir, err))
		return
	}
	l.disk.SyncDir(l.dir, func(err error) { l.swapRenamedSynced(p, err) })
}

// swapRenamedSynced replaces the group's segments by the cleaned one: the
// later segments' files go, the .swap files take the first one's names, the
// .log last; then the directory is synced.
func (l *Log) swapRenamedSynced(p *cleanPass, err error) {
	if l.clean.pass != p {
		return
	}
	if err == nil {
		err = l.replaceGroup(p)
	}
	if err != nil {
		l.abortCleaning()
		_ = l.fail(fmt.Errorf("clean %s: %w", l.dir, err))
		return
	}
	l.disk.SyncDir(l.dir, func(err error) {
		if l.clean.pass != p {
			return
		}
		if err != nil {
			l.clean.pass = nil
			_ = l.fail(fmt.Errorf("clean %s: %w", l.dir, err))
			return
		}
		p.group, p.out, p.waiting = p.group+1, nil, false
		if p.group == len(p.groups) {
			p.phase = phaseFinished
		}
	})
}

// replaceGroup swaps the cleaned segment in, on disk and in l.segments.
func (l *Log) replaceGroup(p *cleanPass) error {
	group := p.groups[p.group]
	first := l.segmentFor(group[0].baseOffset)
	for i, s := range group {
		if first+i >= len(l.segments) || l.segments[first+i] != s {
			panic(fmt.Sprintf("log %s: cleaner group at %d no longer in the log", l.dir, group[0].baseOffset))
		}
	}
	var err error
	for _, s := range group[1:] {
		err = errors.Join(err, s.remove(l.disk))
	}
	err = errors.Join(err, group[0].close(), p.out.close())
	for _, suffix := range segmentSuffixes {
		name := joinPath(l.dir, segmentFileName(p.out.baseOffset, suffix))
		err = errors.Join(err, l.disk.Rename(name+swapSuffix, name))
	}
	l.flush.dirDirty = true
	if err != nil {
		return err
	}
	s, err := openSegmentFiles(l.disk, l.dir, p.out.baseOffset, l.cfg, false)
	if err != nil {
		return err
	}
	s.createdMs = group[0].createdMs
	if loadErr := l.loadTrustedSegment(s); loadErr != nil {
		if err := l.rebuildIndexes(s); err != nil {
			return err
		}
	}
	last := group[len(group)-1]
	if s.nextOffset != last.nextOffset || s.bytes != p.out.bytes {
		panic(fmt.Sprintf("log %s: cleaned segment %d ends at %d (%d bytes), want %d (%d bytes)",
			l.dir, s.baseOffset, s.nextOffset, s.bytes, last.nextOffset, p.out.bytes))
	}
	l.segments = append(l.segments[:first], append([]*segment{s}, l.segments[first+len(group):]...)...)
	l.checkInvariants()
	return nil
}

// abortCleaning drops the pass under way and deletes its .cleaned or .swap
// files, before a truncation or deletion changes the segments it read.
func (l *Log) abortCleaning() {
	p := l.clean.pass
	if p == nil {
		return
	}
	l.clean.pass = nil
	if p.out == nil {
		return
	}
	_ = p.out.close()
	for _, suffix := range segmentSuffixes {
		name := joinPath(l.dir, segmentFileName(p.out.baseOffset, suffix))
		for _, tail := range []string{cleanedSuffix, swapSuffix} {
			if err := l.disk.Remove(name + tail); err != nil && !errors.Is(err, env.ErrNotExist) {
				_ = l.fail(fmt.Errorf("abort cleaning of %s: %w", l.dir, err))
			}
		}
	}
	l.flush.dirDirty = true
}

// abandonCleaning forgets the pass without touching its files, on Close: the
// next Open deletes .cleaned files and completes .swap ones.
func (l *Log) abandonCleaning() {
	if p := l.clean.pass; p != nil && p.out != nil {
		_ = p.out.close()
	}
	l.clean.pass = nil
}

// completeSwaps finishes at Open what a crash interrupted, as Kafka's log
// loading does: .cleaned files are deleted; a <base>.log.swap (durable
// before it was named so) replaces the segments it covers, its indexes too
// if their .swap survived (else they are rebuilt); other .swap files are
// deleted.
func (l *Log) completeSwaps() error {
	names, err := l.disk.List(l.dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var swaps []int64
	for _, name := range names {
		present[name] = true
		if digits, ok := strings.CutSuffix(name, logSuffix+swapSuffix); ok {
			if base, _, ok := parseSegmentFileName(digits + logSuffix); ok {
				swaps = append(swaps, base)
			}
		}
	}
	for _, base := range swaps { // sorted: List sorts names
		if err := l.completeSwap(base, names, present); err != nil {
			return fmt.Errorf("complete swap of segment %d: %w", base, err)
		}
	}
	names, err = l.disk.List(l.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix) {
			if err := l.disk.Remove(joinPath(l.dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Log) completeSwap(base int64, names []string, present map[string]bool) error {
	swapName := segmentFileName(base, logSuffix) + swapSuffix
	f, err := l.disk.Open(joinPath(l.dir, swapName), env.OpenOptions{})
	if err != nil {
		return err
	}
	end := base
	probe := &segment{baseOffset: base, bytes: f.Size(), log: f}
	walkErr := probe.walkHeaders(0, l.scratch, func(b batchAt) bool {
		end = b.header.NextOffset()
		return true
	})
	if err := errors.Join(walkErr, f.Close()); err != nil {
		return err
	}
	for _, name := range names {
		other, _, ok := parseSegmentFileName(name)
		if ok && other > base && other < end && present[name] {
			if err := l.disk.Remove(joinPath(l.dir, name)); err != nil {
				return err
			}
			present[name] = false
		}
	}
	for _, suffix := range segmentSuffixes {
		name := segmentFileName(base, suffix)
		switch {
		case present[name+swapSuffix]:
			if err := l.disk.Rename(joinPath(l.dir, name+swapSuffix), joinPath(l.dir, name)); err != nil {
				return err
			}
		case present[name]:
			// The old segment's index: it describes other bytes.
			if err := l.disk.Remove(joinPath(l.dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}
