package memdisk

import (
	"errors"
	"testing"

	"strand/core/env"
)

// A transient read fault fails one read that touches its range, then is
// gone; reads beside it and the checkers' ReadFile never fail.
func TestFailReadsTransientFailsOneRead(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("0123456789")))
	mustWrite(t, d.FailReads("f", 4, 2, false))
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatalf("read beside the fault: %v", err)
	}
	if got := readAll(t, d, "f"); string(got) != "0123456789" {
		t.Fatalf("ReadFile %q", got)
	}
	if _, err := f.ReadAt(buf, 3); !errors.Is(err, env.ErrIO) {
		t.Fatalf("read touching the fault: %v, want ErrIO", err)
	}
	if _, err := f.ReadAt(buf, 3); err != nil || string(buf) != "345" {
		t.Fatalf("second read %q, %v: a transient fault fails one read", buf, err)
	}
	if d.LatentReadErrors("f") {
		t.Fatal("a transient fault reported as latent")
	}
}

// A latent sector error fails every read until a write covers it, and
// survives a crash; a transient one ends at the crash.
func TestFailReadsLatentUntilRewritten(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("0123456789")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d.FailReads("f", 2, 2, true))
	mustWrite(t, d.FailReads("f", 8, 1, false))
	buf := make([]byte, 2)
	for i := 0; i < 2; i++ {
		if _, err := f.ReadAt(buf, 2); !errors.Is(err, env.ErrIO) {
			t.Fatalf("read %d of the bad sector: %v, want ErrIO", i, err)
		}
	}
	d.Crash(seeded(1), CrashKeepAll)
	f = mustOpen(t, d, "f", env.OpenOptions{})
	if _, err := f.ReadAt(buf, 8); err != nil {
		t.Fatalf("the transient fault outlived the crash: %v", err)
	}
	if _, err := f.ReadAt(buf, 3); !errors.Is(err, env.ErrIO) {
		t.Fatalf("the latent fault did not outlive the crash: %v", err)
	}
	if !d.LatentReadErrors("f") {
		t.Fatal("LatentReadErrors false with a bad sector")
	}
	mustWrite(t, f.WriteAt([]byte("ab"), 2)) // remaps the sector
	if _, err := f.ReadAt(buf, 2); err != nil || string(buf) != "ab" {
		t.Fatalf("read after rewrite %q, %v", buf, err)
	}
	if d.LatentReadErrors("f") {
		t.Fatal("the rewritten sector still reported bad")
	}
}

// A misdirected append: the page cache shows what was written until a
// power loss; then the intended range holds zeros and the bytes are found
// where the write landed, in the same or another file. A process crash
// keeping the page cache changes nothing.
func TestMisdirectedWriteShowsAfterPowerLoss(t *testing.T) {
	for _, tc := range []struct {
		name        string
		to          string
		wantF       string
		wantG       string
		keepAllNext bool
	}{
		{name: "same file", to: "f", wantF: "XYZDEF\x00\x00\x00", wantG: "gggg"},
		{name: "other file", to: "g", wantF: "ABCDEF\x00\x00\x00", wantG: "gXYZ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(Options{})
			f, g := create(t, d, "f"), create(t, d, "g")
			syncDirNow(t, d, ".")
			mustWrite(t, f.Append([]byte("ABCDEF")))
			mustWrite(t, g.Append([]byte("gggg")))
			if err := syncNow(t, d, f); err != nil {
				t.Fatal(err)
			}
			if err := syncNow(t, d, g); err != nil {
				t.Fatal(err)
			}
			at := int64(0)
			if tc.to == "g" {
				at = 1
			}
			mustWrite(t, d.MisdirectNextWrite("f", tc.to, at))
			mustWrite(t, f.Append([]byte("XYZ")))
			mustWrite(t, f.Append([]byte("!"))) // the next write lands where it should
			if err := syncNow(t, d, f); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, d, "f"); string(got) != "ABCDEFXYZ!" {
				t.Fatalf("page cache %q, want what was written", got)
			}
			d.Crash(seeded(1), CrashKeepAll)
			if got := readAll(t, d, "f"); string(got) != "ABCDEFXYZ!" {
				t.Fatalf("after a process crash %q, want the page cache kept", got)
			}
			d.Crash(seeded(1), CrashLoseAll)
			if got := readAll(t, d, "f"); string(got) != tc.wantF+"!" {
				t.Fatalf("f after a power loss %q, want %q", got, tc.wantF+"!")
			}
			if got := readAll(t, d, "g"); string(got) != tc.wantG {
				t.Fatalf("g after a power loss %q, want %q", got, tc.wantG)
			}
			// The medium is what reads return now: it stays so.
			d.Crash(seeded(1), CrashLoseAll)
			if got := readAll(t, d, "f"); string(got) != tc.wantF+"!" {
				t.Fatalf("f after a second power loss %q", got)
			}
		})
	}
}

// A misdirected write never synced is lost like any other by a power loss
// (it never reached the medium), and lands nowhere.
func TestMisdirectedWriteNeverSyncedLandsNowhere(t *testing.T) {
	d, f := durableFile(t, "f")
	mustWrite(t, f.Append([]byte("ABCD")))
	if err := syncNow(t, d, f); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d.MisdirectNextWrite("f", "f", 0))
	mustWrite(t, f.Append([]byte("XY")))
	d.Crash(seeded(1), CrashLoseAll)
	if got := readAll(t, d, "f"); string(got) != "ABCD" {
		t.Fatalf("after a power loss %q, want the synced content alone", got)
	}
}

// With DeferAppendErrors a failing Append returns nil, the file stays at
// the bytes written, and every later write or Sync reports the error
// (diskio's form); reads and Close still work.
func TestDeferAppendErrors(t *testing.T) {
	d := New(Options{DeferAppendErrors: true})
	f := create(t, d, "f")
	mustWrite(t, f.Append([]byte("ok")))
	d.SetFull(true)
	if err := f.Append([]byte("lost")); err != nil {
		t.Fatalf("deferred Append returned %v, want nil", err)
	}
	d.SetFull(false)
	if f.Size() != 2 {
		t.Fatalf("size %d, want the 2 bytes written", f.Size())
	}
	if err := f.Append([]byte("x")); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("next Append: %v, want the deferred ENOSPC", err)
	}
	if err := f.WriteAt([]byte("x"), 0); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("WriteAt: %v, want the deferred ENOSPC", err)
	}
	if err := f.Truncate(0); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("Truncate: %v, want the deferred ENOSPC", err)
	}
	if err := syncNow(t, d, f); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("Sync: %v, want the deferred ENOSPC", err)
	}
	buf := make([]byte, 2)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "ok" {
		t.Fatalf("ReadAt %q, %v", buf, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	immediate := New(Options{})
	g := create(t, immediate, "g")
	immediate.SetFull(true)
	if err := g.Append([]byte("x")); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("without DeferAppendErrors Append returned %v", err)
	}
}
