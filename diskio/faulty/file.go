package faulty

import (
	"fmt"
	"sync/atomic"

	"strand/core/env"
)

// File is an env.File that forwards to another and fails the calls its
// Disk's Plan names.
type File struct {
	disk  *Disk
	inner env.File
	// poisoned is set once an injected Sync failure has been reported: from
	// then on every Sync fails, as after a real failed fsync.
	poisoned atomic.Bool
}

var _ env.File = (*File)(nil)

// Unwrap returns the wrapped File, for callers that need the concrete type
// (diskio.File's Fd).
func (f *File) Unwrap() env.File { return f.inner }

// Path forwards.
func (f *File) Path() string { return f.inner.Path() }

// Size forwards.
func (f *File) Size() int64 { return f.inner.Size() }

// Append forwards unless the plan fails it. A rule with ShortWriteBytes
// first appends a prefix of p, so the file ends in a torn write that the
// core must detect from the error, Size and the bytes' CRC.
func (f *File) Append(p []byte) error {
	r := f.disk.decide(OpWrite, f.Path())
	if r == nil {
		return f.inner.Append(p)
	}
	prefix := shortPrefix(r, p)
	if len(prefix) > 0 {
		if err := f.inner.Append(prefix); err != nil {
			return err
		}
	}
	return f.writeErr(r, len(prefix), len(p))
}

// WriteAt forwards unless the plan fails it, tearing the write as Append
// does.
func (f *File) WriteAt(p []byte, off int64) error {
	r := f.disk.decide(OpWrite, f.Path())
	if r == nil {
		return f.inner.WriteAt(p, off)
	}
	prefix := shortPrefix(r, p)
	if len(prefix) > 0 {
		if err := f.inner.WriteAt(prefix, off); err != nil {
			return err
		}
	}
	return f.writeErr(r, len(prefix), len(p))
}

// shortPrefix is the part of p a torn write writes: at most len(p)-1 bytes,
// so that the write is always incomplete.
func shortPrefix(r *Rule, p []byte) []byte {
	return p[:min(r.ShortWriteBytes, max(len(p)-1, 0))]
}

// writeErr is the error of a failed, possibly torn, write.
func (f *File) writeErr(r *Rule, writtenBytes, pBytes int) error {
	return fmt.Errorf("%w (wrote %d of %d bytes)", injectedErr(r, OpWrite, f.Path()), writtenBytes, pBytes)
}

// ReadAt forwards unless the plan fails it; a failed read reads nothing.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if r := f.disk.decide(OpRead, f.Path()); r != nil {
		return 0, injectedErr(r, OpRead, f.Path())
	}
	return f.inner.ReadAt(p, off)
}

// Truncate forwards unless the plan fails it.
func (f *File) Truncate(size int64) error {
	if r := f.disk.decide(OpTruncate, f.Path()); r != nil {
		return injectedErr(r, OpTruncate, f.Path())
	}
	return f.inner.Truncate(size)
}

// Sync forwards. When the plan fails it, or an earlier injected failure
// poisoned the file, the wrapped file still syncs, so that done reaches the
// event loop the wrapped disk's way, but done gets env.ErrIO instead of the
// outcome. A poisoned file stays poisoned even if the rule does not persist:
// after a failed fsync the page cache can no longer be trusted.
func (f *File) Sync(done func(error)) {
	r := f.disk.decide(OpSync, f.Path())
	switch {
	case r != nil:
		injected := injectedErr(r, OpSync, f.Path())
		f.poisoned.Store(true)
		f.inner.Sync(func(error) { done(injected) })
	case f.poisoned.Load():
		poisoned := fmt.Errorf("faulty: sync %s: an earlier fsync failed and is never retried: %w", f.Path(), env.ErrIO)
		f.inner.Sync(func(error) { done(poisoned) })
	default:
		f.inner.Sync(done)
	}
}

// Close forwards.
func (f *File) Close() error { return f.inner.Close() }
