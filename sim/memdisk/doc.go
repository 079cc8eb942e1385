// Package memdisk is the simulator's disk: an in-memory implementation of
// env.Disk and env.File that keeps, for every file and directory, what is
// durable apart from what is merely written, so that a simulated crash can
// lose exactly what a real power loss could lose. It also injects the disk
// faults the simulator needs (torn writes, bit flips, truncated files, ENOSPC,
// failed fsyncs, read errors, latent sector errors, misdirected writes,
// late-reported append failures) on demand.
//
// # Durability model
//
// Files. Each file has current content (what reads return) and durable
// content (what survives any crash). Every change since the durable point is
// recorded in order in the file's pending list: a write of bytes at an offset
// (Append and WriteAt) or a truncate to a size. Applying the pending list to
// the durable content always gives the current content.
//
// Sync(done) snapshots the pending list as it is at the call: "everything
// written so far". Nothing becomes durable at call time. When the completion
// runs, the snapshotted changes are applied to the durable content, and then
// done(nil) is called. Changes made after the Sync call stay pending. A crash
// between the Sync call and its completion may therefore lose the changes the
// Sync covered, and done is never called.
//
// Directories. Each directory likewise has current entries and durable
// entries, and an ordered pending list of entry changes: an entry added (by
// Open with Create, or MkdirAll), removed (Remove) or renamed (Rename).
// SyncDir(dir, done) snapshots the directory's pending list at the call and
// makes it durable when its completion runs. A SyncDir covers the entries of
// that one directory, not of its parent or children: creating a directory is
// durable only after SyncDir on its parent.
//
// A file or directory whose entry is lost in a crash disappears together with
// everything under it and all its contents, even if the file itself was
// synced.
//
// Rename within one directory is one entry change, hence atomic: after any
// crash the file is found under exactly one of its two names. A rename across
// directories is two entry changes, a removal from the old directory and an
// addition to the new one, each made durable by SyncDir on its own directory;
// until both are synced a crash may leave the file under both names or
// neither, and both names then reach the same file. Code that needs a move to
// be atomic renames within one directory.
//
// Completions. When Options.Post is non-nil, every Sync and SyncDir
// completion is handed to Post, and the simulator runs it later on the node's
// event loop. When Post is nil, completions queue inside the Disk, FIFO, and
// run when RunPending is called. Completions that belong to a time before a
// Crash never run, even if Post already holds them.
//
// # Crashes
//
// Crash(rng, mode) simulates the end of the process. Every open File becomes
// unusable (its methods return env.ErrClosed) and pending completions are
// dropped. Then, depending on the mode, for every file and directory that is
// reachable from the root once the crash has been applied:
//   - CrashLoseAll (power loss, nothing unsynced reached the platter): the
//     content reverts to its durable state; every pending change is lost.
//   - CrashTorn (power loss in the middle of writeback): a random prefix of
//     the pending list is kept, of any length from none to all. If the last
//     kept change is a write, it is torn: only a random prefix of its bytes,
//     from none to all, is kept. The kept state becomes durable.
//   - CrashKeepAll (a process crash, kill -9, without power loss): the page
//     cache survives, so every written byte and entry change is kept, and
//     stays pending (not durable) exactly as before: a later power loss can
//     still lose it.
//
// Each file and directory draws its own prefix independently, in bytewise
// path order, using only integer draws from rng, so that one seed gives one
// outcome. Crash returns a description of what was kept, for traces.
//
// # Faults
//
// FlipBit corrupts one stored bit, in both the durable and the current
// content. TruncateFile cuts a file to a size and makes that durable, as a
// file system that lost a file's tail would; given a larger size it appends
// durable zeros, as a preallocated file shows them. SetFull makes every write that
// grows a file fail with env.ErrNoSpace; Options.CapacityBytes does the same
// once the files' total size would exceed it. FailNextSync makes the next
// Sync of a file (or SyncDir of a directory) fail with env.ErrIO, making
// nothing durable.
//
// FailReads makes reads of a file's region fail with env.ErrIO: the next
// read touching it (transient, ended by a Crash), or every read until a
// write covers the region (a latent sector error, which survives crashes).
// MisdirectNextWrite makes a file's next write reach the medium at the
// wrong place (another offset or file) when it becomes durable: the page
// cache keeps what was written until a power loss brings back what the
// medium holds. Options.DeferAppendErrors makes a failing Append return
// nil and fail its handle for good, so that the next call reports it, as
// diskio's write worker does.
//
// Writeback makes every pending change durable, as the kernel's background
// writeback eventually does without fsync; the simulator decides when.
// UsedBytes, DurableSize and ReadFile (alias Snapshot) let checkers look
// inside without a handle.
//
// # Conventions
//
// Paths are slash-separated and relative to the disk's root, which is "."
// (or ""). List returns names sorted bytewise. ReadAt past the end returns
// io.EOF with a short count. Errors wrap the env sentinels (env.ErrNotExist,
// env.ErrExist, env.ErrNoSpace, env.ErrIO, env.ErrClosed) with the operation
// and path. Opening one path twice gives two handles onto the same file; a
// removed or renamed file stays usable through the handles open on it, as on
// POSIX. Append and WriteAt copy p, so the caller's buffer is never retained
// or modified.
//
// This package must not start goroutines, use locks or let map iteration order
// reach its behaviour: the simulator is single-threaded and must replay a seed
// byte for byte. It is not safe for concurrent use.
package memdisk
