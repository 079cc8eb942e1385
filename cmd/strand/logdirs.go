package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"strand/core/config"
	"strand/core/env"
	"strand/diskio"
)

// metaTempName is where meta.properties is written before it is renamed into
// place, so that a crash never leaves a half-written identity file.
const metaTempName = config.MetaFileName + ".tmp"

// ignoredEntries may sit in an unformatted log directory without making it
// "not empty": the lock this process takes before it looks (or one a
// crashed run left), a temp file from a format that crashed, and ext4's
// lost+found at a mount point.
var ignoredEntries = []string{diskio.LockFileName, metaTempName, "lost+found"}

// logDirState is what a log directory holds before start-up.
type logDirState struct {
	dir       string
	formatted bool
	meta      config.Meta
	// unreadable is why the directory could not be opened or its
	// meta.properties read: a disk failure, not a misconfiguration.
	unreadable error
}

// logDirSet is what prepareLogDirs leaves: the cluster id, the directories
// that start offline, the locks held on every other one, and which of
// them it formatted.
type logDirSet struct {
	clusterID string
	offline   map[string]error
	// locks are held on every usable directory: the caller hands them to
	// the node (realnet.Options.LogDirLocks) or releases them.
	locks []*diskio.DirLock
	// formatted got meta.properties now; alreadyFormatted had it.
	formatted, alreadyFormatted []string
}

// release drops the locks, for a caller that does not hand them on.
func (s *logDirSet) release() {
	for _, l := range s.locks {
		_ = l.Release() // closing the descriptor drops the lock whatever it reports
	}
	s.locks = nil
}

// holds reports whether the set holds dir's lock.
func (s *logDirSet) holds(dir string) bool {
	return slices.ContainsFunc(s.locks, func(l *diskio.DirLock) bool { return l.Dir() == dir })
}

// prepareOptions are what serve and format ask of prepareLogDirs.
type prepareOptions struct {
	// clusterID is the cluster id to format with; "" takes the one on
	// disk, else derives one from controller.quorum.voters.
	clusterID string
	// allUsable refuses any unusable directory, where serve starts
	// without those other than the first (format).
	allUsable bool
	// refuseFormatted refuses a formatted directory (format without
	// --ignore-formatted).
	refuseFormatted bool
}

// errAlreadyFormatted is format's refusal of a formatted directory without
// --ignore-formatted, as kafka-storage.sh format refuses.
var errAlreadyFormatted = errors.New("is already formatted: use --ignore-formatted to leave formatted log dirs as they are and format the others")

// prepareLogDirs makes every log directory belong to this node: it locks
// each (diskio.LockDir, before reading it), checks the meta.properties of
// formatted directories and formats the empty ones, as kafka-storage.sh
// format does. The cluster id is clusterID when given, else the one
// already on disk, else one derived from controller.quorum.voters, so
// that nodes formatting themselves agree. Nothing is written unless every
// usable directory passes its checks, and a formatted directory fails
// them when opts.refuseFormatted. On success the returned set holds the
// locks; on error none is held.
//
// A directory another process holds the lock on fails the call, naming
// the holder's pid, as Kafka refuses to start on a locked directory. A
// directory other than the first that cannot be opened or locked, whose
// meta.properties cannot be read, or that cannot be created or formatted,
// is returned in offline with its cause (or fails the call, with
// opts.allUsable, before anything is written), to start offline (realnet's
// Options.OfflineLogDirs), as Kafka's MetaPropertiesEnsemble loader puts
// such a directory among its error log dirs and LogManager starts without
// it. The first, which holds the metadata log, fails the call instead, as
// does a readable meta.properties that belongs to another node or cluster:
// that is a misconfiguration, which Kafka refuses too.
func prepareLogDirs(cfg config.Broker, opts prepareOptions) (_ *logDirSet, err error) {
	clusterID := opts.clusterID
	if clusterID != "" {
		if err := config.ValidateClusterID(clusterID); err != nil {
			return nil, fmt.Errorf("cluster id: %w", err)
		}
	}
	set := &logDirSet{offline: map[string]error{}}
	defer func() {
		if err != nil {
			set.release()
		}
	}()
	goOffline := func(dir string, cause error) error {
		if opts.allUsable {
			return fmt.Errorf("log dir %s: %w", dir, cause)
		}
		if dir == cfg.LogDirs[0] {
			return fmt.Errorf("log dir %s, the first, which holds the metadata log: %w", dir, cause)
		}
		set.offline[dir] = cause
		return nil
	}
	// lock locks dir and reports whether it is usable: a lock held
	// elsewhere is an error, any other failure makes dir unusable.
	lock := func(dir string) (bool, error) {
		l, err := diskio.LockDir(dir)
		switch {
		case err == nil:
			set.locks = append(set.locks, l)
			return true, nil
		case errors.Is(err, diskio.ErrDirInUse):
			return false, err
		default:
			return false, goOffline(dir, err)
		}
	}
	states := make([]logDirState, 0, len(cfg.LogDirs))
	for _, dir := range cfg.LogDirs {
		if _, err := os.Stat(dir); err == nil {
			if usable, err := lock(dir); err != nil || !usable {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		state, err := inspectLogDir(dir)
		if err != nil {
			return nil, err
		}
		if state.unreadable != nil {
			if err := goOffline(dir, state.unreadable); err != nil {
				return nil, err
			}
			continue
		}
		if state.formatted {
			if err := config.CheckMeta(dir, state.meta, cfg.NodeID, clusterID); err != nil {
				return nil, err
			}
			if clusterID == "" {
				clusterID = state.meta.ClusterID
			}
			if opts.refuseFormatted {
				return nil, fmt.Errorf("log dir %s %w", dir, errAlreadyFormatted)
			}
		}
		states = append(states, state)
	}
	if clusterID == "" {
		clusterID = config.DeriveClusterID(cfg.QuorumVoters)
	}
	set.clusterID = clusterID
	for _, state := range states {
		if state.formatted {
			set.alreadyFormatted = append(set.alreadyFormatted, state.dir)
			continue
		}
		if !set.holds(state.dir) {
			// Created now: lock it before writing, and check that
			// nobody wrote in it meanwhile.
			if err := createDirDurably(state.dir); err != nil {
				if err := goOffline(state.dir, fmt.Errorf("creating log dir %s: %w", state.dir, err)); err != nil {
					return nil, err
				}
				continue
			}
			if usable, err := lock(state.dir); err != nil || !usable {
				if err != nil {
					return nil, err
				}
				continue
			}
			if again, err := inspectLogDir(state.dir); err != nil || again.formatted || again.unreadable != nil {
				return nil, fmt.Errorf("log dir %s changed while this process was formatting it: is another one formatting it?", state.dir)
			}
		}
		meta, err := newMeta(clusterID, cfg.NodeID)
		if err != nil {
			return nil, err
		}
		if err := writeMeta(state.dir, meta); err != nil {
			if err := goOffline(state.dir, err); err != nil {
				return nil, err
			}
			continue
		}
		set.formatted = append(set.formatted, state.dir)
	}
	return set, nil
}

// newMeta builds the identity of a newly formatted directory, with a random
// directory.id as Kafka 3.7+ writes.
func newMeta(clusterID string, nodeID env.NodeID) (config.Meta, error) {
	var random [16]byte
	if _, err := rand.Read(random[:]); err != nil {
		return config.Meta{}, fmt.Errorf("drawing a directory id: %w", err)
	}
	return config.Meta{Version: config.MetaVersion, ClusterID: clusterID, NodeID: nodeID, DirectoryID: config.NewClusterID(random)}, nil
}

// inspectLogDir reads dir's meta.properties. A missing or empty directory is
// unformatted; a directory with other files but no meta.properties is an
// error, because formatting it could adopt another program's data. A
// directory that cannot be opened or listed, or whose meta.properties
// cannot be read or parsed, is returned with state.unreadable set.
func inspectLogDir(dir string) (logDirState, error) {
	state := logDirState{dir: dir}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return state, nil
	}
	var misconfigured error
	err := withDisk(dir, func(disk *diskio.Disk, _ *completions) error {
		names, err := disk.List(".")
		if err != nil {
			return err
		}
		if !slices.Contains(names, config.MetaFileName) {
			for _, name := range names {
				if !slices.Contains(ignoredEntries, name) {
					misconfigured = fmt.Errorf("not empty (it holds %s) but has no %s: give strand an empty directory, or check log.dirs",
						name, config.MetaFileName)
					return nil
				}
			}
			return nil
		}
		text, err := readWholeFile(disk, config.MetaFileName)
		if err != nil {
			return fmt.Errorf("reading %s: %w", config.MetaFileName, err)
		}
		if state.meta, err = config.ParseMeta(text); err != nil {
			return fmt.Errorf("reading %s: %w", config.MetaFileName, err)
		}
		state.formatted = true
		return nil
	})
	switch {
	case misconfigured != nil:
		return logDirState{}, fmt.Errorf("log dir %s: %w", dir, misconfigured)
	case err != nil:
		return logDirState{dir: dir, unreadable: err}, nil
	}
	return state, nil
}

// readWholeFile reads a small file through the disk.
func readWholeFile(disk *diskio.Disk, name string) ([]byte, error) {
	f, err := disk.Open(name, env.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text := make([]byte, f.Size())
	if _, err := f.ReadAt(text, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return text, nil
}

// writeMeta writes meta.properties durably.
func writeMeta(dir string, meta config.Meta) error {
	if err := writeDurably(dir, config.MetaFileName, config.EncodeMeta(meta)); err != nil {
		return fmt.Errorf("writing %s in log dir %s: %w", config.MetaFileName, dir, err)
	}
	return nil
}

// writeDurably writes data as dir/name durably: dir created (durably), a
// temp file written and fsynced, renamed into place, then the directory
// fsynced, so that a crash leaves the old file or the new one whole.
func writeDurably(dir, name string, data []byte) error {
	if err := createDirDurably(dir); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	temp := name + ".tmp"
	return withDisk(dir, func(disk *diskio.Disk, loop *completions) error {
		f, err := disk.Open(temp, env.OpenOptions{Create: true})
		if err != nil {
			return err
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return err
		}
		if err := f.Append(data); err != nil {
			f.Close()
			return err
		}
		if err := loop.wait(f.Sync); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := disk.Rename(temp, name); err != nil {
			return err
		}
		return loop.wait(func(done func(error)) { disk.SyncDir(".", done) })
	})
}

// completions is a minimal event loop for diskio's asynchronous Sync: the
// disk's I/O worker posts completions, and wait runs them on the calling
// goroutine until the one asked for arrives.
type completions struct{ posted chan func() }

func (c *completions) post(fn func()) { c.posted <- fn }

// wait starts an asynchronous operation and runs posted completions until
// its own has run, returning its outcome.
func (c *completions) wait(start func(done func(error))) error {
	finished := false
	var result error
	start(func(err error) { result, finished = err, true })
	for !finished {
		(<-c.posted)()
	}
	return result
}

// withDisk opens dir as a diskio.Disk for the duration of use.
func withDisk(dir string, use func(*diskio.Disk, *completions) error) error {
	loop := &completions{posted: make(chan func(), 16)}
	disk, err := diskio.New(dir, diskio.Options{Post: loop.post})
	if err != nil {
		return err
	}
	useErr := use(disk, loop)
	closeErr := disk.Close()
	return errors.Join(useErr, closeErr)
}

// createDirDurably creates dir and its missing parents through
// diskio.Disk.MkdirAll on the nearest existing ancestor, which fsyncs each
// new directory's parent, so that a formatted directory cannot vanish in a
// crash after its meta.properties was synced.
func createDirDurably(dir string) error {
	base := filepath.Clean(dir)
	var missing []string
	for {
		if _, err := os.Stat(base); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		parent := filepath.Dir(base)
		if parent == base {
			return fmt.Errorf("no existing ancestor of %s", dir)
		}
		missing = append([]string{filepath.Base(base)}, missing...)
		base = parent
	}
	if len(missing) == 0 {
		return nil
	}
	return withDisk(base, func(disk *diskio.Disk, _ *completions) error {
		return disk.MkdirAll(strings.Join(missing, "/"))
	})
}
