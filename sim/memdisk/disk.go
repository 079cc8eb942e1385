package memdisk

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"strand/core/env"
)

// Errors for misuse that has no env sentinel. They are wrapped with the
// operation and path like the others.
var (
	errInvalidPath = errors.New("invalid path")
	errNotDir      = errors.New("not a directory")
	errIsDir       = errors.New("is a directory")
	errNotEmpty    = errors.New("directory not empty")
	errInvalidArg  = errors.New("invalid argument")
)

// Options configures a Disk.
type Options struct {
	// Post, when non-nil, is how Sync/SyncDir completions are scheduled:
	// memdisk calls Post(fn) and the simulator runs fn later on the node's
	// event loop. When nil, completions queue inside the Disk and run on
	// RunPending().
	Post func(fn func())
	// CapacityBytes > 0 makes writes that would grow total stored bytes past
	// it fail with env.ErrNoSpace. Stored bytes are the current sizes of all
	// files that have a name or an open handle.
	CapacityBytes int64
	// DeferAppendErrors makes a failing Append return nil and fail its
	// handle for good, so that the next call reports the error: the form
	// diskio's write worker reports it in (SPEC.md §2.3). Otherwise the
	// Append itself fails.
	DeferAppendErrors bool
}

// Disk is a simulated env.Disk. See the package comment for what survives a
// crash. It is single-threaded, like the simulator that drives it.
type Disk struct {
	opts Options
	root *node
	// epoch counts crashes. Handles and completions carry the epoch they
	// were made in, and are dead once it has moved on.
	epoch uint64
	// queued holds completions when opts.Post is nil, oldest first.
	queued []func()
	// usedBytes is the sum of the current sizes of all alive files.
	usedBytes int64
	full      bool
}

var _ env.Disk = (*Disk)(nil)

// New returns an empty disk: a root directory and nothing else, all durable.
func New(opts Options) *Disk {
	root := newDirNode()
	root.links = 1 // the root is never unlinked
	return &Disk{opts: opts, root: root}
}

// RunPending runs the completions queued when Options.Post is nil, oldest
// first, and returns how many ran. Completions queued while it runs (a done
// callback that syncs again) wait for the next call, so that a callback that
// always re-syncs cannot loop forever.
func (d *Disk) RunPending() int {
	batch := d.queued
	d.queued = nil
	for _, fn := range batch {
		fn()
	}
	return len(batch)
}

// schedule arranges for fn to run later as a completion of the current
// epoch: it is silently dropped if the disk crashes first.
func (d *Disk) schedule(fn func()) {
	epoch := d.epoch
	guarded := func() {
		if d.epoch != epoch {
			return
		}
		fn()
	}
	if d.opts.Post != nil {
		d.opts.Post(guarded)
		return
	}
	d.queued = append(d.queued, guarded)
}

// completeWith schedules done(err), if done is non-nil.
func (d *Disk) completeWith(done func(error), err error) {
	if done == nil {
		return
	}
	d.schedule(func() { done(err) })
}

// splitPath returns p's components; the root ("" or ".") has none. Paths
// must already be clean and relative, so that callers never rely on a
// normalization the real disk might do differently.
func splitPath(op, p string) ([]string, error) {
	if p == "" || p == "." {
		return nil, nil
	}
	if path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return nil, fmt.Errorf("memdisk: %s %q: %w", op, p, errInvalidPath)
	}
	return strings.Split(p, "/"), nil
}

// lookup returns the node at p in the current view.
func (d *Disk) lookup(op, p string) (*node, error) {
	parts, err := splitPath(op, p)
	if err != nil {
		return nil, err
	}
	n := d.root
	for _, part := range parts {
		if !n.isDir() {
			return nil, fmt.Errorf("memdisk: %s %s: %w", op, p, errNotDir)
		}
		child, ok := n.dir.current[part]
		if !ok {
			return nil, fmt.Errorf("memdisk: %s %s: %w", op, p, env.ErrNotExist)
		}
		n = child
	}
	return n, nil
}

// lookupParent returns the directory that holds p's entry and the entry's
// name. The entry itself need not exist.
func (d *Disk) lookupParent(op, p string) (*node, string, error) {
	parts, err := splitPath(op, p)
	if err != nil {
		return nil, "", err
	}
	if len(parts) == 0 {
		return nil, "", fmt.Errorf("memdisk: %s %q: the root has no parent: %w", op, p, errInvalidPath)
	}
	parent, err := d.lookup(op, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !parent.isDir() {
		return nil, "", fmt.Errorf("memdisk: %s %s: %w", op, p, errNotDir)
	}
	return parent, parts[len(parts)-1], nil
}

// link records in dir that name now refers to target, replacing (and
// unlinking) whatever it referred to.
func (d *Disk) link(dir *node, name string, target *node) {
	if old, ok := dir.dir.current[name]; ok {
		d.addLinks(old, -1)
	}
	dir.dir.record(dirOp{name: name, target: target})
	d.addLinks(target, 1)
}

// addLinks changes n's count of entries by delta and updates the disk's
// usage.
func (d *Disk) addLinks(n *node, delta int) {
	wasAlive := n.alive()
	n.links += delta
	if n.links < 0 {
		panic(fmt.Sprintf("memdisk: node unlinked more often than linked (%d links)", n.links))
	}
	d.accountAliveChange(n, wasAlive)
}

// accountAliveChange adds or removes n's bytes from usedBytes when n has
// become alive or dead.
func (d *Disk) accountAliveChange(n *node, wasAlive bool) {
	if n.file == nil || wasAlive == n.alive() {
		return
	}
	size := int64(len(n.file.current))
	if n.alive() {
		d.usedBytes += size
	} else {
		d.usedBytes -= size
	}
}

// MkdirAll creates dir and any missing parents. Each new directory is an
// entry change of its parent, durable after SyncDir on the parent.
func (d *Disk) MkdirAll(dir string) error {
	parts, err := splitPath("mkdir", dir)
	if err != nil {
		return err
	}
	n := d.root
	for i, part := range parts {
		child, ok := n.dir.current[part]
		if !ok {
			child = newDirNode()
			d.link(n, part, child)
		}
		if !child.isDir() {
			return fmt.Errorf("memdisk: mkdir %s: %s: %w", dir, strings.Join(parts[:i+1], "/"), errNotDir)
		}
		n = child
	}
	return nil
}

// Open opens the file at p. With opts.Create it creates a missing file, an
// entry change of its directory that is durable after SyncDir on it.
func (d *Disk) Open(p string, opts env.OpenOptions) (env.File, error) {
	parent, name, err := d.lookupParent("open", p)
	if err != nil {
		return nil, err
	}
	n, exists := parent.dir.current[name]
	switch {
	case exists && n.isDir():
		return nil, fmt.Errorf("memdisk: open %s: %w", p, errIsDir)
	case exists && opts.Create && opts.Exclusive:
		return nil, fmt.Errorf("memdisk: open %s: %w", p, env.ErrExist)
	case !exists && !opts.Create:
		return nil, fmt.Errorf("memdisk: open %s: %w", p, env.ErrNotExist)
	case !exists:
		n = newFileNode()
		d.link(parent, name, n)
	}
	wasAlive := n.alive()
	n.openHandles++
	d.accountAliveChange(n, wasAlive)
	return &File{disk: d, node: n, path: p, epoch: d.epoch}, nil
}

// List returns the names of dir's current entries, sorted bytewise.
func (d *Disk) List(dir string) ([]string, error) {
	n, err := d.lookup("list", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, fmt.Errorf("memdisk: list %s: %w", dir, errNotDir)
	}
	return sortedNames(n.dir.current), nil
}

// Rename atomically replaces newPath with oldPath. Within one directory it is
// a single entry change; across directories it is a removal and an addition,
// each durable after SyncDir on its own directory (see the package comment).
// A directory may replace only an empty directory, a file only a file.
func (d *Disk) Rename(oldPath, newPath string) error {
	oldParent, oldName, err := d.lookupParent("rename", oldPath)
	if err != nil {
		return err
	}
	moving, ok := oldParent.dir.current[oldName]
	if !ok {
		return fmt.Errorf("memdisk: rename %s: %w", oldPath, env.ErrNotExist)
	}
	newParent, newName, err := d.lookupParent("rename", newPath)
	if err != nil {
		return err
	}
	if moving.isDir() && d.isUnder(newParent, moving) {
		return fmt.Errorf("memdisk: rename %s to its own subdirectory %s: %w", oldPath, newPath, errInvalidArg)
	}
	replaced, exists := newParent.dir.current[newName]
	if exists {
		if replaced == moving {
			return nil
		}
		if err := checkReplaceable(moving, replaced, newPath); err != nil {
			return err
		}
		d.addLinks(replaced, -1)
	}
	if oldParent == newParent {
		oldParent.dir.record(dirOp{name: newName, target: moving, from: oldName})
		return nil
	}
	oldParent.dir.record(dirOp{name: oldName})
	newParent.dir.record(dirOp{name: newName, target: moving})
	return nil
}

func checkReplaceable(moving, replaced *node, newPath string) error {
	switch {
	case moving.isDir() && !replaced.isDir():
		return fmt.Errorf("memdisk: rename onto %s: %w", newPath, errNotDir)
	case !moving.isDir() && replaced.isDir():
		return fmt.Errorf("memdisk: rename onto %s: %w", newPath, errIsDir)
	case replaced.isDir() && len(replaced.dir.current) > 0:
		return fmt.Errorf("memdisk: rename onto %s: %w", newPath, errNotEmpty)
	}
	return nil
}

// isUnder says whether n is ancestor or lies below it in the current view.
func (d *Disk) isUnder(n, ancestor *node) bool {
	if n == ancestor {
		return true
	}
	for _, child := range ancestor.dir.current { // order-independent: a yes/no search
		if child.isDir() && d.isUnder(n, child) {
			return true
		}
	}
	return false
}

// Remove deletes a file or an empty directory, an entry change durable after
// SyncDir on its directory. Open handles onto a removed file keep working.
func (d *Disk) Remove(p string) error {
	parent, name, err := d.lookupParent("remove", p)
	if err != nil {
		return err
	}
	n, ok := parent.dir.current[name]
	if !ok {
		return fmt.Errorf("memdisk: remove %s: %w", p, env.ErrNotExist)
	}
	if n.isDir() && len(n.dir.current) > 0 {
		return fmt.Errorf("memdisk: remove %s: %w", p, errNotEmpty)
	}
	parent.dir.record(dirOp{name: name})
	d.addLinks(n, -1)
	return nil
}

// SyncDir snapshots dir's entry changes made so far and makes them durable
// when its completion runs; see the package comment.
func (d *Disk) SyncDir(dir string, done func(error)) {
	n, err := d.lookup("syncdir", dir)
	if err == nil && !n.isDir() {
		err = fmt.Errorf("memdisk: syncdir %s: %w", dir, errNotDir)
	}
	if err != nil {
		d.completeWith(done, err)
		return
	}
	if n.failNextSync {
		n.failNextSync = false
		d.completeWith(done, fmt.Errorf("memdisk: syncdir %s: injected failure: %w", dir, env.ErrIO))
		return
	}
	lastSeq := n.dir.lastSeq()
	d.schedule(func() {
		n.dir.makeDurable(lastSeq)
		if done != nil {
			done(nil)
		}
	})
}
