package diskio

import (
	"bytes"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// allocatedBytes is the disk space the file at path holds, and its size.
func allocatedBytes(t *testing.T, path string) (allocated, size int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512, st.Size
}

// appendChunks appends n chunks of chunkBytes, each a distinct pattern, and
// returns everything appended.
func appendChunks(t *testing.T, f *File, n, chunkBytes int) []byte {
	t.Helper()
	var all []byte
	for i := range n {
		chunk := bytes.Repeat([]byte{byte(i + 1)}, chunkBytes)
		if err := f.Append(chunk); err != nil {
			t.Fatal(err)
		}
		all = append(all, chunk...)
	}
	if err := f.WaitWritten(f.Size()); err != nil {
		t.Fatal(err)
	}
	return all
}

// skipWithoutFallocate skips when the test directory's file system cannot
// allocate ahead, where there is nothing to check.
func skipWithoutFallocate(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "probe")
	fd, err := unix.Open(probe, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Skipf("the file system of %s does not preallocate: %v", dir, err)
	}
}

// A file appended past allocateAheadFromBytes holds space past its end while
// it is open, its size and contents unchanged; Close gives that space back.
// Small files and memory-mapped (index) files are never allocated ahead.
func TestAppendsAllocateAheadAndCloseReleases(t *testing.T) {
	d, _ := newTestDisk(t)
	skipWithoutFallocate(t, d.Root())
	const chunkBytes = 64 << 10

	big := mustOpen(t, d, "big", env.OpenOptions{Create: true})
	small := mustOpen(t, d, "small", env.OpenOptions{Create: true})
	mapped := mustOpen(t, d, "mapped", env.OpenOptions{Create: true, MappedBytesMax: 8 << 20})
	want := appendChunks(t, big, 48, chunkBytes) // 3 MiB
	appendChunks(t, small, 4, chunkBytes)
	appendChunks(t, mapped, 32, chunkBytes) // 2 MiB

	allocated, size := allocatedBytes(t, filepath.Join(d.Root(), "big"))
	if size != int64(len(want)) || big.Size() != size {
		t.Fatalf("big: size on disk %d, Size %d, want both %d", size, big.Size(), len(want))
	}
	// Written through WaitWritten, so the writer's last update is seen.
	preallocatedEnd := big.writes.preallocatedEnd
	if preallocatedEnd <= size || preallocatedEnd > size+allocateAheadBytesMax {
		t.Errorf("big: space allocated to %d for %d bytes appended, want past the end by at most %d", preallocatedEnd, size, allocateAheadBytesMax)
	}
	if allocated < preallocatedEnd/4096*4096 || allocated <= size {
		t.Errorf("big: %d bytes allocated on disk for %d appended, but the writer allocated to %d", allocated, size, preallocatedEnd)
	}
	for _, name := range []string{"small", "mapped"} {
		allocated, size := allocatedBytes(t, filepath.Join(d.Root(), name))
		if allocated > size+64<<10 {
			t.Errorf("%s: %d bytes allocated for %d appended: allocated ahead", name, allocated, size)
		}
	}

	got := make([]byte, len(want))
	if _, err := big.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("big: the bytes read back differ from those appended")
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	allocated, size = allocatedBytes(t, filepath.Join(d.Root(), "big"))
	if size != int64(len(want)) {
		t.Fatalf("big after Close: size %d, want %d", size, len(want))
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(d.Root(), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.EXT4_SUPER_MAGIC {
		t.Skipf("releasing the space past the end is checked on ext4 only, here file system type %#x", fs.Type)
	}
	if allocated > (size+4095)/4096*4096 {
		t.Errorf("big after Close: %d bytes allocated for %d, the space allocated ahead was kept", allocated, size)
	}
}

// A Truncate releases the space allocated ahead with the bytes it cuts; the
// appends after it allocate ahead again from the new end and read back.
func TestAllocateAheadAfterTruncate(t *testing.T) {
	d, _ := newTestDisk(t)
	skipWithoutFallocate(t, d.Root())
	f := mustOpen(t, d, "log", env.OpenOptions{Create: true})
	appendChunks(t, f, 32, 64<<10) // 2 MiB
	if err := f.Truncate(512 << 10); err != nil {
		t.Fatal(err)
	}
	if f.writes.preallocatedEnd != 512<<10 {
		t.Errorf("after Truncate to %d, preallocatedEnd %d", 512<<10, f.writes.preallocatedEnd)
	}
	tail := appendChunks(t, f, 32, 64<<10)
	allocated, size := allocatedBytes(t, filepath.Join(d.Root(), "log"))
	// The last write may end exactly where an earlier allocation did (which
	// runs the writer formed decides), so "up to the end" is all that holds.
	if size != 512<<10+int64(len(tail)) || f.writes.preallocatedEnd < size || allocated < f.writes.preallocatedEnd/4096*4096 {
		t.Errorf("after appending past the truncation: size %d, %d bytes allocated, space allocated to %d; want size %d and space allocated up to it at least",
			size, allocated, f.writes.preallocatedEnd, 512<<10+len(tail))
	}
	got := make([]byte, len(tail))
	if _, err := f.ReadAt(got, 512<<10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, tail) {
		t.Fatal("the bytes appended after the truncation read back differently")
	}
}

// A file system that refuses to allocate ahead (no space, no support) costs
// nothing but the attempt: the appends are written, and the writer stops
// asking for that file.
func TestAllocateAheadRefusedLeavesAppendsAlone(t *testing.T) {
	d, loop := newTestDisk(t)
	calls := 0
	d.writer.fallocate = func(fd int, off, length int64) error {
		calls++
		return unix.ENOSPC
	}
	f := mustOpen(t, d, "log", env.OpenOptions{Create: true})
	want := appendChunks(t, f, 48, 64<<10)
	if err := syncAndWait(t, loop, f.Sync); err != nil {
		t.Fatalf("Sync after a refused preallocation: %v", err)
	}
	if calls != 1 {
		t.Errorf("%d fallocate calls after the file system refused the first, want 1", calls)
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read back differ from those appended")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
