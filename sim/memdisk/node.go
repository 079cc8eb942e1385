package memdisk

import (
	"fmt"
	"sort"
)

// node is one file or directory. Directory entries and open handles point at
// nodes, not paths, so that a removed or renamed file stays usable through
// its handles, as on POSIX.
type node struct {
	file *fileNode // nil for a directory
	dir  *dirNode  // nil for a file

	// failNextSync makes the next Sync (file) or SyncDir (directory) fail.
	failNextSync bool
	// readFaults make reads of parts of a file fail (FailReads).
	readFaults []readFault
	// misdirectNext, when set, is where the file's next write lands on
	// the medium (MisdirectNextWrite).
	misdirectNext *misdirection
	// links counts the node's entries in the current view of directories
	// (more than one only after a crash tore a rename across directories).
	// With openHandles it decides whether the file's bytes count against the
	// disk's capacity.
	links       int
	openHandles int
}

func (n *node) isDir() bool { return n.dir != nil }

// alive says the node still occupies space: it is reachable by name or
// through an open handle.
func (n *node) alive() bool { return n.links > 0 || n.openHandles > 0 }

// fileOp is one unsynced change to a file: a write of data at offset, or,
// when truncate is set, a truncate to size.
type fileOp struct {
	seq      uint64
	truncate bool
	offset   int64
	// data is owned by the fileOp and never aliases current or durable.
	// While the file is in prefix form (fileNode.prefix) it is nil: the
	// append's bytes are current[offset:offset+size].
	data []byte
	size int64
	// misdirect, when set, is where the write lands on the medium
	// (MisdirectNextWrite); never in prefix form.
	misdirect *misdirection
}

// writeBytes is the length of a write.
func (op fileOp) writeBytes(prefix bool) int64 {
	if prefix {
		return op.size
	}
	return int64(len(op.data))
}

// fileNode holds a file's two views. Invariant: applying pending, in order,
// to a copy of durable gives current, unless a misdirected write (or one
// landing here) made the medium differ from the page cache: then the file
// is diverged until a power loss brings the medium's content back.
//
// A file whose pending changes are all appends (a log segment, an index:
// nearly every file the core writes) is kept in prefix form: the durable
// content is current[:durableLen] and is not stored apart, so a write
// copies its bytes once, a Sync copies nothing, and a crash cuts current
// back. Any other change first gives the file its separate durable copy
// (unprefix); a file whose changes are all durable again returns to prefix
// form. Outside prefix form current and durable never share memory.
type fileNode struct {
	current []byte
	// prefix: the file is in prefix form; durable is nil and durableLen
	// is the durable content's length. Every pending change is then an
	// append, the first at durableLen, each following the one before.
	prefix     bool
	durableLen int64
	durable    []byte
	pending    []fileOp
	// diverged: a misdirected write made durable differ from what
	// applying pending to it gives; never in prefix form.
	diverged bool
	// nextSeq numbers changes, so that a Sync can name the changes it covers
	// even if others are made durable or dropped before it completes.
	nextSeq uint64
}

// durableBytes returns the durable content's length.
func (f *fileNode) durableBytes() int64 {
	if f.prefix {
		return f.durableLen
	}
	return int64(len(f.durable))
}

// record applies op to current and appends it to pending. op.data is the
// caller's: record keeps a copy.
func (f *fileNode) record(op fileOp) {
	op.seq = f.nextSeq
	f.nextSeq++
	isAppend := !op.truncate && len(op.data) > 0 && op.offset == int64(len(f.current))
	if f.prefix && isAppend {
		f.current = append(f.current, op.data...)
		op.data, op.size = nil, int64(len(op.data))
		f.pending = append(f.pending, op)
		return
	}
	f.unprefix()
	if !op.truncate {
		op.data = append([]byte(nil), op.data...)
	}
	f.current = applyFileOp(f.current, op)
	f.pending = append(f.pending, op)
}

// unprefix gives a file in prefix form its separate durable content, and
// its pending appends their own copies of their bytes, as current holds
// them now (a FlipBit may have changed them since they were written).
func (f *fileNode) unprefix() {
	if !f.prefix {
		return
	}
	f.durable = append([]byte(nil), f.current[:f.durableLen]...)
	for i := range f.pending {
		op := &f.pending[i]
		op.data, op.size = append([]byte(nil), f.current[op.offset:op.offset+op.size]...), 0
	}
	f.prefix, f.durableLen = false, 0
}

// reprefix puts a file without pending changes back in prefix form: its
// current and durable content are then equal, and current is kept.
func (f *fileNode) reprefix() {
	if f.prefix || len(f.pending) > 0 || f.diverged {
		return
	}
	f.prefix, f.durableLen, f.durable = true, int64(len(f.current)), nil
}

// makeDurable applies to durable the pending changes numbered up to and
// including lastSeq, and removes them from pending.
func (f *fileNode) makeDurable(lastSeq uint64) {
	kept := 0
	for kept < len(f.pending) && f.pending[kept].seq <= lastSeq {
		op := f.pending[kept]
		if f.prefix {
			f.durableLen = op.offset + op.size
		} else {
			f.applyDurable(op)
		}
		kept++
	}
	if kept == 0 {
		return
	}
	n := copy(f.pending, f.pending[kept:])
	clear(f.pending[n:])
	f.pending = f.pending[:n]
	f.reprefix()
}

// lastSeq names the newest change, for a Sync to snapshot. When nothing was
// ever written it is one below the first change number, which covers nothing.
func (f *fileNode) lastSeq() uint64 { return f.nextSeq - 1 }

// applyFileOp returns buf with op applied. buf may be grown in place.
func applyFileOp(buf []byte, op fileOp) []byte {
	if op.truncate {
		return resize(buf, op.size)
	}
	if len(op.data) == 0 {
		// A zero-length pwrite does not extend a file.
		return buf
	}
	if op.offset == int64(len(buf)) {
		return append(buf, op.data...) // an append: the simulator's hot path
	}
	end := op.offset + int64(len(op.data))
	if end > int64(len(buf)) {
		buf = resize(buf, end)
	}
	copy(buf[op.offset:], op.data)
	return buf
}

// resize cuts buf to size or extends it with zeros.
func resize(buf []byte, size int64) []byte {
	if size <= int64(len(buf)) {
		return buf[:size]
	}
	return append(buf, make([]byte, size-int64(len(buf)))...)
}

// dirOp is one unsynced entry change: name now refers to target, or is
// removed when target is nil; when from is set, the entry from is removed in
// the same change (a rename within the directory, atomic).
type dirOp struct {
	seq    uint64
	name   string
	target *node
	from   string
}

// dirNode holds a directory's two views of its entries. Invariant: applying
// pending, in order, to a copy of durable gives current.
type dirNode struct {
	current map[string]*node
	durable map[string]*node
	pending []dirOp
	nextSeq uint64
}

func newDirNode() *node {
	return &node{dir: &dirNode{
		current: map[string]*node{},
		durable: map[string]*node{},
		nextSeq: 1,
	}}
}

func newFileNode() *node {
	return &node{file: &fileNode{nextSeq: 1, prefix: true}}
}

// record applies op to current and appends it to pending.
func (d *dirNode) record(op dirOp) {
	op.seq = d.nextSeq
	d.nextSeq++
	applyDirOp(d.current, op)
	d.pending = append(d.pending, op)
}

func (d *dirNode) makeDurable(lastSeq uint64) {
	kept := 0
	for kept < len(d.pending) && d.pending[kept].seq <= lastSeq {
		applyDirOp(d.durable, d.pending[kept])
		kept++
	}
	d.pending = append([]dirOp(nil), d.pending[kept:]...)
}

func (d *dirNode) lastSeq() uint64 { return d.nextSeq - 1 }

func applyDirOp(entries map[string]*node, op dirOp) {
	if op.from != "" {
		delete(entries, op.from)
	}
	if op.target == nil {
		delete(entries, op.name)
		return
	}
	entries[op.name] = op.target
}

// sortedNames returns the keys of entries in bytewise order.
func sortedNames(entries map[string]*node) []string {
	names := make([]string, 0, len(entries))
	for name := range entries { // order-independent: sorted below
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func cloneEntries(entries map[string]*node) map[string]*node {
	out := make(map[string]*node, len(entries))
	for name, n := range entries { // order-independent: builds a map
		out[name] = n
	}
	return out
}

func (op fileOp) String() string {
	if op.truncate {
		return fmt.Sprintf("truncate(%d)", op.size)
	}
	return fmt.Sprintf("write(%d+%d)", op.offset, len(op.data))
}
