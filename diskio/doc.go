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
// Appends are queued for a write worker goroutine per Disk (writer.go),
// which pwrites them in order, so that a write throttled by dirty-page
// writeback stalls that goroutine and never the event loop (CLARIFICATIONS.md,
// "Environment interfaces ... Disk"). Size and ReadAt see queued bytes at
// once (ReadAt serves them from the queued buffers); a Sync waits behind the
// file's queued appends; File.WaitWritten is the barrier a sendfile of a
// region must pass first, since sendfile reads the file, not the queue. A
// failed queued write fails its file for good, and the next call reports it.
// WriteAt and Truncate wait for the file's queue, then run in place. The
// queue is bounded (Options.WriteQueueBytesMax); a full queue makes Append
// wait, the backpressure of a disk slower than its input.
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
