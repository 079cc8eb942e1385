package memdisk

import (
	"fmt"
	"io"

	"strand/core/env"
)

// File is a handle onto a file of a Disk; it implements env.File. Several
// handles may share one file. A handle dies at Close or at a Crash of its
// disk; from then on its methods return env.ErrClosed.
type File struct {
	disk   *Disk
	node   *node
	path   string
	epoch  uint64
	closed bool
	// failed is the error of an Append that failed after it returned
	// (Options.DeferAppendErrors): every later call returns it.
	failed error
}

var _ env.File = (*File)(nil)

// usable reports env.ErrClosed if the handle was closed or its disk crashed.
func (f *File) usable(op string) error {
	if f.closed || f.epoch != f.disk.epoch {
		return fmt.Errorf("memdisk: %s %s: %w", op, f.path, env.ErrClosed)
	}
	return nil
}

// writable is usable, and reports the failure of an earlier Append that
// failed late: the calls that change or sync the file report it, as
// diskio's Append, WriteAt, Truncate and Sync do; ReadAt and Close do not.
func (f *File) writable(op string) error {
	if err := f.usable(op); err != nil {
		return err
	}
	if f.failed != nil {
		return fmt.Errorf("memdisk: %s %s: an earlier append failed: %w", op, f.path, f.failed)
	}
	return nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Size returns the file's current size, including bytes not yet durable.
func (f *File) Size() int64 { return int64(len(f.node.file.current)) }

// Append writes a copy of p at the end of the file. With
// Options.DeferAppendErrors a failing Append returns nil, as diskio's
// queued write does, and the file fails for good: the next call on the
// handle (Append, WriteAt, Truncate, Sync) reports the error.
func (f *File) Append(p []byte) error {
	if err := f.writable("append"); err != nil {
		return err
	}
	err := f.write("append", p, f.Size())
	if err != nil && f.disk.opts.DeferAppendErrors {
		f.failed = err
		return nil
	}
	return err
}

// WriteAt writes a copy of p at off, extending the file with zeros if off is
// past its end.
func (f *File) WriteAt(p []byte, off int64) error {
	if err := f.writable("writeat"); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("memdisk: writeat %s: negative offset %d: %w", f.path, off, errInvalidArg)
	}
	return f.write("writeat", p, off)
}

func (f *File) write(op string, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	newSize := max(f.Size(), off+int64(len(p)))
	if err := f.disk.reserve(op, f.path, f.node, newSize); err != nil {
		return err
	}
	n := f.node
	if len(n.readFaults) > 0 {
		n.wroteRange(off, off+int64(len(p)))
	}
	if n.misdirectNext != nil {
		n.file.unprefix()
		n.file.record(fileOp{offset: off, data: p, misdirect: n.misdirectNext})
		n.misdirectNext = nil
		return nil
	}
	n.file.record(fileOp{offset: off, data: p})
	return nil
}

// ReadAt reads len(p) bytes at off from the current content. It returns
// fewer only together with io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if err := f.usable("readat"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("memdisk: readat %s: negative offset %d: %w", f.path, off, errInvalidArg)
	}
	if len(f.node.readFaults) > 0 {
		if err := f.node.checkRead("readat", f.path, off, int64(len(p))); err != nil {
			return 0, err
		}
	}
	content := f.node.file.current
	if off >= int64(len(content)) {
		if len(p) == 0 && off == int64(len(content)) {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, content[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Truncate cuts the file to size or extends it with zeros. Durable after
// Sync.
func (f *File) Truncate(size int64) error {
	if err := f.writable("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("memdisk: truncate %s: negative size %d: %w", f.path, size, errInvalidArg)
	}
	if err := f.disk.reserve("truncate", f.path, f.node, size); err != nil {
		return err
	}
	f.node.file.record(fileOp{truncate: true, size: size})
	f.node.truncatedTo(size)
	return nil
}

// Sync snapshots the changes made to the file so far and makes them durable
// when its completion runs, then calls done(nil). If FailNextSync armed the
// file, done gets env.ErrIO and nothing becomes durable. A crash before the
// completion runs drops it: done is never called.
func (f *File) Sync(done func(error)) {
	if err := f.writable("sync"); err != nil {
		f.disk.completeWith(done, err)
		return
	}
	n := f.node
	if n.failNextSync {
		n.failNextSync = false
		f.disk.completeWith(done, fmt.Errorf("memdisk: sync %s: injected failure: %w", f.path, env.ErrIO))
		return
	}
	lastSeq := n.file.lastSeq()
	f.disk.schedule(func() {
		n.file.makeDurable(lastSeq)
		if done != nil {
			done(nil)
		}
	})
}

// Close releases the handle. Syncs already issued still complete.
func (f *File) Close() error {
	if err := f.usable("close"); err != nil {
		return err
	}
	f.closed = true
	wasAlive := f.node.alive()
	f.node.openHandles--
	f.disk.accountAliveChange(f.node, wasAlive)
	return nil
}

// reserve checks that n may grow to newSize, and accounts for the change in
// size that the caller is about to make. Shrinking always succeeds.
func (d *Disk) reserve(op, p string, n *node, newSize int64) error {
	growthBytes := newSize - int64(len(n.file.current))
	if growthBytes > 0 {
		if d.full {
			return fmt.Errorf("memdisk: %s %s: disk set full: %w", op, p, env.ErrNoSpace)
		}
		if d.opts.CapacityBytes > 0 && d.usedBytes+growthBytes > d.opts.CapacityBytes {
			return fmt.Errorf("memdisk: %s %s: %d bytes used of %d, %d more needed: %w",
				op, p, d.usedBytes, d.opts.CapacityBytes, growthBytes, env.ErrNoSpace)
		}
	}
	if n.alive() {
		d.usedBytes += growthBytes
	}
	return nil
}
