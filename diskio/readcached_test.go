package diskio

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// TestReadCachedAtReadsOnlyMemory: ReadCachedAt serves queued appends and
// pages in the page cache, and declines (false, no error) bytes past the
// logical size and bytes whose pages were dropped from the cache, which only
// a disk read could bring back.
func TestReadCachedAtReadsOnlyMemory(t *testing.T) {
	d, loop := newTestDisk(t)
	f := mustOpen(t, d, "segment.log", env.OpenOptions{Create: true})
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	if err := f.Append(data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	// Queued or just written: in memory either way.
	if ok, err := f.ReadCachedAt(got, 4096); err != nil || !ok || !bytes.Equal(got, data[4096:8192]) {
		t.Fatalf("fresh bytes: cached %v, err %v, equal %v; want true, nil, true", ok, err, bytes.Equal(got, data[4096:8192]))
	}
	if ok, err := f.ReadCachedAt(got, int64(len(data))-100); err != nil || ok {
		t.Fatalf("bytes past the logical size: cached %v, err %v; want false, nil", ok, err)
	}
	if err := syncAndWait(t, loop, f.Sync); err != nil { // clean pages can be dropped
		t.Fatal(err)
	}
	// Several rounds: a read with RWF_NOWAIT alone starts readahead and
	// succeeds when the disk answers in time, about one round in three here.
	for round := range 8 {
		dropFromPageCache(t, f.Fd(), len(data))
		ok, err := f.ReadCachedAt(got, int64(512<<10+round*8192))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatalf("round %d: bytes dropped from the page cache (FADV_DONTNEED after a Sync, checked with mincore) reported as in memory", round)
		}
	}
	// ReadAt still reads them (from the disk), and then they are cached.
	if _, err := f.ReadAt(got, 512<<10); err != nil || !bytes.Equal(got, data[512<<10:512<<10+4096]) {
		t.Fatalf("ReadAt of dropped pages: %v", err)
	}
	if ok, err := f.ReadCachedAt(got, 512<<10); err != nil || !ok {
		t.Fatalf("after ReadAt brought them back: cached %v, err %v; want true, nil", ok, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadCachedAt(got, 0); err == nil {
		t.Fatal("ReadCachedAt on a closed file: no error")
	}
}

// dropFromPageCache asks the kernel to drop the clean pages of the first
// size bytes of fd and checks with mincore that it did. Where they stay (a
// tmpfs, or an overlay whose upper layer is one, keeps them), the test skips:
// the eviction it is about cannot happen there.
func dropFromPageCache(t *testing.T, fd, size int) {
	t.Helper()
	if err := unix.Fadvise(fd, 0, int64(size), unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	mapped, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mapping the file to look at its pages: %v", err)
	}
	defer unix.Munmap(mapped)
	resident := make([]byte, (size+unix.Getpagesize()-1)/unix.Getpagesize())
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mapped[0])), uintptr(size), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for page, r := range resident {
		if r&1 != 0 {
			var fs unix.Statfs_t
			_ = unix.Fstatfs(fd, &fs)
			t.Skipf("page %d of %d still in the page cache after FADV_DONTNEED (file system type %#x keeps its pages): eviction cannot be exercised here", page, len(resident), fs.Type)
		}
	}
}
