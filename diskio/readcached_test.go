package diskio

import (
	"bytes"
	"testing"

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
	if err := unix.Fadvise(f.Fd(), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	ok, err := f.ReadCachedAt(got, 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(f.Fd(), &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
			t.Skip("tmpfs keeps its pages after FADV_DONTNEED: eviction not exercised")
		}
		t.Fatal("bytes dropped from the page cache (FADV_DONTNEED after a Sync) reported as in memory")
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
