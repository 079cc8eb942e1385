package env

import "errors"

// Errors every Disk implementation reports, wrapped with context, so that the
// core can tell them apart with errors.Is whatever the environment.
var (
	// ErrNotExist: the file or directory does not exist.
	ErrNotExist = errors.New("file does not exist")
	// ErrExist: Create with Exclusive found the file already there.
	ErrExist = errors.New("file already exists")
	// ErrNoSpace: the device is full (ENOSPC).
	ErrNoSpace = errors.New("no space left on device")
	// ErrIO: the device reported an I/O error (EIO), or a Sync failed.
	// After a failed Sync the file's page cache can no longer be trusted, so
	// the core never retries Sync on that file: it takes the log directory
	// offline instead (SPEC.md §3.4).
	ErrIO = errors.New("input/output error")
	// ErrClosed: the File was used after Close, or after its disk crashed.
	ErrClosed = errors.New("file already closed")
)

// Disk is a node's storage: one tree of directories and files addressed by
// slash-separated paths relative to the disk's root. See SPEC.md §2.3 for what
// survives a crash.
//
// All calls except SyncDir, File.Sync and File.Append complete before they
// return. They may block the caller briefly (the real disk writes into the
// page cache). File.Append may return once its bytes are queued: see
// File.Append for how a failure that comes later is reported.
type Disk interface {
	// MkdirAll creates dir and any missing parents. Creating a directory is
	// durable only after SyncDir on its parent.
	MkdirAll(dir string) error
	// Open opens the file at path for reading and writing.
	Open(path string, opts OpenOptions) (File, error)
	// List returns the names (not paths) of the entries of dir, sorted
	// bytewise, so that callers never depend on directory order.
	List(dir string) ([]string, error)
	// Rename atomically replaces newPath with oldPath. Durable after SyncDir.
	Rename(oldPath, newPath string) error
	// Remove deletes a file or an empty directory. Durable after SyncDir.
	Remove(path string) error
	// SyncDir makes the entries of dir (creations, renames, removals) durable,
	// then calls done on the node's event loop with the outcome.
	SyncDir(dir string, done func(error))
}

// OpenOptions says how to open a file.
type OpenOptions struct {
	// Create creates the file if it does not exist.
	Create bool
	// Exclusive, with Create, fails with ErrExist if the file exists.
	Exclusive bool
	// MappedBytesMax > 0 marks a small random-access file (an offset or time
	// index) of at most this many bytes. The real disk serves its reads from
	// a memory map, so that indexes cost page cache, not heap. The simulated
	// disk ignores it.
	MappedBytesMax int64
	// PreallocateBytes > 0 asks the real disk to reserve this much space
	// without changing the file's size (fallocate with FALLOC_FL_KEEP_SIZE).
	// It is a hint: Size never includes it.
	PreallocateBytes int64
}

// File is an open file of a Disk.
//
// Ownership: Append and WriteAt take ownership of p. The caller must not
// modify p after the call; the implementation may keep referring to it until
// the bytes are written. ReadAt fills the caller's buffer.
type File interface {
	// Path returns the path the file was opened with.
	Path() string
	// Size returns the file's logical size in bytes, including appended bytes
	// that are not yet durable.
	Size() int64
	// Append writes p at the end of the file. It may return before the
	// bytes are written (the real disk queues them for a per-directory
	// write worker; Size and ReadAt see them at once). A write that fails
	// after its Append returned fails the file for good: the next Append,
	// WriteAt, Truncate or Sync returns the error, and Size drops to the
	// bytes written. An implementation may also fail the Append itself,
	// as the simulator's disk does; callers treat both the same (SPEC.md
	// §3.5).
	Append(p []byte) error
	// WriteAt writes p at offset off, extending the file if needed.
	WriteAt(p []byte, off int64) error
	// ReadAt reads len(p) bytes from offset off. It returns fewer bytes only
	// together with an error (io.EOF at the end of the file).
	ReadAt(p []byte, off int64) (int, error)
	// Truncate sets the file's size. Durable after Sync.
	Truncate(size int64) error
	// Sync makes every byte written and every Truncate so far durable
	// (fdatasync), then calls done on the node's event loop with the outcome.
	// A failed Sync leaves the file's durable contents unknown; see ErrIO.
	Sync(done func(error))
	// Close releases the file. Pending Syncs still complete.
	Close() error
}
