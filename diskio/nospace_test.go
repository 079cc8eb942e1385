package diskio

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// TestAppendOnAFullDeviceIsErrNoSpace fills a 64 KiB tmpfs. Mounting needs
// root (CAP_SYS_ADMIN); without it the test skips, and the faulty package's
// tests cover ENOSPC by injection.
func TestAppendOnAFullDeviceIsErrNoSpace(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs (%v); ENOSPC is covered by diskio/faulty", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	loop := newTestLoop()
	d, err := New(dir, Options{Post: loop.post})
	mustNil(t, err)
	defer d.Close()
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()

	const chunkBytes = 10_000 // not a multiple of the page size: the last write tears
	chunk := bytes.Repeat([]byte{0xab}, chunkBytes)
	var appendErr error
	attempted := int64(0)
	for attempted < 1<<20 && appendErr == nil {
		appendErr = f.Append(chunk)
		attempted += chunkBytes
	}
	if appendErr == nil {
		// Appends are queued: the failed write may not have been reported
		// by an Append yet, but it is by the wait for it.
		appendErr = f.WaitWritten(attempted)
	}
	if !errors.Is(appendErr, env.ErrNoSpace) || !errors.Is(appendErr, unix.ENOSPC) {
		t.Fatalf("appending past 64 KiB: got %v, want env.ErrNoSpace wrapping ENOSPC", appendErr)
	}
	var st unix.Stat_t
	mustNil(t, unix.Fstat(f.Fd(), &st))
	if f.Size() != st.Size {
		t.Errorf("Size() = %d but the file holds %d bytes: a partial write was not counted", f.Size(), st.Size)
	}
	if f.Size() >= attempted {
		t.Errorf("Size() = %d after a failed append, want less than the %d bytes attempted", f.Size(), attempted)
	}
	t.Logf("device full at %d bytes; error: %v", f.Size(), appendErr)
	got := make([]byte, f.Size())
	if _, err := f.ReadAt(got, 0); err != nil || bytes.Count(got, []byte{0xab}) != len(got) {
		t.Errorf("bytes written before ENOSPC do not read back (err %v)", err)
	}
}
