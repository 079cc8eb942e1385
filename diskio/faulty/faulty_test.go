package faulty

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"strand/core/env"
	"strand/diskio"
)

// newFaultyDisk wraps a real diskio.Disk on a temporary directory. Its
// completions are posted to the returned channel; wait drains it.
func newFaultyDisk(t *testing.T, plan Plan) (*Disk, chan func()) {
	t.Helper()
	loop := make(chan func(), 64)
	inner, err := diskio.New(t.TempDir(), diskio.Options{Post: func(fn func()) { loop <- fn }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	d, err := New(inner, plan)
	if err != nil {
		t.Fatal(err)
	}
	return d, loop
}

// syncAndWait asks for a sync and runs posted functions until done reports.
func syncAndWait(t *testing.T, loop chan func(), sync func(func(error))) error {
	t.Helper()
	called := false
	var result error
	sync(func(err error) { called, result = true, err })
	if called {
		t.Fatal("done ran inside the call instead of through the event loop")
	}
	for !called {
		select {
		case fn := <-loop:
			fn()
		case <-time.After(10 * time.Second):
			t.Fatal("no completion within 10s")
		}
	}
	return result
}

func open(t *testing.T, d *Disk, filePath string) env.File {
	t.Helper()
	f, err := d.Open(filePath, env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestNthMatchingWriteFails(t *testing.T) {
	d, _ := newFaultyDisk(t, Plan{{Op: OpWrite, PathPattern: "*.log", Nth: 3, Fault: FaultIO}})
	log := open(t, d, "0.log")
	index := open(t, d, "0.index")
	var results []bool
	for i := range 5 {
		if err := index.Append([]byte{byte(i)}); err != nil {
			t.Fatalf("write to a path the rule does not match failed: %v", err)
		}
		err := log.Append([]byte{byte(i)})
		if err != nil && !errors.Is(err, env.ErrIO) {
			t.Fatalf("injected write error %v is not env.ErrIO", err)
		}
		results = append(results, err == nil)
	}
	if want := []bool{true, true, false, true, true}; !slices.Equal(results, want) {
		t.Errorf("write successes %v, want %v", results, want)
	}
	if log.Size() != 4 || index.Size() != 5 {
		t.Errorf("sizes log %d, index %d; want 4 and 5", log.Size(), index.Size())
	}
	want := []Injection{{Rule: 0, Op: OpWrite, Path: "0.log", Call: 3}}
	if got := d.Injected(); !slices.Equal(got, want) {
		t.Errorf("Injected() = %+v, want %+v", got, want)
	}
}

func TestPersistentRuleFailsEveryLaterCall(t *testing.T) {
	d, _ := newFaultyDisk(t, Plan{{Op: OpWrite, Nth: 2, Persist: true, Fault: FaultNoSpace}})
	f := open(t, d, "seg")
	for i := range 4 {
		err := f.WriteAt([]byte("x"), int64(i))
		if i == 0 && err != nil {
			t.Errorf("write 1: %v", err)
		}
		if i > 0 && !errors.Is(err, env.ErrNoSpace) {
			t.Errorf("write %d: got %v, want env.ErrNoSpace", i+1, err)
		}
	}
	if len(d.Injected()) != 3 {
		t.Errorf("Injected() has %d entries, want 3", len(d.Injected()))
	}
}

func TestShortAppendLeavesATornTail(t *testing.T) {
	d, _ := newFaultyDisk(t, Plan{{Op: OpWrite, Nth: 2, Fault: FaultNoSpace, ShortWriteBytes: 3}})
	f := open(t, d, "seg.log")
	if err := f.Append([]byte("first|")); err != nil {
		t.Fatal(err)
	}
	err := f.Append([]byte("second|"))
	if !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("torn append: got %v, want env.ErrNoSpace", err)
	}
	// The core sees the failure, and a Size that is neither the old end nor
	// the new one: the torn bytes are really in the file.
	if f.Size() != int64(len("first|sec")) {
		t.Errorf("Size() after a torn append = %d, want %d", f.Size(), len("first|sec"))
	}
	got := make([]byte, f.Size())
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "first|sec" {
		t.Errorf("file holds %q (%v), want first|sec", got, err)
	}
	// A short write never completes the write, however large the prefix.
	d2, _ := newFaultyDisk(t, Plan{{Op: OpWrite, Nth: 1, Fault: FaultIO, ShortWriteBytes: 100}})
	g := open(t, d2, "g")
	if err := g.WriteAt([]byte("abc"), 0); !errors.Is(err, env.ErrIO) || g.Size() != 2 {
		t.Errorf("short WriteAt of 3 bytes with prefix 100: %v, size %d; want env.ErrIO, size 2", err, g.Size())
	}
}

func TestInjectedSyncFailurePoisonsTheFile(t *testing.T) {
	d, loop := newFaultyDisk(t, Plan{{Op: OpSync, PathPattern: "bad", Nth: 1, Fault: FaultNoSpace}})
	bad := open(t, d, "bad")
	good := open(t, d, "good")
	for i := range 3 {
		if err := bad.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		err := syncAndWait(t, loop, bad.Sync)
		if !errors.Is(err, env.ErrIO) {
			t.Errorf("Sync %d of a file whose first fsync failed: got %v, want env.ErrIO", i+1, err)
		}
	}
	if err := syncAndWait(t, loop, good.Sync); err != nil {
		t.Errorf("Sync of an unaffected file: %v", err)
	}
}

func TestReadSyncDirAndDiskOpsFail(t *testing.T) {
	d, loop := newFaultyDisk(t, Plan{
		{Op: OpRead, Nth: 1, Fault: FaultIO},
		{Op: OpSyncDir, Nth: 1, Fault: FaultIO},
		{Op: OpOpen, PathPattern: "full/*", Nth: 1, Fault: FaultNoSpace},
		{Op: OpRename, PathPattern: "*.swap", Nth: 1, Fault: FaultIO},
		{Op: OpTruncate, Nth: 1, Fault: FaultIO},
	})
	f := open(t, d, "f")
	if err := f.Append([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReadAt(make([]byte, 4), 0); n != 0 || !errors.Is(err, env.ErrIO) {
		t.Errorf("first read: %d, %v; want 0, env.ErrIO", n, err)
	}
	got := make([]byte, 4)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, []byte("data")) {
		t.Errorf("second read: %q, %v", got, err)
	}
	if err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir(".", done) }); !errors.Is(err, env.ErrIO) {
		t.Errorf("SyncDir: got %v, want env.ErrIO", err)
	}
	if err := d.MkdirAll("full"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open("full/x", env.OpenOptions{Create: true}); !errors.Is(err, env.ErrNoSpace) {
		t.Errorf("Open: got %v, want env.ErrNoSpace", err)
	}
	if err := d.Rename("f", "f.swap"); !errors.Is(err, env.ErrIO) {
		t.Errorf("Rename to a matching new path: got %v, want env.ErrIO", err)
	}
	if err := f.Truncate(0); !errors.Is(err, env.ErrIO) || f.Size() != 4 {
		t.Errorf("Truncate: %v, size %d; want env.ErrIO and size unchanged", err, f.Size())
	}
}

func TestPlanIsChecked(t *testing.T) {
	inner, err := diskio.New(t.TempDir(), diskio.Options{Post: func(fn func()) { fn() }})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	bad := map[string]Rule{
		"unknown op":          {Op: 0, Nth: 1, Fault: FaultIO},
		"unknown fault":       {Op: OpWrite, Nth: 1},
		"Nth zero":            {Op: OpWrite, Fault: FaultIO},
		"bad pattern":         {Op: OpWrite, Nth: 1, Fault: FaultIO, PathPattern: "["},
		"short on a read":     {Op: OpRead, Nth: 1, Fault: FaultIO, ShortWriteBytes: 1},
		"negative short size": {Op: OpWrite, Nth: 1, Fault: FaultIO, ShortWriteBytes: -1},
	}
	for name, rule := range bad { // order-independent: each case is checked alone
		if _, err := New(inner, Plan{rule}); err == nil {
			t.Errorf("%s: plan accepted", name)
		}
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("nil inner disk accepted")
	}
}
