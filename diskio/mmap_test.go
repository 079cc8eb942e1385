package diskio

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

func TestMappedReadsSeeAppendsAndOverwrites(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "00000000000000000000.index", env.OpenOptions{Create: true, MappedBytesMax: 4096})
	defer f.Close()
	if f.mapped == nil {
		t.Fatal("file opened with MappedBytesMax has no mapping")
	}
	mustNil(t, f.Append([]byte("0123456789")))
	got := make([]byte, 10)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "0123456789" {
		t.Errorf("mapped read after append = %q, %v", got, err)
	}
	mustNil(t, f.WriteAt([]byte("ab"), 3))
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "012ab56789" {
		t.Errorf("mapped read after overwrite = %q, %v", got, err)
	}
	// Bytes past the logical end are never read through the map.
	if n, err := f.ReadAt(make([]byte, 20), 5); n != 5 || err != io.EOF {
		t.Errorf("mapped read across the end = %d, %v; want 5, io.EOF", n, err)
	}
	mustNil(t, f.Truncate(4))
	if n, err := f.ReadAt(make([]byte, 8), 0); n != 4 || err != io.EOF {
		t.Errorf("mapped read after Truncate(4) = %d, %v; want 4, io.EOF", n, err)
	}
}

func TestMappedFileOpenedWithExistingContent(t *testing.T) {
	d, _ := newTestDisk(t)
	content := bytes.Repeat([]byte("index-entry-"), 1000) // 12000 bytes, past MappedBytesMax
	writeFile(t, d, "x.index", string(content))
	f := mustOpen(t, d, "x.index", env.OpenOptions{MappedBytesMax: 4096})
	defer f.Close()
	got := make([]byte, len(content))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, content) {
		t.Errorf("mapped read of existing content differs (err %v)", err)
	}
}

func TestMappedFileGrowsPastMappedBytesMax(t *testing.T) {
	d, _ := newTestDisk(t)
	const mappedBytesMax = 4096
	f := mustOpen(t, d, "grow.index", env.OpenOptions{Create: true, MappedBytesMax: mappedBytesMax})
	defer f.Close()
	initialMapBytes := len(f.mapped)
	var want []byte
	for i := range 5000 { // 5000 * 12 bytes: several remaps
		entry := []byte{byte(i), byte(i >> 8), 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 3)}
		mustNil(t, f.Append(entry))
		want = append(want, entry...)
		if i%997 == 0 { // read the newest entry, forcing remaps as the file grows
			mustNil(t, f.WaitWritten(f.Size())) // read through the map, not the write queue
			got := make([]byte, len(entry))
			if _, err := f.ReadAt(got, f.Size()-int64(len(entry))); err != nil || !bytes.Equal(got, entry) {
				t.Fatalf("read of entry %d = %v, %v", i, got, err)
			}
		}
	}
	mustNil(t, f.WaitWritten(f.Size()))
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("full read after growth differs (err %v)", err)
	}
	if len(f.mapped) <= initialMapBytes || int64(len(f.mapped)) < f.Size() {
		t.Errorf("mapping is %d bytes for a %d-byte file (started at %d)", len(f.mapped), f.Size(), initialMapBytes)
	}
}

func TestMappedReadFaultBecomesErrIO(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "f.index", env.OpenOptions{Create: true, MappedBytesMax: 3 * 4096})
	defer f.Close()
	mustNil(t, f.Append(bytes.Repeat([]byte{7}, 3*4096)))
	mustNil(t, f.WaitWritten(3*4096)) // else the read is served from the write queue
	// Truncated behind the File's back: the mapped pages lose their backing
	// and touching them raises SIGBUS.
	mustNil(t, unix.Ftruncate(f.Fd(), 0))
	_, err := f.ReadAt(make([]byte, 100), 2*4096)
	if !errors.Is(err, env.ErrIO) {
		t.Errorf("read of a page the file no longer backs: got %v, want env.ErrIO", err)
	}
}

func TestCloseUnmaps(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "f.index", env.OpenOptions{Create: true, MappedBytesMax: 4096})
	mustNil(t, f.Close())
	if f.mapped != nil {
		t.Error("Close left the mapping in place")
	}
}
