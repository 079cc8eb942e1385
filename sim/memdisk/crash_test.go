package memdisk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"strand/core/env"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// durableFile returns a disk holding file p whose entry is durable and whose
// content is empty.
func durableFile(t *testing.T, p string) (*Disk, env.File) {
	t.Helper()
	d := New(Options{})
	f := create(t, d, p)
	syncDirNow(t, d, ".")
	return d, f
}

func TestCrashLoseAllDropsUnsyncedWrites(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("unsynced")))
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); len(got) != 0 {
		t.Fatalf("after crash %q, want empty", got)
	}
}

func TestCrashKeepsCompletedSync(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("synced")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.Append([]byte("+lost")))
	mustWrite(t, f.WriteAt([]byte("S"), 0))
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); string(got) != "synced" {
		t.Fatalf("after crash %q, want %q", got, "synced")
	}
}

func TestCrashBeforeSyncCompletionLosesWrites(t *testing.T) {
	var posted []func()
	d := New(Options{Post: func(fn func()) { posted = append(posted, fn) }})
	f := create(t, d, "f")
	d.SyncDir(".", nil)
	posted[0]()
	mustWrite(t, f.Append([]byte("asked but not done")))
	called := false
	f.Sync(func(error) { called = true })
	d.Crash(seeded(1), CrashLoseAll)
	for _, fn := range posted[1:] {
		fn() // the simulator may still hold the completion: it must do nothing
	}
	if called {
		t.Fatal("done ran for a Sync whose completion was dropped by the crash")
	}
	if got := readAll(t, d, "f"); len(got) != 0 {
		t.Fatalf("after crash %q, want empty", got)
	}

	// Without Post, the queue is dropped.
	d2, f2 := durableFile(t, "f")
	mustWrite(t, f2.Append([]byte("x")))
	f2.Sync(func(error) { called = true })
	d2.Crash(seeded(1), CrashLoseAll)
	if n := d2.RunPending(); n != 0 || called {
		t.Fatalf("RunPending after crash ran %d, done called %v", n, called)
	}
}

func TestCrashLosesUnsyncedEntryWithItsSyncedFile(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("dir"))
	syncDirNow(t, d, ".")
	f := create(t, d, "dir/f")
	mustWrite(t, f.Append([]byte("synced data")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	if size, ok := d.DurableSize("dir/f"); !ok || size != 11 {
		t.Fatalf("durable size %d, %v", size, ok)
	}
	d.Crash(seeded(1), CrashLoseAll)
	if _, err := d.ReadFile("dir/f"); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("file whose entry was never synced survived: %v", err)
	}
	if names, err := d.List("dir"); err != nil || len(names) != 0 {
		t.Fatalf("List dir = %v, %v; want empty", names, err)
	}
}

func TestCrashLosesUnsyncedMkdir(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("a/b"))
	syncDirNow(t, d, "a") // b's entry in a is durable, a's entry in the root is not
	d.Crash(seeded(1), CrashLoseAll)
	if names, _ := d.List("."); len(names) != 0 {
		t.Fatalf("root after crash %v, want empty", names)
	}
	mustWrite(t, d.MkdirAll("a/b"))
	syncDirNow(t, d, ".")
	syncDirNow(t, d, "a")
	d.Crash(seeded(1), CrashLoseAll)
	if names, err := d.List("a"); err != nil || len(names) != 1 || names[0] != "b" {
		t.Fatalf("List a = %v, %v; want [b]", names, err)
	}
}

func TestCrashRevertsRemoveAndRename(t *testing.T) {
	d := New(Options{})
	for _, name := range []string{"keep", "old"} {
		f := create(t, d, name)
		mustWrite(t, f.Append([]byte(name)))
		if err := syncNow(t, d, f); err != nil {
			t.Fatal(err)
		}
	}
	syncDirNow(t, d, ".")
	mustWrite(t, d.Remove("keep"))
	mustWrite(t, d.Rename("old", "new"))
	d.Crash(seeded(1), CrashLoseAll)
	names, _ := d.List(".")
	if fmt.Sprint(names) != "[keep old]" {
		t.Fatalf("after crash %v, want [keep old]", names)
	}
	if got := readAll(t, d, "old"); string(got) != "old" {
		t.Fatalf("old = %q", got)
	}
}

func TestCrashClosesHandles(t *testing.T) {
	d, f := durableFile(t, "f")
	d.Crash(seeded(1), CrashKeepAll)
	checkClosed(t, d, f)
	// A new handle works.
	g := mustOpen(t, d, "f", env.OpenOptions{})
	mustWrite(t, g.Append([]byte("ok")))
}

func TestCrashKeepAllKeepsEverythingUnsynced(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("dir"))
	f := create(t, d, "dir/f")
	mustWrite(t, f.Append([]byte("written")))
	d.Crash(seeded(1), CrashKeepAll)
	if got := readAll(t, d, "dir/f"); string(got) != "written" {
		t.Fatalf("after process crash %q, want %q", got, "written")
	}
	if size, _ := d.DurableSize("dir/f"); size != 0 {
		t.Fatalf("process crash made %d bytes durable", size)
	}
	// A power loss afterwards still loses it all, entries included.
	d.Crash(seeded(1), CrashLoseAll)
	if names, _ := d.List("."); len(names) != 0 {
		t.Fatalf("root after power loss %v, want empty", names)
	}
}

// TestCrashTornKeepsAPrefix appends distinct chunks and checks, over many
// seeds, that what survives is always a byte prefix of what was written and
// no shorter than what was synced, and that the seeds reach both extremes and
// tear writes in their middle.
func TestCrashTornKeepsAPrefix(t *testing.T) {
	var written []byte
	chunks := [][]byte{}
	for i := range 6 {
		chunks = append(chunks, bytes.Repeat([]byte{byte('a' + i)}, 10))
	}
	const syncedBytes = 10
	sawEmptyTail, sawAll, sawMidWrite := false, false, false
	for seed := range uint64(200) {
		d, f := durableFile(t, "f")
		written = written[:0]
		for i, chunk := range chunks {
			mustWrite(t, f.Append(chunk))
			written = append(written, chunk...)
			if i == 0 {
				if err := syncNow(t, d, f); err != nil {
					t.Fatal(err)
				}
			}
		}
		trace := d.Crash(seeded(seed), CrashTorn)
		got := readAll(t, d, "f")
		if len(got) < syncedBytes || !bytes.HasPrefix(written, got) {
			t.Fatalf("seed %d: kept %q, not a prefix of %q at least %d long\n%s", seed, got, written, syncedBytes, trace)
		}
		if size, _ := d.DurableSize("f"); size != int64(len(got)) {
			t.Fatalf("seed %d: kept state not durable: durable %d, current %d", seed, size, len(got))
		}
		sawEmptyTail = sawEmptyTail || len(got) == syncedBytes
		sawAll = sawAll || len(got) == len(written)
		sawMidWrite = sawMidWrite || len(got)%10 != 0
	}
	if !sawEmptyTail || !sawAll || !sawMidWrite {
		t.Fatalf("200 seeds never kept nothing (%v), everything (%v) or a torn write (%v)",
			sawEmptyTail, sawAll, sawMidWrite)
	}
}

// TestCrashTornRenameIsAtomic: after any crash a renamed file is under exactly
// one of its names.
func TestCrashTornRenameIsAtomic(t *testing.T) {
	for seed := range uint64(50) {
		d := New(Options{})
		f := create(t, d, "a.swap")
		mustWrite(t, f.Append([]byte("x")))
		if err := syncNow(t, d, f); err != nil {
			t.Fatal(err)
		}
		syncDirNow(t, d, ".")
		mustWrite(t, d.Rename("a.swap", "a.log"))
		mustWrite(t, create(t, d, "other").Close())
		d.Crash(seeded(seed), CrashTorn)
		_, errSwap := d.ReadFile("a.swap")
		_, errLog := d.ReadFile("a.log")
		if (errSwap == nil) == (errLog == nil) {
			t.Fatalf("seed %d: a.swap err %v, a.log err %v; want exactly one present", seed, errSwap, errLog)
		}
	}
}

func TestCrashIsDeterministic(t *testing.T) {
	run := func(seed uint64) (string, []byte, []string) {
		d := New(Options{})
		mustWrite(t, d.MkdirAll("p0"))
		for i := range 5 {
			f := create(t, d, fmt.Sprintf("p0/%d.log", i))
			for j := range 4 {
				mustWrite(t, f.Append(bytes.Repeat([]byte{byte(j)}, 7)))
			}
		}
		trace := d.Crash(seeded(seed), CrashTorn)
		names, _ := d.List("p0")
		content, _ := d.ReadFile("p0/3.log")
		return trace, content, names
	}
	t1, c1, n1 := run(7)
	t2, c2, n2 := run(7)
	if t1 != t2 || !bytes.Equal(c1, c2) || fmt.Sprint(n1) != fmt.Sprint(n2) {
		t.Fatalf("same seed, different outcome:\n%s\n---\n%s", t1, t2)
	}
	differs := false
	for seed := uint64(8); seed < 20 && !differs; seed++ {
		t3, _, _ := run(seed)
		differs = t3 != t1
	}
	if !differs {
		t.Fatal("12 other seeds all gave the same crash")
	}
}

func TestCrossDirectoryRename(t *testing.T) {
	setup := func() *Disk {
		d := New(Options{})
		mustWrite(t, d.MkdirAll("from"))
		mustWrite(t, d.MkdirAll("to"))
		f := create(t, d, "from/f")
		mustWrite(t, f.Append([]byte("x")))
		if err := syncNow(t, d, f); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{".", "from", "to"} {
			syncDirNow(t, d, dir)
		}
		mustWrite(t, d.Rename("from/f", "to/f"))
		return d
	}
	exists := func(d *Disk, p string) bool { _, err := d.ReadFile(p); return err == nil }

	// Only the source directory synced: the file is in neither.
	d := setup()
	syncDirNow(t, d, "from")
	d.Crash(seeded(1), CrashLoseAll)
	if exists(d, "from/f") || exists(d, "to/f") {
		t.Fatal("file survived with only its removal synced")
	}
	// Only the target directory synced: the file is in both, and both
	// names reach one file.
	d = setup()
	syncDirNow(t, d, "to")
	d.Crash(seeded(1), CrashLoseAll)
	if !exists(d, "from/f") || !exists(d, "to/f") {
		t.Fatal("want the file under both names")
	}
	mustWrite(t, d.Remove("from/f"))
	if got := readAll(t, d, "to/f"); string(got) != "x" || d.UsedBytes() != 1 {
		t.Fatalf("to/f = %q, used %d; want x, 1", got, d.UsedBytes())
	}
	// Both synced: only the new name.
	d = setup()
	syncDirNow(t, d, "from")
	syncDirNow(t, d, "to")
	d.Crash(seeded(1), CrashLoseAll)
	if exists(d, "from/f") || !exists(d, "to/f") {
		t.Fatal("want the file only under its new name")
	}
}
