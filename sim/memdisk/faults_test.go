package memdisk

import (
	"errors"
	"testing"

	"strand/core/env"
)

func TestFlipBitCorruptsBothViews(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("AAAA")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.Append([]byte("BBBB")))
	mustWrite(t, d.FlipBit("f", 1, 0)) // durable byte
	mustWrite(t, d.FlipBit("f", 5, 1)) // unsynced byte
	if got := readAll(t, d, "f"); string(got) != "A@AAB@BB" {
		t.Fatalf("current after flips %q, want %q", got, "A@AAB@BB")
	}
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "A@AAB@BB" {
		t.Fatalf("ReadAt after flips %q, %v", buf, err)
	}
	// A later Sync makes the corrupted unsynced byte durable as it is.
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); string(got) != "A@AAB@BB" {
		t.Fatalf("after crash %q, want %q", got, "A@AAB@BB")
	}
	if err := d.FlipBit("f", 8, 0); err == nil {
		t.Fatal("FlipBit past the end succeeded")
	}
	if err := d.FlipBit("missing", 0, 0); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("FlipBit on missing file: %v", err)
	}
}

func TestFlipBitInAHole(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.WriteAt([]byte("z"), 3)) // bytes 0..2 are a zero hole
	mustWrite(t, d.FlipBit("f", 1, 7))
	if got := readAll(t, d, "f"); string(got) != "\x00\x80\x00z" {
		t.Fatalf("content %q", got)
	}
}

func TestFlipBitSurvivesLaterOverwriteOnlyWhereNotOverwritten(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("abc")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.WriteAt([]byte("X"), 0))
	mustWrite(t, d.FlipBit("f", 0, 0))
	if got := readAll(t, d, "f"); string(got) != "Ybc" {
		t.Fatalf("current %q, want Ybc", got)
	}
	// The durable 'a' was corrupted too: the medium under it decayed.
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); string(got) != "`bc" {
		t.Fatalf("after crash %q, want %q", got, "`bc")
	}
}

func TestTruncateFileIsDurable(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("0123456789")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.Append([]byte("unsynced")))
	mustWrite(t, d.TruncateFile("f", 4))
	if f.Size() != 4 {
		t.Fatalf("size %d after TruncateFile, want 4", f.Size())
	}
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); string(got) != "0123" {
		t.Fatalf("after crash %q, want 0123", got)
	}
}

func TestSetFull(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("abcd")))
	d.SetFull(true)
	if err := f.Append([]byte("e")); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if err := f.Truncate(10); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("growing truncate on a full disk: %v", err)
	}
	mustWrite(t, f.WriteAt([]byte("X"), 0)) // within the size: no new space
	mustWrite(t, f.Truncate(2))
	if got := readAll(t, d, "f"); string(got) != "Xb" {
		t.Fatalf("content %q, want Xb", got)
	}
	d.SetFull(false)
	mustWrite(t, f.Append([]byte("e")))
}

func TestCapacityBytes(t *testing.T) {
	d := New(Options{CapacityBytes: 10})
	a := create(t, d, "a")
	b := create(t, d, "b")
	mustWrite(t, a.Append(make([]byte, 6)))
	if err := b.Append(make([]byte, 5)); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("append past capacity: %v", err)
	}
	mustWrite(t, b.Append(make([]byte, 4)))
	if d.UsedBytes() != 10 {
		t.Fatalf("used %d, want 10", d.UsedBytes())
	}
	// A removed file still holds its space while a handle is open.
	mustWrite(t, d.Remove("a"))
	if err := b.Append([]byte("x")); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("append while a removed file is still open: %v", err)
	}
	mustWrite(t, a.Close())
	mustWrite(t, b.Append(make([]byte, 6)))
	if d.UsedBytes() != 10 {
		t.Fatalf("used %d, want 10", d.UsedBytes())
	}
	// A crash recomputes usage from what survived: nothing was synced.
	d.Crash(seeded(1), CrashLoseAll)
	if d.UsedBytes() != 0 {
		t.Fatalf("used %d after losing everything, want 0", d.UsedBytes())
	}
}

func TestFailNextSync(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("data")))
	mustWrite(t, d.FailNextSync("f"))
	if err := syncNow(t, d, f); !errors.Is(err, env.ErrIO) {
		t.Fatalf("armed sync: %v, want ErrIO", err)
	}
	if size, _ := d.DurableSize("f"); size != 0 {
		t.Fatalf("failed sync made %d bytes durable", size)
	}
	// Only the next Sync fails.
	if err := syncNow(t, d, f); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if size, _ := d.DurableSize("f"); size != 4 {
		t.Fatalf("durable size %d, want 4", size)
	}
}

func TestFailNextSyncDir(t *testing.T) {
	d := New(Options{})
	create(t, d, "f")
	mustWrite(t, d.FailNextSync("."))
	var got error
	d.SyncDir(".", func(err error) { got = err })
	d.RunPending()
	if !errors.Is(got, env.ErrIO) {
		t.Fatalf("armed syncdir: %v, want ErrIO", got)
	}
	d.Crash(seeded(1), CrashLoseAll)
	if names, _ := d.List("."); len(names) != 0 {
		t.Fatalf("failed syncdir made entries durable: %v", names)
	}
}

func TestWritebackMakesEverythingDurable(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("p/q"))
	f := create(t, d, "p/q/f")
	mustWrite(t, f.Append([]byte("written")))
	mustWrite(t, f.Truncate(4))
	d.Writeback()
	if size, ok := d.DurableSize("p/q/f"); !ok || size != 4 {
		t.Fatalf("durable size %d, %v; want 4", size, ok)
	}
	mustWrite(t, f.Append([]byte("+later")))
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "p/q/f"); string(got) != "writ" {
		t.Fatalf("after crash %q, want %q", got, "writ")
	}
}
