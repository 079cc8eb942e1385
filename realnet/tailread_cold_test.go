package realnet

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
	"strand/diskio"
)

// TestColdTailOfAGrowingFileIsLeftToTheWriter: the 10 s rule looks at the
// file's last append, not at the age of the bytes a region covers, so a slow
// partition's segment can qualify with a tail long gone from the page cache.
// Such a region is read by the connection's writer, never on the loop, where
// a disk read would stall every connection; the fresh bytes just appended
// still are read on the loop.
func TestColdTailOfAGrowingFileIsLeftToTheWriter(t *testing.T) {
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	old := bytes.Repeat([]byte("o"), 200<<10)
	file, closeDisk := appendedFile(t, loop, old)
	defer closeDisk()
	synced := make(chan error, 1)
	loop.Call(func() { file.Sync(func(err error) { synced <- err }) })
	if err := <-synced; err != nil { // clean pages can be dropped
		t.Fatal(err)
	}
	fd := file.(*diskio.File).Fd()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("tmpfs keeps its pages (statfs err %v): eviction cannot be exercised", err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	loop.Call(func() {
		if err := file.Append([]byte("new")); err != nil {
			t.Error(err)
		}
	})
	read := func(position, bytes int64) bool {
		frame := env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("hdr")}, {Region: env.FileRegion{File: file, Position: position, Bytes: bytes}}}}
		var ok bool
		loop.Call(func() {
			var buf *frameBuf
			_, buf, ok = readTailOnLoop(frame)
			recycleTailRead(buf)
		})
		return ok
	}
	if read(0, int64(len(old))) {
		t.Fatal("a region whose pages left the page cache was read on the loop")
	}
	if !read(int64(len(old)), 3) {
		t.Fatal("the bytes just appended were not read on the loop")
	}
}
