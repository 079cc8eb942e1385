package memdisk

import (
	"fmt"

	"strand/core/env"
)

// readFault makes reads of [offset, end) of a file fail with env.ErrIO.
type readFault struct {
	offset, end int64
	// latent: a latent sector error, failing every read until a write
	// covers the whole range (a drive remaps a bad sector when it is
	// written). Otherwise the fault fails one read and is gone, as a
	// transient error of the device or its path does.
	latent bool
}

// FailReads makes reads of length bytes at offset of the file at p fail
// with env.ErrIO: the next read that touches the range (transient), or
// every read that does until a write covers the whole range (latent, a
// latent sector error). A transient fault is armed on the running process
// and ends at a Crash, as the harness's other armed faults do; a latent
// one is the medium's and survives crashes. Only reads through a handle
// fail: ReadFile, the checkers' view, still sees the bytes.
func (d *Disk) FailReads(p string, offset, length int64, latent bool) error {
	n, err := d.lookupFile("failreads", p)
	if err != nil {
		return err
	}
	if offset < 0 || length <= 0 {
		return fmt.Errorf("memdisk: failreads %s: %d bytes at %d: %w", p, length, offset, errInvalidArg)
	}
	n.readFaults = append(n.readFaults, readFault{offset: offset, end: offset + length, latent: latent})
	return nil
}

// LatentReadErrors reports whether the file at p has a latent sector error.
func (d *Disk) LatentReadErrors(p string) bool {
	n, err := d.lookupFile("latentreaderrors", p)
	if err != nil {
		return false
	}
	for _, rf := range n.readFaults {
		if rf.latent {
			return true
		}
	}
	return false
}

// checkRead fails a read of [offset, offset+length) that touches a read
// fault, removing a transient fault it hits.
func (n *node) checkRead(op, p string, offset, length int64) error {
	for i, rf := range n.readFaults {
		if offset < rf.end && rf.offset < offset+length {
			if !rf.latent {
				n.readFaults = append(n.readFaults[:i], n.readFaults[i+1:]...)
			}
			return fmt.Errorf("memdisk: %s %s: %d bytes at %d: injected read error: %w", op, p, length, offset, env.ErrIO)
		}
	}
	return nil
}

// wroteRange forgets the latent faults a write of [offset, end) covers
// whole: the drive remapped their sectors. A truncation below a fault's
// start drops it too: the sector no longer belongs to the file.
func (n *node) wroteRange(offset, end int64) {
	kept := n.readFaults[:0]
	for _, rf := range n.readFaults {
		if offset <= rf.offset && rf.end <= end {
			continue
		}
		kept = append(kept, rf)
	}
	clear(n.readFaults[len(kept):])
	n.readFaults = kept
}

// truncatedTo drops the read faults wholly at or past size.
func (n *node) truncatedTo(size int64) {
	kept := n.readFaults[:0]
	for _, rf := range n.readFaults {
		if rf.offset < size {
			kept = append(kept, rf)
		}
	}
	clear(n.readFaults[len(kept):])
	n.readFaults = kept
}

// endTransientReadFaults drops the faults armed on the process that
// crashed; latent ones stay with the medium.
func (n *node) endTransientReadFaults() {
	kept := n.readFaults[:0]
	for _, rf := range n.readFaults {
		if rf.latent {
			kept = append(kept, rf)
		}
	}
	clear(n.readFaults[len(kept):])
	n.readFaults = kept
}
