package quorum

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strings"

	"strand/core/env"
)

// Storage keeps a voter's durable state on an env.Disk, in one directory
// (the metadata partition's, __cluster_metadata-0):
//
//	quorum-state                              hard state, JSON as Kafka's (epoch, voted id)
//	quorum.log                                entries after the latest snapshot
//	<endOffset:%020d>-<epoch:%010d>.checkpoint snapshots, Kafka's naming
//
// Persist performs a Ready's writes and calls done once all are durable:
// the driver sends the Ready's messages only then. Files are replaced by
// write, Sync, Rename, SyncDir, so a crash leaves the old or the new one;
// quorum.log is append-only with a CRC per entry, and recovery cuts it at
// the first entry that does not check.
//
// The entry log here is the quorum's own file: when the controller adopts
// the quorum, entries belong in core/log's segments instead (see the
// package doc, "Not here (yet)").
type Storage struct {
	disk env.Disk
	dir  string
	log  env.File
	// logBase is the offset of the first entry in quorum.log; positions[i]
	// is the file position of entry logBase+i, positions[len] the end.
	logBase   int64
	positions []int64
	// persisting is set while a Persist runs: they do not overlap.
	persisting bool
	// dirDurable: the entries leading to dir have been synced (MkdirAll
	// may have created them; a new directory survives a crash only once its
	// parent is synced).
	dirDurable bool
	failed     error
}

// Recovered is what OpenStorage found: the arguments of New.
type Recovered struct {
	Hard     HardState
	Snapshot *Snapshot
	Entries  []Entry
}

const (
	stateFile      = "quorum-state"
	logFile        = "quorum.log"
	checkpointExt  = ".checkpoint"
	partialExt     = ".part"
	entryHeadBytes = 8 // body length, CRC-32C of the body
	entryBodyFixed = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// quorumState is the quorum-state file, with Kafka's field names.
type quorumState struct {
	LeaderEpoch int32 `json:"leaderEpoch"`
	VotedID     int32 `json:"votedId"`
	DataVersion int   `json:"data_version"`
}

// OpenStorage recovers dir (creating it if needed): the hard state, the
// latest intact snapshot and the intact entries after it. Leftover partial
// files of an interrupted write are removed.
func OpenStorage(disk env.Disk, dir string) (*Storage, Recovered, error) {
	rec := Recovered{Hard: HardState{VotedFor: -1}}
	if err := disk.MkdirAll(dir); err != nil {
		return nil, rec, fmt.Errorf("quorum storage: %w", err)
	}
	s := &Storage{disk: disk, dir: dir}
	if err := s.recoverState(&rec); err != nil {
		return nil, rec, err
	}
	if err := s.recoverSnapshot(&rec); err != nil {
		return nil, rec, err
	}
	if err := s.recoverLog(&rec); err != nil {
		return nil, rec, err
	}
	return s, rec, nil
}

func (s *Storage) path(name string) string { return path.Join(s.dir, name) }

func readAll(f env.File) ([]byte, error) {
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func (s *Storage) readFile(name string) ([]byte, error) {
	f, err := s.disk.Open(s.path(name), env.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

func (s *Storage) recoverState(rec *Recovered) error {
	b, err := s.readFile(stateFile)
	if errors.Is(err, env.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("quorum storage: read %s: %w", stateFile, err)
	}
	var st quorumState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("quorum storage: %s is corrupt: %w", stateFile, err)
	}
	if st.LeaderEpoch < 0 || st.VotedID < -1 {
		return fmt.Errorf("quorum storage: %s has leaderEpoch %d votedId %d", stateFile, st.LeaderEpoch, st.VotedID)
	}
	rec.Hard = HardState{Epoch: st.LeaderEpoch, VotedFor: st.VotedID}
	return nil
}

func checkpointName(endOffset int64, epoch int32) string {
	return fmt.Sprintf("%020d-%010d%s", endOffset, epoch, checkpointExt)
}

// recoverSnapshot loads the latest checkpoint whose CRC checks; partial
// writes are removed.
func (s *Storage) recoverSnapshot(rec *Recovered) error {
	names, err := s.disk.List(s.dir)
	if err != nil {
		return fmt.Errorf("quorum storage: %w", err)
	}
	for i := len(names) - 1; i >= 0; i-- { // sorted: the latest is last
		name := names[i]
		if strings.HasSuffix(name, partialExt) {
			if err := s.disk.Remove(s.path(name)); err != nil {
				return fmt.Errorf("quorum storage: remove %s: %w", name, err)
			}
			continue
		}
		var endOffset int64
		var epoch int32
		if _, err := fmt.Sscanf(name, "%020d-%010d.checkpoint", &endOffset, &epoch); err != nil || rec.Snapshot != nil {
			continue
		}
		b, err := s.readFile(name)
		if err != nil {
			return fmt.Errorf("quorum storage: read %s: %w", name, err)
		}
		if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
			continue // an older one may be intact
		}
		rec.Snapshot = &Snapshot{EndOffset: endOffset, Epoch: epoch, Data: b[4:]}
	}
	return nil
}

// recoverLog reads quorum.log up to the first entry that does not check,
// cuts it there, and keeps the entries after the snapshot.
func (s *Storage) recoverLog(rec *Recovered) error {
	f, err := s.disk.Open(s.path(logFile), env.OpenOptions{Create: true})
	if err != nil {
		return fmt.Errorf("quorum storage: open %s: %w", logFile, err)
	}
	s.log = f
	b, err := readAll(f)
	if err != nil {
		return fmt.Errorf("quorum storage: read %s: %w", logFile, err)
	}
	start := int64(0)
	if rec.Snapshot != nil {
		start = rec.Snapshot.EndOffset
	}
	pos := int64(0)
	var all []Entry
	var positions []int64
	for {
		e, n, ok := decodeLogEntry(b[pos:])
		if !ok || (len(all) > 0 && e.Offset != all[len(all)-1].Offset+1) {
			break
		}
		all, positions = append(all, e), append(positions, pos)
		pos += n
	}
	if pos < int64(len(b)) {
		if err := f.Truncate(pos); err != nil {
			return fmt.Errorf("quorum storage: cut %s at %d: %w", logFile, pos, err)
		}
	}
	positions = append(positions, pos)
	s.logBase = start
	if len(all) > 0 {
		s.logBase = all[0].Offset
	}
	s.positions = positions
	for _, e := range all {
		if e.Offset >= start {
			rec.Entries = append(rec.Entries, e)
		}
	}
	if len(rec.Entries) == 0 || rec.Entries[0].Offset != start {
		// Nothing after the snapshot (or a gap): the log restarts there.
		rec.Entries = nil
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("quorum storage: empty %s: %w", logFile, err)
		}
		s.logBase, s.positions = start, []int64{0}
	}
	return nil
}

func encodeLogEntry(dst []byte, e Entry) []byte {
	body := make([]byte, entryBodyFixed, entryBodyFixed+len(e.Data))
	binary.BigEndian.PutUint64(body, uint64(e.Offset))
	binary.BigEndian.PutUint32(body[8:], uint32(e.Epoch))
	dataLen := int32(len(e.Data))
	if e.Data == nil {
		dataLen = -1
	}
	binary.BigEndian.PutUint32(body[12:], uint32(dataLen))
	body = append(body, e.Data...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, castagnoli))
	return append(dst, body...)
}

func decodeLogEntry(b []byte) (Entry, int64, bool) {
	if len(b) < entryHeadBytes {
		return Entry{}, 0, false
	}
	n := int64(binary.BigEndian.Uint32(b))
	if n < entryBodyFixed || n > int64(len(b)-entryHeadBytes) {
		return Entry{}, 0, false
	}
	body := b[entryHeadBytes : entryHeadBytes+n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return Entry{}, 0, false
	}
	e := Entry{Offset: int64(binary.BigEndian.Uint64(body)), Epoch: int32(binary.BigEndian.Uint32(body[8:]))}
	dataLen := int32(binary.BigEndian.Uint32(body[12:]))
	if dataLen >= 0 {
		if int64(dataLen) != n-entryBodyFixed {
			return Entry{}, 0, false
		}
		e.Data = append([]byte{}, body[entryBodyFixed:]...)
	}
	return e, entryHeadBytes + n, true
}

// Persist makes rd's snapshot, hard state and entries durable, in that
// order of dependency (a snapshot from the leader replaces the log only once
// it is durable), then calls done on the event loop. After a failure the
// storage refuses further work: the node must stop (SPEC.md §3.4: fsync is
// never retried).
func (s *Storage) Persist(rd Ready, done func(error)) {
	if s.persisting {
		panic("quorum storage: Persist while another runs")
	}
	if s.failed != nil {
		done(s.failed)
		return
	}
	s.persisting = true
	finish := func(err error) {
		s.persisting = false
		if err != nil && s.failed == nil {
			s.failed = fmt.Errorf("quorum storage: %w", err)
		}
		done(s.failed)
	}
	s.syncParents(func(err error) {
		if err != nil {
			finish(err)
			return
		}
		s.persist(rd, finish)
	})
}

// syncParents syncs every directory above dir, once.
func (s *Storage) syncParents(done func(error)) {
	if s.dirDurable {
		done(nil)
		return
	}
	var parents []string
	for d := path.Dir(s.dir); ; d = path.Dir(d) {
		parents = append(parents, d)
		if d == "." || d == "/" {
			break
		}
	}
	pending, firstErr := len(parents), error(nil)
	for _, d := range parents {
		s.disk.SyncDir(d, func(err error) {
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if pending--; pending == 0 {
				s.dirDurable = firstErr == nil
				done(firstErr)
			}
		})
	}
}

func (s *Storage) persist(rd Ready, finish func(error)) {
	s.writeSnapshot(rd, func(err error) {
		if err != nil {
			finish(err)
			return
		}
		pending, firstErr := 2, error(nil)
		join := func(err error) {
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if pending--; pending == 0 {
				finish(firstErr)
			}
		}
		s.writeHard(rd.HardState, join)
		s.writeLog(rd, join)
	})
}

// replaceFile writes data to name through a partial file, Sync, Rename and
// SyncDir.
func (s *Storage) replaceFile(name string, data []byte, done func(error)) {
	part := s.path(name + partialExt)
	f, err := s.disk.Open(part, env.OpenOptions{Create: true})
	if err != nil {
		done(err)
		return
	}
	if err := f.Truncate(0); err != nil {
		done(err)
		return
	}
	if err := f.Append(data); err != nil {
		done(err)
		return
	}
	f.Sync(func(err error) {
		f.Close()
		if err != nil {
			done(err)
			return
		}
		if err := s.disk.Rename(part, s.path(name)); err != nil {
			done(err)
			return
		}
		s.disk.SyncDir(s.dir, done)
	})
}

func (s *Storage) writeHard(hard *HardState, done func(error)) {
	if hard == nil {
		done(nil)
		return
	}
	b, err := json.Marshal(quorumState{LeaderEpoch: hard.Epoch, VotedID: hard.VotedFor})
	if err != nil {
		done(err)
		return
	}
	s.replaceFile(stateFile, b, done)
}

func (s *Storage) writeSnapshot(rd Ready, done func(error)) {
	snap := rd.Snapshot
	if snap == nil {
		done(nil)
		return
	}
	data := binary.BigEndian.AppendUint32(nil, crc32.Checksum(snap.Data, castagnoli))
	data = append(data, snap.Data...)
	s.replaceFile(checkpointName(snap.EndOffset, snap.Epoch), data, func(err error) {
		if err != nil {
			done(err)
			return
		}
		done(s.dropBehind(snap, rd.SnapshotInstall))
	})
}

// dropBehind removes older checkpoints, and, for a snapshot from the
// leader, the whole entry log. Entries below a local snapshot stay in
// quorum.log until a leader's snapshot or a truncation rewrites it; recovery
// skips them. Removals need no SyncDir: a crash that undoes one leaves an
// older, still valid, file.
func (s *Storage) dropBehind(snap *Snapshot, install bool) error {
	names, err := s.disk.List(s.dir)
	if err != nil {
		return err
	}
	keep := checkpointName(snap.EndOffset, snap.Epoch)
	for _, name := range names {
		if strings.HasSuffix(name, checkpointExt) && name < keep {
			if err := s.disk.Remove(s.path(name)); err != nil {
				return err
			}
		}
	}
	if install {
		if err := s.log.Truncate(0); err != nil {
			return err
		}
		s.logBase, s.positions = snap.EndOffset, []int64{0}
	}
	return nil
}

// writeLog applies rd's truncation and appends its entries, then syncs.
func (s *Storage) writeLog(rd Ready, done func(error)) {
	if rd.TruncateTo < 0 && len(rd.Entries) == 0 {
		done(nil)
		return
	}
	if t := rd.TruncateTo; t >= 0 && t-s.logBase < int64(len(s.positions)-1) {
		keep := max(t-s.logBase, 0)
		if err := s.log.Truncate(s.positions[keep]); err != nil {
			done(err)
			return
		}
		s.positions = s.positions[:keep+1]
	}
	var buf []byte
	end := s.positions[len(s.positions)-1]
	for _, e := range rd.Entries {
		if next := s.logBase + int64(len(s.positions)-1); e.Offset != next {
			done(fmt.Errorf("entry at offset %d does not follow the log's end %d", e.Offset, next))
			return
		}
		buf = encodeLogEntry(buf, e)
		s.positions = append(s.positions, end+int64(len(buf)))
	}
	if len(buf) > 0 {
		if err := s.log.Append(buf); err != nil {
			done(err)
			return
		}
	}
	s.log.Sync(done)
}

// Close closes the log file.
func (s *Storage) Close() error { return s.log.Close() }
