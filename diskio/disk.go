package diskio

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// listBufferBytes is the getdents buffer size used by List.
const listBufferBytes = 8 << 10

// Options configures a Disk.
type Options struct {
	// Post runs a function on the node's event loop (the loop's submit
	// function). Required: every Sync and SyncDir completion reaches the core
	// through it, from the Disk's I/O worker goroutine. Post may block until
	// the loop has room; that only delays later fsyncs of this Disk, because
	// no Disk or File method ever waits for the worker.
	Post func(func())
	// WriteQueueBytesMax bounds the bytes of appends queued for the write
	// worker (writer.go); an Append that would exceed it waits. Zero means
	// WriteQueueBytesMaxDefault.
	WriteQueueBytesMax int64
}

// Disk is an env.Disk over a real directory, its root. One Disk is one log
// directory, with one I/O worker goroutine.
//
// Disk methods are called from the node's event loop (one goroutine at a
// time), as env.Disk promises the core.
type Disk struct {
	root   string
	rootFd int
	worker *worker
	writer *writer
	closed bool
	// exited is closed when both workers have drained and exited.
	exited chan struct{}
	// fdatasync is the file sync system call. Internal tests replace it, before
	// the first Sync, to inject fsync failures.
	fdatasync func(fd int) error
}

var _ env.Disk = (*Disk)(nil)

// New opens the existing directory root as a Disk and starts its I/O worker.
// Close the Disk to stop the worker.
func New(root string, opts Options) (*Disk, error) {
	if opts.Post == nil {
		return nil, errors.New("diskio: Options.Post is required: Sync completions reach the event loop through it")
	}
	var rootFd int
	err := ignoringEINTR(func() (err error) {
		rootFd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, wrapErr("open root", root, err)
	}
	d := &Disk{root: root, rootFd: rootFd, fdatasync: unix.Fdatasync, exited: make(chan struct{})}
	d.worker = newWorker(opts.Post, d.syncFile, d.syncDir, func() { unix.Close(rootFd); close(d.exited) })
	queuedBytesMax := opts.WriteQueueBytesMax
	if queuedBytesMax <= 0 {
		queuedBytesMax = WriteQueueBytesMaxDefault
	}
	d.writer = newWriter(queuedBytesMax, unix.Pwritev, func(f *File, done func(error)) {
		if !d.worker.enqueueFile(f, done) {
			d.postClosed(done, closedErr("sync", f.path))
		}
	}, d.worker.stopAfterDrain)
	return d, nil
}

// Root returns the directory the Disk was opened on.
func (d *Disk) Root() string { return d.root }

// Close stops the Disk. It does not wait: the write worker still writes
// every queued append, and the I/O worker still runs every queued Sync and
// SyncDir and posts their completions, then releases the root and exits. Calls on the Disk after Close report env.ErrClosed. Files still
// open keep working for reads and writes; their later Syncs report
// env.ErrClosed.
func (d *Disk) Close() error {
	if d.closed {
		return closedErr("close", d.root)
	}
	d.closed = true
	d.writer.stopAfterDrain() // and then the I/O worker, when the writer has drained
	return nil
}

// Wait blocks until a closed Disk's workers have exited: every queued append
// written, every queued Sync run and its completion posted. A process that
// reopens the directory (a restart in the same process) must wait first, or
// a late queued write could land in the new incarnation's files. Not for use
// on the event loop, which may have to run those completions' posts.
func (d *Disk) Wait() { <-d.exited }

// MkdirAll creates dir and any missing parents. Unlike the other calls, it
// also fsyncs the parent of every directory it creates before returning, so a
// created tree is durable without a SyncDir: directories are created rarely
// (a new partition), and a partition directory that vanishes in a crash after
// its files were synced would lose them all. MkdirAll blocks for those fsyncs.
func (d *Disk) MkdirAll(dir string) error {
	cleaned, err := cleanPath("mkdirall", dir)
	if err != nil {
		return err
	}
	if d.closed {
		return closedErr("mkdirall", dir)
	}
	if cleaned == "." {
		return nil
	}
	parts := strings.Split(cleaned, "/")
	var created []string
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		err := ignoringEINTR(func() error { return unix.Mkdirat(d.rootFd, prefix, 0o755) })
		if err == nil {
			created = append(created, prefix)
			continue
		}
		if err != unix.EEXIST {
			return wrapErr("mkdirall", prefix, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(d.rootFd, prefix, &st, 0); err != nil {
			return wrapErr("mkdirall", prefix, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return wrapErr("mkdirall", prefix, unix.ENOTDIR)
		}
	}
	for _, c := range created {
		if err := d.syncDir(path.Dir(c)); err != nil {
			return err
		}
	}
	return nil
}

// Open opens the file at filePath for reading and writing. Creating a file
// does not fsync its directory: the creation is durable after SyncDir.
func (d *Disk) Open(filePath string, opts env.OpenOptions) (env.File, error) {
	f, err := d.OpenFile(filePath, opts)
	if err != nil {
		// Not f: a nil *File in an env.File is not a nil interface, and
		// callers that close "whatever Open returned" would crash on it.
		return nil, err
	}
	return f, nil
}

// OpenFile is Open returning the concrete *File, for callers that need Fd.
func (d *Disk) OpenFile(filePath string, opts env.OpenOptions) (*File, error) {
	cleaned, err := cleanFilePath("open", filePath)
	if err != nil {
		return nil, err
	}
	if err := checkOpenOptions(filePath, opts); err != nil {
		return nil, err
	}
	if d.closed {
		return nil, closedErr("open", filePath)
	}
	flags := unix.O_RDWR | unix.O_CLOEXEC
	if opts.Create {
		flags |= unix.O_CREAT
		if opts.Exclusive {
			flags |= unix.O_EXCL
		}
	}
	var fd int
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.rootFd, cleaned, flags, 0o644)
		return err
	})
	if err != nil {
		return nil, wrapErr("open", filePath, err)
	}
	f, err := newFile(d, filePath, fd, opts)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return f, nil
}

// checkOpenOptions rejects options that make no sense, naming the field.
func checkOpenOptions(filePath string, opts env.OpenOptions) error {
	if opts.Exclusive && !opts.Create {
		return fmt.Errorf("diskio: open %s: OpenOptions.Exclusive needs Create", filePath)
	}
	if opts.MappedBytesMax < 0 {
		return fmt.Errorf("diskio: open %s: OpenOptions.MappedBytesMax is %d, must be >= 0", filePath, opts.MappedBytesMax)
	}
	if opts.PreallocateBytes < 0 {
		return fmt.Errorf("diskio: open %s: OpenOptions.PreallocateBytes is %d, must be >= 0", filePath, opts.PreallocateBytes)
	}
	return nil
}

// List returns the names of the entries of dir, sorted bytewise, without "."
// and "..".
func (d *Disk) List(dir string) ([]string, error) {
	cleaned, err := cleanPath("list", dir)
	if err != nil {
		return nil, err
	}
	if d.closed {
		return nil, closedErr("list", dir)
	}
	fd, err := d.openDir(cleaned)
	if err != nil {
		return nil, wrapErr("list", dir, err)
	}
	defer unix.Close(fd)
	names := []string{}
	buf := make([]byte, listBufferBytes)
	for {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Getdents(fd, buf)
			return err
		})
		if err != nil {
			return nil, wrapErr("list", dir, err)
		}
		if n == 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	slices.Sort(names)
	return names, nil
}

// Rename atomically replaces newPath with oldPath. It does not fsync the
// directory: the rename is durable after SyncDir.
func (d *Disk) Rename(oldPath, newPath string) error {
	oldCleaned, err := cleanFilePath("rename", oldPath)
	if err != nil {
		return err
	}
	newCleaned, err := cleanFilePath("rename", newPath)
	if err != nil {
		return err
	}
	if d.closed {
		return closedErr("rename", oldPath)
	}
	err = ignoringEINTR(func() error { return unix.Renameat(d.rootFd, oldCleaned, d.rootFd, newCleaned) })
	if err != nil {
		return wrapErr("rename", oldPath+" -> "+newPath, err)
	}
	return nil
}

// Remove deletes a file or an empty directory. It does not fsync the
// directory: the removal is durable after SyncDir.
func (d *Disk) Remove(filePath string) error {
	cleaned, err := cleanFilePath("remove", filePath)
	if err != nil {
		return err
	}
	if d.closed {
		return closedErr("remove", filePath)
	}
	err = ignoringEINTR(func() error { return unix.Unlinkat(d.rootFd, cleaned, 0) })
	if err == unix.EISDIR {
		err = ignoringEINTR(func() error { return unix.Unlinkat(d.rootFd, cleaned, unix.AT_REMOVEDIR) })
	}
	if err != nil {
		return wrapErr("remove", filePath, err)
	}
	return nil
}

// SyncDir fsyncs dir on the I/O worker, then posts done with the outcome. It
// never blocks on the fsync, and never calls done before returning. A
// directory whose fsync failed is never fsynced again (env.ErrIO).
func (d *Disk) SyncDir(dir string, done func(error)) {
	cleaned, err := cleanPath("syncdir", dir)
	switch {
	case d.closed:
		d.postClosed(done, closedErr("syncdir", dir))
	case err != nil:
		d.enqueueFailure(done, err)
	case !d.worker.enqueueDir(cleaned, done):
		d.postClosed(done, closedErr("syncdir", dir))
	}
}

// enqueueFailure reports err to done through the worker, in order.
func (d *Disk) enqueueFailure(done func(error), err error) {
	if !d.worker.enqueueFailure(done, err) {
		d.postClosed(done, err)
	}
}

// postClosed reports err once the worker is gone (the Disk is closed). It
// posts from a fresh goroutine so that a Sync called on the event loop never
// blocks on posting to that same loop.
func (d *Disk) postClosed(done func(error), err error) {
	post := d.worker.post
	go post(func() { done(err) })
}

// openDir opens a directory under the root for reading.
func (d *Disk) openDir(cleaned string) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.rootFd, cleaned, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// syncDir fsyncs a directory, on whichever goroutine calls it.
func (d *Disk) syncDir(cleaned string) error {
	fd, err := d.openDir(cleaned)
	if err != nil {
		return wrapErr("syncdir", cleaned, err)
	}
	defer unix.Close(fd)
	if err := ignoringEINTR(func() error { return unix.Fsync(fd) }); err != nil {
		return wrapSyncErr("syncdir", cleaned, err)
	}
	return nil
}

// syncFile fdatasyncs a file; it runs on the I/O worker.
func (d *Disk) syncFile(f *File) error {
	return ignoringEINTR(func() error { return d.fdatasync(f.fd) })
}
