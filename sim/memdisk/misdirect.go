package memdisk

import "fmt"

// misdirection is where a misdirected write lands on the medium: at at in
// target's durable content.
type misdirection struct {
	target *node
	at     int64
}

// MisdirectNextWrite arms the file at p: its next write (Append or
// WriteAt) reaches the medium, when it becomes durable (a Sync covering
// it, Writeback, or a torn crash keeping it), at byte at of the file at to
// (p itself, or another file) instead of where it was written, as a drive
// or controller that writes to the wrong block does. The intended range
// keeps what the medium held there (zeros where the write extended the
// file, whose size still grows), and the bytes at the wrong place are
// overwritten, cut at the end of that file's durable content. The page
// cache is not fooled: reads keep returning what was written until a power
// loss (CrashLoseAll, CrashTorn) brings back what the medium holds. A
// process crash keeping the page cache does not.
func (d *Disk) MisdirectNextWrite(p, to string, at int64) error {
	n, err := d.lookupFile("misdirect", p)
	if err != nil {
		return err
	}
	target, err := d.lookupFile("misdirect", to)
	if err != nil {
		return err
	}
	if at < 0 {
		return fmt.Errorf("memdisk: misdirect %s to %s at %d: %w", p, to, at, errInvalidArg)
	}
	n.misdirectNext = &misdirection{target: target, at: at}
	return nil
}

// applyDurable applies op, leaving pending, to the durable content. A
// misdirected write changes only the file's size here, and writes its
// bytes into its target's durable content: the medium and the page cache
// of both files then differ (diverged).
func (f *fileNode) applyDurable(op fileOp) {
	if op.misdirect == nil {
		f.durable = applyFileOp(f.durable, op)
		return
	}
	if end := op.offset + int64(len(op.data)); end > int64(len(f.durable)) {
		f.durable = resize(f.durable, end)
	}
	f.diverged = true
	t := op.misdirect.target.file
	t.unprefix()
	t.diverged = true
	if at := op.misdirect.at; at < int64(len(t.durable)) {
		copy(t.durable[at:], op.data)
	}
}

// reveal makes what the medium holds what reads return: a power loss
// emptied the page cache.
func (f *fileNode) reveal() {
	if !f.diverged {
		return
	}
	f.current = append(f.current[:0:0], f.durable...)
	f.diverged = false
}
