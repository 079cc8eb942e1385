package diskio

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// File is an env.File over an open file descriptor.
//
// File methods are called from the node's event loop, one goroutine at a
// time, except WaitWritten, which any goroutine may call. The write worker
// pwrites queued appends (writer.go) and the I/O worker fdatasyncs, each on
// its own goroutine. Append writes at the logical size the File tracks
// itself, so it needs no O_APPEND and no lseek.
type File struct {
	disk   *Disk
	path   string
	fd     int
	size   int64
	closed bool
	// mapped is a read-only MAP_SHARED mapping of the file's first len(mapped)
	// bytes when OpenOptions.MappedBytesMax > 0, else nil. Only bytes below
	// size are ever read through it: pages wholly past the end of the file
	// would fault.
	mapped []byte

	// refs counts the owners of fd: the open File, plus one per queued Sync,
	// so that Close leaves the fd open until pending Syncs have run.
	refs atomic.Int32
	// queuedSync is the queued, not yet started Sync job, guarded by the
	// worker's mutex.
	queuedSync *syncJob
	// poisoned records a failed fsync; it is touched only by the I/O worker.
	poisoned bool
	// writes is the file's queued appends (writer.go).
	writes fileWrites
	// lastAppend is when Append last took bytes (zero before any), for
	// AppendedWithin. Append and its readers run on the event loop.
	lastAppend time.Time
}

var _ env.File = (*File)(nil)

// newFile wraps a freshly opened fd: it reads the size, preallocates and maps
// as the options ask.
func newFile(d *Disk, filePath string, fd int, opts env.OpenOptions) (*File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, wrapErr("open", filePath, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("diskio: open %s: not a regular file", filePath)
	}
	f := &File{disk: d, path: filePath, fd: fd, size: st.Size}
	f.refs.Store(1)
	preallocatedEnd := st.Size
	if opts.PreallocateBytes > st.Size {
		err := ignoringEINTR(func() error {
			return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, opts.PreallocateBytes)
		})
		if err != nil && err != unix.EOPNOTSUPP && err != unix.ENOSYS {
			return nil, wrapErr("preallocate", filePath, err)
		}
		if err == nil {
			preallocatedEnd = opts.PreallocateBytes
		}
	}
	d.writer.startFile(f, st.Size, opts.MappedBytesMax == 0, preallocatedEnd)
	if opts.MappedBytesMax > 0 {
		if err := f.mapAtLeast(opts.MappedBytesMax); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Size returns the logical size: every byte written or queued so far,
// durable or not. Preallocated space is never included. After a queued
// append failed it is the bytes that reached the file.
func (f *File) Size() int64 {
	if f.writes.failed.Load() {
		return min(f.size, f.disk.writer.sizeAfterFailure(f))
	}
	return f.size
}

// Fd returns the raw file descriptor, for sendfile. The caller must not use
// it after Close (the number may then name another file), must not close it,
// and must not write or truncate through it: the File tracks the logical size
// itself. Reading with an explicit offset (sendfile, pread) is what it is for.
func (f *File) Fd() int { return f.fd }

// Append queues p for the Disk's write worker at the logical end of the
// file and returns; Size includes p at once, and ReadAt sees it. The worker
// owns p until it is written (env.File's ownership rule). A write that fails
// (EIO, a device that fills up mid-write) fails the file for good: that and
// every later Append, WriteAt, Truncate and Sync report it, wrapping
// env.ErrIO or env.ErrNoSpace, Size shrinks to the bytes that reached the
// file, and a torn record batch fails its CRC on recovery. After the Disk is
// closed, Append writes in place and reports its own error.
func (f *File) Append(p []byte) error {
	if f.closed {
		return closedErr("append", f.path)
	}
	queued, err := f.disk.writer.appendAt(f, p, f.size)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		f.lastAppend = time.Now()
	}
	if queued {
		f.size += int64(len(p))
		return nil
	}
	if err := f.disk.writer.drain(f); err != nil {
		return err
	}
	n, err := pwriteAll(f.fd, p, f.size)
	f.disk.writer.wroteInPlace(f, f.size+int64(n))
	f.size += int64(n)
	if err != nil {
		return wrapErr("append", f.path, fmt.Errorf("wrote %d of %d bytes: %w", n, len(p), err))
	}
	return nil
}

// AppendedWithin reports whether Append took bytes within the last d: the
// file is being appended to, so the bytes near its end are queued or in the
// page cache. realnet reads such tails on the event loop; a segment that
// stopped growing long ago may be cold, and a read of it would stall the
// loop on the device. Call it on the event loop, as Append.
func (f *File) AppendedWithin(d time.Duration) bool {
	return !f.lastAppend.IsZero() && time.Since(f.lastAppend) <= d
}

// WriteAt writes p at offset off, extending the file if needed; an empty p
// extends nothing. A partial write extends Size by the bytes that were
// written, as Append does.
func (f *File) WriteAt(p []byte, off int64) error {
	if f.closed {
		return closedErr("writeat", f.path)
	}
	if off < 0 {
		return fmt.Errorf("diskio: writeat %s: offset %d is negative", f.path, off)
	}
	if err := f.disk.writer.drain(f); err != nil {
		return err
	}
	n, err := pwriteAll(f.fd, p, off)
	if n > 0 {
		f.size = max(f.size, off+int64(n))
	}
	f.disk.writer.wroteInPlace(f, f.size)
	if err != nil {
		return wrapErr("writeat", f.path, fmt.Errorf("wrote %d of %d bytes at %d: %w", n, len(p), off, err))
	}
	return nil
}

// ReadAt reads len(p) bytes from offset off, from the memory map if the file
// has one, else with pread. It returns fewer bytes only with an error: io.EOF
// at the logical end of the file.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, closedErr("readat", f.path)
	}
	if off < 0 {
		return 0, fmt.Errorf("diskio: readat %s: offset %d is negative", f.path, off)
	}
	if len(p) == 0 {
		return 0, nil // nothing asked, nothing short
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), f.size-off))
	writtenEnd, err := f.disk.writer.readQueued(f, p[:want], off)
	if err != nil {
		return 0, err
	}
	if fromFile := int(min(int64(want), max(writtenEnd-off, 0))); fromFile > 0 {
		if f.mapped != nil {
			err = f.readMapped(p[:fromFile], off)
		} else {
			err = f.readFile(p[:fromFile], off)
		}
	}
	if err != nil {
		return 0, err
	}
	if want < len(p) {
		return want, io.EOF
	}
	return want, nil
}

// ReadCachedAt fills p from offset off as ReadAt does, but only from memory:
// the queued appends and pages already in the page cache (cachestat, then
// preadv2 with RWF_NOWAIT). It reports false, with p's contents undefined,
// when any of the bytes would have to come from the disk, when they reach
// past the logical size, or when the kernel cannot tell (no RWF_NOWAIT
// support). The
// event loop reads a Fetch answer's tail itself only when this succeeds
// (realnet), so a cold read never stalls it: the connection's writer reads
// those bytes instead. Mapped files are not read this way (a mapped read can
// fault to the disk just the same).
func (f *File) ReadCachedAt(p []byte, off int64) (bool, error) {
	if f.closed {
		return false, closedErr("readcached", f.path)
	}
	if off < 0 || off+int64(len(p)) > f.size {
		return false, nil
	}
	if len(p) == 0 {
		return true, nil
	}
	writtenEnd, err := f.disk.writer.readQueued(f, p, off)
	if err != nil {
		return false, err
	}
	fromFile := int(min(int64(len(p)), max(writtenEnd-off, 0)))
	if fromFile == 0 {
		return true, nil
	}
	if f.mapped != nil {
		return false, nil
	}
	if cached, known := pagesCached(f.fd, off, int64(fromFile)); known && !cached {
		return false, nil
	}
	var n int
	err = ignoringEINTR(func() (err error) {
		n, err = unix.Preadv2(f.fd, [][]byte{p[:fromFile]}, off, unix.RWF_NOWAIT)
		return err
	})
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return false, nil // not all in memory, or no way to tell
	case err != nil:
		return false, wrapErr("readcached", f.path, err)
	}
	return n == fromFile, nil // a short read: the rest is not in memory
}

// cachestatMissing is set once cachestat(2) answered that it does not exist
// here (Linux before 6.5), so that ReadCachedAt stops asking.
var cachestatMissing atomic.Bool

// pagesCached reports whether every page of the bytes [off, off+length) of fd
// is in the page cache, by cachestat(2); known is false where the kernel
// cannot tell. ReadCachedAt asks before its RWF_NOWAIT read because such a
// read is allowed to start readahead for a missing page and succeed when the
// disk answers quickly enough (about a third of the time on a virtio disk):
// a read from the disk all the same, on the event loop.
func pagesCached(fd int, off, length int64) (cached, known bool) {
	if cachestatMissing.Load() {
		return false, false
	}
	var st unix.Cachestat_t
	err := ignoringEINTR(func() error {
		return unix.Cachestat(uint(fd), &unix.CachestatRange{Off: uint64(off), Len: uint64(length)}, &st, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			cachestatMissing.Store(true)
		}
		return false, false
	}
	pageBytes := int64(unix.Getpagesize())
	pages := (off+length-1)/pageBytes - off/pageBytes + 1
	return int64(st.Cache) >= pages, true
}

// readFile fills p from offset off with pread. The bytes are below the
// logical size, so running out of file means someone truncated it behind the
// File's back: the bytes written are gone, which the core treats as ErrIO.
func (f *File) readFile(p []byte, off int64) error {
	read := 0
	for read < len(p) {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Pread(f.fd, p[read:], off+int64(read))
			return err
		})
		if err != nil {
			return wrapErr("readat", f.path, err)
		}
		if n == 0 {
			return fmt.Errorf("diskio: readat %s: file ends at %d, before its logical size %d: %w",
				f.path, off+int64(read), f.size, env.ErrIO)
		}
		read += n
	}
	return nil
}

// Truncate sets the file's size (ftruncate). Durable after Sync.
func (f *File) Truncate(size int64) error {
	if f.closed {
		return closedErr("truncate", f.path)
	}
	if size < 0 {
		return fmt.Errorf("diskio: truncate %s: size %d is negative", f.path, size)
	}
	if err := f.disk.writer.drain(f); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Ftruncate(f.fd, size) }); err != nil {
		return wrapErr("truncate", f.path, err)
	}
	f.size = size
	f.disk.writer.wroteInPlace(f, size)
	return nil
}

// Sync fdatasyncs the file on the Disk's I/O worker, then posts done with the
// outcome. It never blocks on the fsync and never calls done before
// returning. Every write and Truncate made before Sync is covered: a Sync
// of a file with queued appends waits behind them on the write worker before
// it reaches the I/O worker, and the other writes complete before they
// return. After one failed fsync every later Sync fails with env.ErrIO
// without calling fsync again; after a failed write, with that write's error.
func (f *File) Sync(done func(error)) {
	switch {
	case f.closed:
		f.disk.enqueueFailure(done, closedErr("sync", f.path))
	case f.disk.closed:
		f.disk.postClosed(done, closedErr("sync", f.path))
	case f.disk.writer.syncAfterWrites(f, done):
	case !f.disk.worker.enqueueFile(f, done):
		f.disk.postClosed(done, closedErr("sync", f.path))
	}
}

// Close waits for the file's queued appends, then unmaps and releases the
// file. Syncs already asked for still run and complete; the descriptor is
// closed after the last of them.
func (f *File) Close() error {
	if f.closed {
		return closedErr("close", f.path)
	}
	_ = f.disk.writer.drain(f) // a failed write was or will be reported by the calls that see it
	f.closed = true
	trimErr := f.releaseAllocatedAhead()
	unmapErr := f.unmap()
	if err := f.release(); err != nil {
		return err
	}
	return errors.Join(trimErr, unmapErr)
}

// releaseAllocatedAhead gives back the space allocated past the file's end
// (OpenOptions.PreallocateBytes, writer.preallocateAhead): on ext4 an
// ftruncate to the unchanged size frees the blocks past it (a file system
// that ignores a truncation to the same size, as tmpfs does, keeps them
// until the file is removed). A crash before Close leaves them allocated,
// at most allocateAheadBytesMax per file, until the file is removed. f is
// drained.
func (f *File) releaseAllocatedAhead() error {
	if !f.disk.writer.allocatedPastEnd(f, f.size) {
		return nil
	}
	if err := ignoringEINTR(func() error { return unix.Ftruncate(f.fd, f.size) }); err != nil {
		return wrapErr("release preallocated space of", f.path, err)
	}
	f.disk.writer.wroteInPlace(f, f.size)
	return nil
}

// release drops one owner of the descriptor and closes it with the last.
func (f *File) release() error {
	refs := f.refs.Add(-1)
	if refs < 0 {
		panic(fmt.Sprintf("diskio: %s released more often than acquired", f.path))
	}
	if refs > 0 {
		return nil
	}
	if err := unix.Close(f.fd); err != nil {
		return wrapErr("close", f.path, err)
	}
	return nil
}

// WaitWritten blocks until the file's bytes below end are in the file (the
// page cache), not merely queued, so that sendfile or pread on Fd sees them.
// It returns the write error if they never will be, and an error if fewer
// than end bytes were ever appended. Unlike the other methods it may be
// called from any goroutine, while the event loop keeps using the File.
func (f *File) WaitWritten(end int64) error { return f.disk.writer.waitWritten(f, end) }

// pwriteAll writes all of p at off, looping over short writes. It returns
// how many bytes reached the file, with the error that stopped it.
func pwriteAll(fd int, p []byte, off int64) (int, error) {
	written := 0
	for written < len(p) {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Pwrite(fd, p[written:], off+int64(written))
			return err
		})
		if err != nil {
			return written, err
		}
		if n == 0 {
			return written, io.ErrShortWrite
		}
		written += n
	}
	return written, nil
}
