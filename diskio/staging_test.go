package diskio

import (
	"bytes"
	"testing"

	"strand/core/env"
)

func init() {
	// Every test of the package runs with recycled staging bytes poisoned,
	// so a write or read that used them after recycling sees garbage.
	poisonRecycledStaging = true
}

// TestAppendCopiesCallerBytes checks the promise realnet relies on to
// recycle request frames: once Append returns, the caller's buffer may be
// overwritten without changing what is read back or written.
func TestAppendCopiesCallerBytes(t *testing.T) {
	d, _, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	p := bytes.Repeat([]byte("a"), 100)
	mustNil(t, f.Append(p))
	for i := range p {
		p[i] = 'x' // the caller reuses its buffer while the write is queued
	}
	got := make([]byte, 100)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, bytes.Repeat([]byte("a"), 100)) {
		t.Fatalf("ReadAt of a queued append after the caller reused its buffer: %q, %v", got, err)
	}
	close(g.gate)
	mustNil(t, f.WaitWritten(100))
	if !bytes.Equal(fileBytes(t, f), bytes.Repeat([]byte("a"), 100)) {
		t.Fatal("the file holds the caller's later bytes, not the appended ones")
	}
}

// TestStagingChunksAreRecycled appends more than several chunks' worth,
// with appends that straddle chunk ends and one larger than a chunk, reusing
// one caller buffer throughout, and checks that the file holds every append
// in order (a chunk recycled too early is poisoned, which would show) and
// that the writer ends with at most spareChunksMax spares and an empty
// filling chunk.
func TestStagingChunksAreRecycled(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	sizes := []int{1000, 700_000, 1 << 20, 3, stagingChunkBytes + 1, 900_000}
	var want []byte
	source := make([]byte, stagingChunkBytes+1+256)
	for j := range source {
		source[j] = byte(j*7 + j/251)
	}
	buf := make([]byte, stagingChunkBytes+1)
	for i := range 60 {
		p := buf[:sizes[i%len(sizes)]]
		copy(p, source[i:]) // each append's bytes differ from the last's
		want = append(want, p...)
		mustNil(t, f.Append(p))
	}
	mustNil(t, f.WaitWritten(int64(len(want))))
	if got := fileBytes(t, f); !bytes.Equal(got, want) {
		t.Fatalf("the file's %d bytes differ from the %d appended", len(got), len(want))
	}
	w := d.writer
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.staging.spare) > spareChunksMax {
		t.Errorf("%d spare chunks kept, at most %d allowed", len(w.staging.spare), spareChunksMax)
	}
	if c := w.staging.filling; c == nil || c.used != 0 || c.unstaged != 0 {
		t.Errorf("filling chunk after every append was written: %+v, want one reset to empty", c)
	}
}
