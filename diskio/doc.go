// Package diskio is the production implementation of env.Disk and env.File:
// real files and directories under one root directory (a log directory),
// reached through golang.org/x/sys/unix system calls.
//
// The core never sees this package directly. It reaches storage only through
// the env.Disk interface; the broker binary builds a diskio.Disk per log
// directory and hands it to the core as an env.Disk. The simulator uses its
// own in-memory disk instead.
//
// What diskio does on top of plain system calls:
//
//   - Paths are slash-separated and relative to the root; absolute paths and
//     ".." escapes are rejected (ErrBadPath).
//   - Errors map to the env sentinels (env.ErrNotExist, env.ErrExist,
//     env.ErrNoSpace, env.ErrIO, env.ErrClosed) and are wrapped with the
//     operation and path, so errors.Is works on both the sentinel and the
//     underlying unix.Errno.
//   - File.Sync and Disk.SyncDir never block the caller: one I/O worker
//     goroutine per Disk runs fdatasync/fsync and hands the outcome back
//     through the event loop's post function (see Options.Post).
//   - A file whose fsync failed is poisoned: every later Sync fails with
//     env.ErrIO without calling fsync again, because after a failed fsync the
//     page cache can no longer be trusted (CLARIFICATIONS.md, "Disk faults").
//   - Small random-access files (indexes) are read through a read-only
//     memory map (env.OpenOptions.MappedBytesMax).
//   - Disk.OpenFile returns the concrete *File, whose Fd serves sendfile.
//
// Writes (Append, WriteAt, Truncate) are plain system calls on the caller's
// goroutine, into the page cache: when one returns, its bytes are in the file,
// so a file region the core hands to sendfile is always there to send. The
// price is that a pwrite throttled by dirty-page writeback stalls the caller.
//
// What diskio must not do: fsync a directory behind the core's back (Open
// with Create, Rename and Remove leave that to SyncDir, as env.Disk says;
// MkdirAll is the one documented exception), retry a failed fsync, or call
// back into the core from any goroutine other than through Options.Post.
//
// The sub-package faulty wraps any env.Disk and injects disk faults by a
// deterministic plan, for tests of the real build. RawSequentialWrite and
// RawSequentialRead (bench_raw.go) measure the raw filesystem figures the log
// benchmark compares itself against.
package diskio
