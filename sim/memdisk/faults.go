package memdisk

import "fmt"

// FlipBit corrupts bit (0 is the least significant) of the byte at
// byteOffset of the file at p, as a decaying medium would: in the durable
// content if it holds that byte, in every unsynced write covering it, and
// therefore in the current content too. byteOffset must be below the file's
// current size.
func (d *Disk) FlipBit(p string, byteOffset int64, bit uint) error {
	n, err := d.lookupFile("flipbit", p)
	if err != nil {
		return err
	}
	f := n.file
	if byteOffset < 0 || byteOffset >= int64(len(f.current)) || bit > 7 {
		return fmt.Errorf("memdisk: flipbit %s: byte %d bit %d outside a file of %d bytes: %w",
			p, byteOffset, bit, len(f.current), errInvalidArg)
	}
	mask := byte(1) << bit
	if f.prefix {
		// Every view is a prefix of current, and every byte is stored.
		f.current[byteOffset] ^= mask
		return nil
	}
	want := f.current[byteOffset] ^ mask
	if byteOffset < int64(len(f.durable)) {
		f.durable[byteOffset] ^= mask
	}
	for _, op := range f.pending {
		if !op.truncate && op.offset <= byteOffset && byteOffset < op.offset+int64(len(op.data)) {
			op.data[byteOffset-op.offset] ^= mask
		}
	}
	if f.diverged {
		// Replaying would show the medium where the page cache still
		// holds what was written: corrupt the page cache's byte too.
		f.current[byteOffset] = want
		return nil
	}
	f.current = replayFile(f.durable, f.pending)
	if f.current[byteOffset] != want {
		// The byte is a hole that neither view stores (zeros from an
		// extending write or truncate): corrupt the page cache instead, as
		// an unsynced one-byte write.
		f.record(fileOp{offset: byteOffset, data: []byte{want}})
	}
	return nil
}

// replayFile returns a fresh copy of durable with pending applied.
func replayFile(durable []byte, pending []fileOp) []byte {
	out := append([]byte(nil), durable...)
	for _, op := range pending {
		out = applyFileOp(out, op)
	}
	return out
}

// TruncateFile cuts the file at p to size (or extends it with zeros), and
// makes that its durable state, dropping all unsynced changes: a file
// system that lost the file's tail. Syncs already issued on the file make
// nothing more durable. It ignores SetFull and CapacityBytes.
func (d *Disk) TruncateFile(p string, size int64) error {
	n, err := d.lookupFile("truncatefile", p)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("memdisk: truncatefile %s: negative size %d: %w", p, size, errInvalidArg)
	}
	f := n.file
	if n.alive() {
		d.usedBytes += size - int64(len(f.current))
	}
	f.current = resize(f.current, size)
	f.pending = nil
	f.prefix, f.durable, f.diverged = false, nil, false
	f.reprefix()
	n.truncatedTo(size)
	return nil
}

// SetFull makes every write or truncate that would grow a file fail with
// env.ErrNoSpace while full is set. Writes within a file's size still
// succeed.
func (d *Disk) SetFull(full bool) { d.full = full }

// FailNextSync arms the file or directory at p: its next Sync (or SyncDir)
// completes with env.ErrIO and makes nothing durable. The unsynced changes
// stay pending: a crash may lose them, and only a later successful Sync
// would make them durable (the core never retries; see env.ErrIO).
func (d *Disk) FailNextSync(p string) error {
	n, err := d.lookup("failnextsync", p)
	if err != nil {
		return err
	}
	n.failNextSync = true
	return nil
}

// UsedBytes returns the total current size of all files that have a name or
// an open handle: what CapacityBytes is compared with.
func (d *Disk) UsedBytes() int64 { return d.usedBytes }

// Writeback makes every pending change of every file and directory reachable
// from the root durable, as the kernel's background writeback and journal
// commits eventually do without any fsync. It calls no done callback: Syncs
// already issued still complete as usual. The simulator may call it now and
// then, so that unsynced data is not volatile forever.
func (d *Disk) Writeback() {
	visited := map[*node]bool{}
	var visit func(n *node)
	visit = func(n *node) {
		if visited[n] {
			return
		}
		visited[n] = true
		if !n.isDir() {
			n.file.makeDurable(n.file.lastSeq())
			return
		}
		n.dir.makeDurable(n.dir.lastSeq())
		for _, name := range sortedNames(n.dir.current) {
			visit(n.dir.current[name])
		}
	}
	visit(d.root)
}
