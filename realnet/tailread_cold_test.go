package realnet

import (
	"bytes"
	"testing"

	"strand/core/env"
	"strand/diskio"
)

// TestColdTailOfAGrowingFileIsLeftToTheWriter: the 10 s rule looks at the
// file's last append, not at the age of the bytes a region covers, so a slow
// partition's segment can qualify with a tail long gone from the page cache.
// Such a region is read by the connection's writer, never on the loop, where
// a disk read would stall every connection; the fresh bytes just appended
// still are read on the loop. Which bytes are in memory is the file's answer
// (diskio's TestReadCachedAtReadsOnlyMemory checks that one against the page
// cache); here a file declares its first bytes cold, so that the loop's
// decision is checked the same on every file system.
func TestColdTailOfAGrowingFileIsLeftToTheWriter(t *testing.T) {
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	old := bytes.Repeat([]byte("o"), 200<<10)
	appended, closeDisk := appendedFile(t, loop, old)
	defer closeDisk()
	file := coldBelow{File: appended.(*diskio.File), coldEnd: int64(len(old))}
	loop.Call(func() {
		if err := file.Append([]byte("new")); err != nil {
			t.Error(err)
		}
	})
	read := func(position, bytes int64) (cached bool, got []byte) {
		frame := env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("hdr")}, {Region: env.FileRegion{File: file, Position: position, Bytes: bytes}}}}
		loop.Call(func() {
			read, buf, ok := readTailOnLoop(frame)
			cached = ok
			if ok {
				for _, piece := range read.Pieces {
					got = append(got, piece.Bytes...)
				}
			}
			recycleTailRead(buf)
		})
		return cached, got
	}
	if cached, _ := read(0, int64(len(old))); cached {
		t.Fatal("a region whose pages left the page cache was read on the loop")
	}
	if cached, _ := read(int64(len(old))-1, 4); cached {
		t.Fatal("a region with one byte no longer in the page cache was read on the loop")
	}
	if cached, got := read(int64(len(old)), 3); !cached || string(got) != "hdrnew" {
		t.Fatalf("the bytes just appended: read on the loop %v, frame %q; want true, \"hdrnew\"", cached, got)
	}
}

// coldBelow is a diskio file whose bytes below coldEnd are not in memory, as
// far as ReadCachedAt tells: those of a segment whose tail left the page cache.
type coldBelow struct {
	*diskio.File
	coldEnd int64
}

func (f coldBelow) ReadCachedAt(p []byte, off int64) (bool, error) {
	if off < f.coldEnd {
		return false, nil
	}
	return f.File.ReadCachedAt(p, off)
}
