package diskio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

func TestNewNeedsPostAndAnExistingRoot(t *testing.T) {
	if _, err := New(t.TempDir(), Options{}); err == nil {
		t.Error("New without Options.Post succeeded")
	}
	loop := newTestLoop()
	_, err := New(filepath.Join(t.TempDir(), "missing"), Options{Post: loop.post})
	if !errors.Is(err, env.ErrNotExist) {
		t.Errorf("New on a missing root: got %v, want env.ErrNotExist", err)
	}
}

func TestPathsOutsideTheRootAreRejected(t *testing.T) {
	d, loop := newTestDisk(t)
	for _, bad := range []string{"/etc/passwd", "..", "../x", "a/../../x", "./../x"} {
		if _, err := d.Open(bad, env.OpenOptions{Create: true}); !errors.Is(err, ErrBadPath) {
			t.Errorf("Open(%q): got %v, want ErrBadPath", bad, err)
		}
		if err := d.MkdirAll(bad); !errors.Is(err, ErrBadPath) {
			t.Errorf("MkdirAll(%q): got %v, want ErrBadPath", bad, err)
		}
		if _, err := d.List(bad); !errors.Is(err, ErrBadPath) {
			t.Errorf("List(%q): got %v, want ErrBadPath", bad, err)
		}
		if err := d.Rename("x", bad); !errors.Is(err, ErrBadPath) {
			t.Errorf("Rename(x, %q): got %v, want ErrBadPath", bad, err)
		}
		if err := d.Remove(bad); !errors.Is(err, ErrBadPath) {
			t.Errorf("Remove(%q): got %v, want ErrBadPath", bad, err)
		}
		if err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir(bad, done) }); !errors.Is(err, ErrBadPath) {
			t.Errorf("SyncDir(%q): got %v, want ErrBadPath", bad, err)
		}
	}
	if _, err := d.Open(".", env.OpenOptions{Create: true}); !errors.Is(err, ErrBadPath) {
		t.Errorf("Open(.): got %v, want ErrBadPath", err)
	}
	// A path that wanders but stays inside is fine.
	if err := d.MkdirAll("a"); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, d, "a/../b", env.OpenOptions{Create: true})
	defer f.Close()
	if _, err := os.Stat(filepath.Join(d.Root(), "b")); err != nil {
		t.Errorf("a/../b did not create b under the root: %v", err)
	}
}

func TestOpenErrorsMapToEnvSentinels(t *testing.T) {
	d, _ := newTestDisk(t)
	_, err := d.Open("missing", env.OpenOptions{})
	if !errors.Is(err, env.ErrNotExist) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("open missing: got %v, want env.ErrNotExist wrapping ENOENT", err)
	}
	f := mustOpen(t, d, "once", env.OpenOptions{Create: true, Exclusive: true})
	defer f.Close()
	_, err = d.Open("once", env.OpenOptions{Create: true, Exclusive: true})
	if !errors.Is(err, env.ErrExist) {
		t.Errorf("exclusive create twice: got %v, want env.ErrExist", err)
	}
	if _, err := d.Open("once", env.OpenOptions{Exclusive: true}); err == nil {
		t.Error("Exclusive without Create succeeded")
	}
	if _, err := d.Open("once", env.OpenOptions{MappedBytesMax: -1}); err == nil {
		t.Error("negative MappedBytesMax succeeded")
	}
	if err := d.MkdirAll("dir"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open("dir", env.OpenOptions{}); err == nil {
		t.Error("opening a directory as a file succeeded")
	}
	if err := d.Rename("missing", "other"); !errors.Is(err, env.ErrNotExist) {
		t.Errorf("rename missing: got %v, want env.ErrNotExist", err)
	}
	if err := d.Remove("missing"); !errors.Is(err, env.ErrNotExist) {
		t.Errorf("remove missing: got %v, want env.ErrNotExist", err)
	}
}

func TestFileRoundTrip(t *testing.T) {
	d, _ := newTestDisk(t)
	if err := d.MkdirAll("topic-0/sub"); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, d, "topic-0/seg.log", env.OpenOptions{Create: true})
	if f.Path() != "topic-0/seg.log" {
		t.Errorf("Path() = %q", f.Path())
	}
	if f.Size() != 0 {
		t.Errorf("new file Size() = %d", f.Size())
	}
	mustNil(t, f.Append([]byte("hello ")))
	mustNil(t, f.Append([]byte("world")))
	mustNil(t, f.WriteAt([]byte("W"), 6))
	mustNil(t, f.WriteAt([]byte("!!"), 11)) // extends the file
	want := "hello World!!"
	if f.Size() != int64(len(want)) {
		t.Errorf("Size() = %d, want %d", f.Size(), len(want))
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || err != nil || string(got) != want {
		t.Errorf("ReadAt = %d, %v, %q; want %q", n, err, got, want)
	}
	onDisk, err := os.ReadFile(filepath.Join(d.Root(), "topic-0/seg.log"))
	mustNil(t, err)
	if string(onDisk) != want {
		t.Errorf("file holds %q, want %q", onDisk, want)
	}

	mustNil(t, f.Truncate(5))
	if f.Size() != 5 {
		t.Errorf("Size() after Truncate(5) = %d", f.Size())
	}
	mustNil(t, f.Append([]byte("!")))
	mustNil(t, f.Close())

	f = mustOpen(t, d, "topic-0/seg.log", env.OpenOptions{})
	got = make([]byte, 6)
	if n, err := f.ReadAt(got, 0); n != 6 || err != nil || string(got) != "hello!" {
		t.Errorf("after reopen ReadAt = %d, %v, %q; want hello!", n, err, got)
	}
	mustNil(t, f.Close())

	mustNil(t, d.Rename("topic-0/seg.log", "topic-0/sub/renamed.log"))
	names, err := d.List("topic-0/sub")
	mustNil(t, err)
	if !slices.Equal(names, []string{"renamed.log"}) {
		t.Errorf("List after rename = %q", names)
	}
	mustNil(t, d.Remove("topic-0/sub/renamed.log"))
	mustNil(t, d.Remove("topic-0/sub"))
	names, err = d.List("topic-0")
	mustNil(t, err)
	if len(names) != 0 {
		t.Errorf("List after removals = %q, want empty", names)
	}
}

func TestRenameReplacesTheTarget(t *testing.T) {
	d, _ := newTestDisk(t)
	writeFile(t, d, "new.tmp", "new")
	writeFile(t, d, "current", "old")
	mustNil(t, d.Rename("new.tmp", "current"))
	onDisk, err := os.ReadFile(filepath.Join(d.Root(), "current"))
	mustNil(t, err)
	if string(onDisk) != "new" {
		t.Errorf("after rename current holds %q, want new", onDisk)
	}
	if _, err := d.Open("new.tmp", env.OpenOptions{}); !errors.Is(err, env.ErrNotExist) {
		t.Errorf("old name still opens: %v", err)
	}
}

func TestRemoveRefusesANonEmptyDirectory(t *testing.T) {
	d, _ := newTestDisk(t)
	mustNil(t, d.MkdirAll("full"))
	writeFile(t, d, "full/x", "x")
	if err := d.Remove("full"); err == nil {
		t.Error("Remove of a non-empty directory succeeded")
	}
}

func TestListIsSortedBytewise(t *testing.T) {
	d, _ := newTestDisk(t)
	created := []string{"b", "B", "a", "00000000000000000010.log", "00000000000000000002.log", "é", "Z-dir", "_x", "a.index"}
	for _, name := range created {
		if name == "Z-dir" {
			mustNil(t, d.MkdirAll(name))
			continue
		}
		writeFile(t, d, name, name)
	}
	names, err := d.List(".")
	mustNil(t, err)
	want := slices.Clone(created)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("List(.) = %q, want %q", names, want)
	}
	if rootNames, err := d.List(""); err != nil || !slices.Equal(rootNames, want) {
		t.Errorf(`List("") = %q, %v; want the root's entries`, rootNames, err)
	}
	if _, err := d.List("missing"); !errors.Is(err, env.ErrNotExist) {
		t.Errorf("List of a missing directory: got %v, want env.ErrNotExist", err)
	}
}

func TestListManyEntriesSpansSeveralReads(t *testing.T) {
	d, _ := newTestDisk(t)
	mustNil(t, d.MkdirAll("many"))
	var want []string
	for i := range 600 { // well past one 8 KiB getdents buffer
		name := fmt.Sprintf("%04d-a-name-long-enough-to-fill-buffers", i*37%600)
		want = append(want, name)
		writeFile(t, d, "many/"+name, "")
	}
	slices.Sort(want)
	names, err := d.List("many")
	mustNil(t, err)
	if !slices.Equal(names, want) {
		t.Errorf("List returned %d names, want %d sorted", len(names), len(want))
	}
}

func TestMkdirAllIsIdempotentAndRefusesAFile(t *testing.T) {
	d, _ := newTestDisk(t)
	mustNil(t, d.MkdirAll("a/b/c"))
	mustNil(t, d.MkdirAll("a/b/c"))
	mustNil(t, d.MkdirAll("."))
	if st, err := os.Stat(filepath.Join(d.Root(), "a/b/c")); err != nil || !st.IsDir() {
		t.Errorf("a/b/c is not a directory: %v", err)
	}
	writeFile(t, d, "a/file", "")
	if err := d.MkdirAll("a/file/x"); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("MkdirAll through a file: got %v, want ENOTDIR", err)
	}
}

func TestReadAtPastTheEndReturnsEOF(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, f.Append([]byte("abcdef")))
	buf := make([]byte, 4)
	n, err := f.ReadAt(buf, 4)
	if n != 2 || err != io.EOF || string(buf[:n]) != "ef" {
		t.Errorf("ReadAt across the end = %d, %v, %q; want 2, io.EOF, ef", n, err, buf[:n])
	}
	if n, err := f.ReadAt(buf, 6); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 0, io.EOF", n, err)
	}
	if _, err := f.ReadAt(buf, -1); err == nil {
		t.Error("ReadAt at a negative offset succeeded")
	}
	if err := f.WriteAt(buf, -1); err == nil {
		t.Error("WriteAt at a negative offset succeeded")
	}
	if err := f.Truncate(-1); err == nil {
		t.Error("Truncate to a negative size succeeded")
	}
}

func TestReadAtNoticesAFileTruncatedBehindItsBack(t *testing.T) {
	d, _ := newTestDisk(t)
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, f.Append(bytes.Repeat([]byte("x"), 100)))
	mustNil(t, f.WaitWritten(100)) // else the read is served from the write queue
	mustNil(t, unix.Ftruncate(f.Fd(), 10))
	if _, err := f.ReadAt(make([]byte, 50), 0); !errors.Is(err, env.ErrIO) {
		t.Errorf("ReadAt of vanished bytes: got %v, want env.ErrIO", err)
	}
}

func TestPreallocationNeverShowsInSize(t *testing.T) {
	d, _ := newTestDisk(t)
	const preallocateBytes = 1 << 20
	f := mustOpen(t, d, "seg", env.OpenOptions{Create: true, PreallocateBytes: preallocateBytes})
	defer f.Close()
	if f.Size() != 0 {
		t.Errorf("Size() after preallocation = %d, want 0", f.Size())
	}
	var st unix.Stat_t
	mustNil(t, unix.Fstat(f.Fd(), &st))
	if st.Size != 0 {
		t.Errorf("st_size after preallocation = %d, want 0 (FALLOC_FL_KEEP_SIZE)", st.Size)
	}
	if st.Blocks*512 < preallocateBytes {
		t.Logf("filesystem did not reserve blocks (%d bytes allocated); fallocate unsupported here", st.Blocks*512)
	}
	mustNil(t, f.Append([]byte("first")))
	got := make([]byte, 5)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "first" {
		t.Errorf("append after preallocation landed elsewhere: %q, %v", got, err)
	}
	if f.Size() != 5 {
		t.Errorf("Size() = %d, want 5", f.Size())
	}
}

func TestUseAfterCloseIsErrClosed(t *testing.T) {
	d, loop := newTestDisk(t)
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	mustNil(t, f.Close())
	checks := map[string]error{
		"Append":   f.Append([]byte("x")),
		"WriteAt":  f.WriteAt([]byte("x"), 0),
		"Truncate": f.Truncate(0),
		"Close":    f.Close(),
	}
	_, checks["ReadAt"] = f.ReadAt(make([]byte, 1), 0)
	checks["Sync"] = syncAndWait(t, loop, f.Sync)
	for name, err := range checks { // order-independent: each entry is checked alone
		if !errors.Is(err, env.ErrClosed) {
			t.Errorf("%s after Close: got %v, want env.ErrClosed", name, err)
		}
	}
}

func TestUseAfterDiskCloseIsErrClosed(t *testing.T) {
	d, loop := newTestDisk(t)
	f := mustOpen(t, d, "f", env.OpenOptions{Create: true})
	defer f.Close()
	mustNil(t, d.Close())
	if _, err := d.Open("g", env.OpenOptions{Create: true}); !errors.Is(err, env.ErrClosed) {
		t.Errorf("Open after Disk.Close: got %v, want env.ErrClosed", err)
	}
	if _, err := d.List("."); !errors.Is(err, env.ErrClosed) {
		t.Errorf("List after Disk.Close: got %v, want env.ErrClosed", err)
	}
	if err := syncAndWait(t, loop, f.Sync); !errors.Is(err, env.ErrClosed) {
		t.Errorf("Sync after Disk.Close: got %v, want env.ErrClosed", err)
	}
	if err := syncAndWait(t, loop, func(done func(error)) { d.SyncDir(".", done) }); !errors.Is(err, env.ErrClosed) {
		t.Errorf("SyncDir after Disk.Close: got %v, want env.ErrClosed", err)
	}
	if err := d.Close(); !errors.Is(err, env.ErrClosed) {
		t.Errorf("second Disk.Close: got %v, want env.ErrClosed", err)
	}
}

// writeFile creates a file holding content through the Disk.
func writeFile(t *testing.T, d *Disk, filePath, content string) {
	t.Helper()
	f := mustOpen(t, d, filePath, env.OpenOptions{Create: true})
	mustNil(t, f.Append([]byte(content)))
	mustNil(t, f.Close())
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
