package producer

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"strand/core/env"
	"strand/core/log/checkpoint"
)

// SnapshotSuffix ends a producer state snapshot's file name.
const SnapshotSuffix = ".snapshot"

// SnapshotFileName is the name of the snapshot covering the log below
// offset, as Kafka names it: 20 digits, then .snapshot.
func SnapshotFileName(offset int64) string { return fmt.Sprintf("%020d%s", offset, SnapshotSuffix) }

// parseSnapshotFileName is SnapshotFileName's inverse.
func parseSnapshotFileName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	offset, err := strconv.ParseInt(digits, 10, 64)
	return offset, err == nil && offset >= 0
}

// Snapshots manages the .snapshot files of one partition directory. Like the
// Log it runs on the event loop. Each file is written atomically by a
// checkpoint.Writer (<name>.tmp, Sync, rename, SyncDir), so a crash leaves
// either no file or a whole one; a file that rots later fails its CRC and
// Load skips it.
type Snapshots struct {
	disk env.Disk
	dir  string
	// offsets are the snapshots present or being written, ascending.
	offsets []int64
	// writers are the writers of files written since open, by offset.
	writers map[int64]*checkpoint.Writer
	// abandoned are writers of deleted files whose write may still be in
	// flight: no new write of the same file starts until they are idle,
	// since both would use the same temp file.
	abandoned map[int64]*checkpoint.Writer
}

// OpenSnapshots lists the snapshots in dir, after removing the temp files of
// snapshot writes a crash interrupted (and only those: other writers of the
// directory may be in flight).
func OpenSnapshots(disk env.Disk, dir string) (*Snapshots, error) {
	names, err := disk.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list producer snapshots in %s: %w", dir, err)
	}
	s := &Snapshots{disk: disk, dir: dir, writers: map[int64]*checkpoint.Writer{}, abandoned: map[int64]*checkpoint.Writer{}}
	for _, name := range names {
		if strings.HasSuffix(name, SnapshotSuffix+checkpoint.TempSuffix) {
			if err := disk.Remove(s.path(name)); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", s.path(name), err)
			}
			continue
		}
		if offset, ok := parseSnapshotFileName(name); ok {
			s.offsets = append(s.offsets, offset)
		}
	}
	sort.Slice(s.offsets, func(i, j int) bool { return s.offsets[i] < s.offsets[j] })
	return s, nil
}

func (s *Snapshots) path(name string) string {
	if s.dir == "" || s.dir == "." {
		return name
	}
	return s.dir + "/" + name
}

// Offsets lists the snapshots present or being written, ascending.
func (s *Snapshots) Offsets() []int64 { return append([]int64(nil), s.offsets...) }

// Take writes a snapshot of state at state.MapEndOffset(), as Kafka does on
// a segment roll and on clean shutdown. done (optional) runs once it is
// durable, or with the error that stopped it. A write of the same offset
// still in flight from before a deletion makes Take skip this snapshot:
// done(nil) at once, the snapshot being only an optimisation.
func (s *Snapshots) Take(state *State, done func(error)) {
	s.pruneIdle()
	offset := state.MapEndOffset()
	if _, busy := s.abandoned[offset]; busy {
		if done != nil {
			done(nil)
		}
		return
	}
	w, ok := s.writers[offset]
	if !ok {
		w = checkpoint.NewWriter(s.disk, s.dir, SnapshotFileName(offset))
		s.writers[offset] = w
	}
	i := sort.Search(len(s.offsets), func(i int) bool { return s.offsets[i] >= offset })
	if i == len(s.offsets) || s.offsets[i] != offset {
		s.offsets = append(s.offsets[:i], append([]int64{offset}, s.offsets[i:]...)...)
	}
	w.Write(encodeSnapshot(state.Entries()), done)
}

// pruneIdle forgets writers with nothing in flight. It runs outside writer
// callbacks, where Idle is exact.
func (s *Snapshots) pruneIdle() {
	for offset, w := range s.writers { // order-independent: deletes only
		if w.Idle() {
			delete(s.writers, offset)
		}
	}
	for offset, w := range s.abandoned { // order-independent: deletes only
		if w.Idle() {
			delete(s.abandoned, offset)
		}
	}
}

// read returns the entries of the snapshot at offset.
func (s *Snapshots) read(offset int64) ([]Entry, error) {
	path := s.path(SnapshotFileName(offset))
	data, err := checkpoint.ReadFile(s.disk, path)
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot %s: %w", path, err)
	}
	entries, err := decodeSnapshot(data)
	if err != nil {
		return nil, fmt.Errorf("producer snapshot %s: %w", path, err)
	}
	return entries, nil
}

// DeleteBelow deletes the snapshots below logStartOffset, which describe
// batches that are gone: Load would never use them. done (optional) runs
// once the deletions are durable.
func (s *Snapshots) DeleteBelow(logStartOffset int64, done func(error)) error {
	return s.deleteWhere(func(offset int64) bool { return offset < logStartOffset }, done)
}

// DeleteAbove deletes the snapshots above logEndOffset, after a truncation:
// they describe batches that are gone. done (optional) runs once the
// deletions are durable.
func (s *Snapshots) DeleteAbove(logEndOffset int64, done func(error)) error {
	return s.deleteWhere(func(offset int64) bool { return offset > logEndOffset }, done)
}

// DeleteAll deletes every snapshot, for a log truncated fully.
func (s *Snapshots) DeleteAll(done func(error)) error {
	return s.deleteWhere(func(int64) bool { return true }, done)
}

func (s *Snapshots) deleteWhere(doomed func(offset int64) bool, done func(error)) error {
	s.pruneIdle()
	kept := s.offsets[:0]
	var errs error
	deleted := false
	for _, offset := range s.offsets {
		if !doomed(offset) {
			kept = append(kept, offset)
			continue
		}
		deleted = true
		errs = errors.Join(errs, s.delete(offset))
	}
	s.offsets = kept
	if errs != nil {
		return errs
	}
	if !deleted {
		if done != nil {
			done(nil)
		}
		return nil
	}
	s.disk.SyncDir(s.dir, func(err error) {
		if done != nil {
			done(err)
		}
	})
	return nil
}

// delete removes one snapshot file, abandoning its write if one is in flight
// so that the write's rename cannot bring the file back.
func (s *Snapshots) delete(offset int64) error {
	if w, ok := s.writers[offset]; ok {
		w.Close()
		delete(s.writers, offset)
		s.abandoned[offset] = w
	}
	path := s.path(SnapshotFileName(offset))
	if err := s.disk.Remove(path); err != nil && !errors.Is(err, env.ErrNotExist) {
		return fmt.Errorf("delete producer snapshot %s: %w", path, err)
	}
	return nil
}

// Close abandons the writes in flight, so that the directory may be opened
// again at once. Their callbacks get an error wrapping env.ErrClosed.
func (s *Snapshots) Close() {
	for _, offset := range s.sortedWriterOffsets() {
		s.writers[offset].Close()
	}
}

func (s *Snapshots) sortedWriterOffsets() []int64 {
	offsets := make([]int64, 0, len(s.writers))
	for offset := range s.writers { // order-independent: sorted below
		offsets = append(offsets, offset)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	return offsets
}
