package memdisk

import "fmt"

// ReadFile returns a copy of the current content of the file at p, for
// checkers and tests. It bypasses handles, so it works after a crash.
func (d *Disk) ReadFile(p string) ([]byte, error) {
	n, err := d.lookupFile("readfile", p)
	if err != nil {
		return nil, err
	}
	return append([]byte{}, n.file.current...), nil
}

// Snapshot is ReadFile under the name the simulator's checkers use.
func (d *Disk) Snapshot(p string) ([]byte, error) { return d.ReadFile(p) }

// DurableSize returns the size of the durable content of the file found at p
// in the current view, and false if there is no file there. The file's entry
// itself may not be durable yet: a crash can still remove the file.
func (d *Disk) DurableSize(p string) (int64, bool) {
	n, err := d.lookupFile("durablesize", p)
	if err != nil {
		return 0, false
	}
	return n.file.durableBytes(), true
}

// lookupFile returns the file at p in the current view.
func (d *Disk) lookupFile(op, p string) (*node, error) {
	n, err := d.lookup(op, p)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, fmt.Errorf("memdisk: %s %s: %w", op, p, errIsDir)
	}
	return n, nil
}
