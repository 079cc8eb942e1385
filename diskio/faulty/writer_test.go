package faulty

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"strand/core/env"
	"strand/diskio"
)

// TestTornAppendBehindQueuedAppendsSurvivesAProcessCrash injects a torn
// append (ENOSPC after 7 bytes) behind appends still queued on diskio's
// write worker, then "crashes": the Disk is closed without any Sync and the
// file is read back from outside. The injected error reaches the caller at
// the failing call, as before the write worker existed, and the file holds
// exactly the earlier appends and the torn prefix, in order: what a process
// crash (kill -9) must keep of the page cache.
func TestTornAppendBehindQueuedAppendsSurvivesAProcessCrash(t *testing.T) {
	dir := t.TempDir()
	loop := make(chan func(), 64)
	inner, err := diskio.New(dir, diskio.Options{Post: func(fn func()) { loop <- fn }})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(inner, Plan{{Op: OpWrite, Nth: 3, Fault: FaultNoSpace, ShortWriteBytes: 7}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Open("seg.log", env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	first, second, third := bytes.Repeat([]byte("a"), 4096), bytes.Repeat([]byte("b"), 4096), []byte("torn-append")
	for _, p := range [][]byte{first, second} {
		if err := f.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Append(third); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("torn append: %v, want env.ErrNoSpace", err)
	}
	want := append(append(append([]byte(nil), first...), second...), third[:7]...)
	if f.Size() != int64(len(want)) {
		t.Fatalf("Size %d after the torn append, want %d", f.Size(), len(want))
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt before the crash: %v", err)
	}
	if err := inner.Close(); err != nil { // the process goes away; the worker drains into the page cache
		t.Fatal(err)
	}
	if err := f.(*File).Unwrap().(*diskio.File).WaitWritten(int64(len(want))); err != nil {
		t.Fatalf("WaitWritten after Close: %v", err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "seg.log"))
	if err != nil || !bytes.Equal(onDisk, want) {
		t.Fatalf("after the crash the file holds %d bytes (%v), want the %d appended and torn", len(onDisk), err, len(want))
	}
	f.Close()
}

// TestInjectedSyncFailureWithQueuedAppends fails the first Sync while
// appends are queued: the failure and the poisoning reach the core as
// without a write worker, and the appends still reach the file.
func TestInjectedSyncFailureWithQueuedAppends(t *testing.T) {
	d, loop := newFaultyDisk(t, Plan{{Op: OpSync, Nth: 1, Fault: FaultIO}})
	f := open(t, d, "seg.log")
	for range 50 {
		if err := f.Append(bytes.Repeat([]byte("x"), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := syncAndWait(t, loop, f.Sync); !errors.Is(err, env.ErrIO) {
			t.Fatalf("Sync %d: %v, want env.ErrIO", i+1, err)
		}
	}
	if err := f.(*File).Unwrap().(*diskio.File).WaitWritten(50_000); err != nil {
		t.Fatalf("queued appends were not written: %v", err)
	}
}
