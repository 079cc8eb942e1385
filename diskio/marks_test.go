package diskio

import (
	"bytes"
	"testing"

	"strand/core/env"
)

// TestWrittenThroughWaitsForQueuedAppends checks the promise realnet relies
// on to recycle request frames: WrittenThrough(AppendMark()) stays false
// while an append made before the mark is queued, and turns true once it is
// written; a mark taken before the append does not wait for it.
func TestWrittenThroughWaitsForQueuedAppends(t *testing.T) {
	d, _, g := gateDisk(t, Options{})
	f := mustOpen(t, d, "seg.log", env.OpenOptions{Create: true})
	defer f.Close()
	before := AppendMark()
	mustNil(t, f.Append(bytes.Repeat([]byte("a"), 100)))
	mustNil(t, f.Append(bytes.Repeat([]byte("b"), 100)))
	mark := AppendMark()
	if mark < before+2 {
		t.Fatalf("AppendMark went from %d to %d over two appends", before, mark)
	}
	if WrittenThrough(mark) {
		t.Fatal("WrittenThrough is true while the appends it covers are queued")
	}
	if !WrittenThrough(before) {
		t.Fatal("WrittenThrough of a mark taken before the queued appends waits for them")
	}
	close(g.gate)
	mustNil(t, f.WaitWritten(200))
	if !WrittenThrough(mark) {
		t.Fatal("WrittenThrough is false after every append it covers was written")
	}
}
