package memdisk

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/core/env"
)

// tester is what the helpers need of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustOpen(t tester, d *Disk, p string, opts env.OpenOptions) env.File {
	t.Helper()
	f, err := d.Open(p, opts)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	return f
}

func create(t tester, d *Disk, p string) env.File {
	t.Helper()
	return mustOpen(t, d, p, env.OpenOptions{Create: true})
}

func mustWrite(t tester, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}

func readAll(t tester, d *Disk, p string) []byte {
	t.Helper()
	b, err := d.ReadFile(p)
	if err != nil {
		t.Fatalf("readfile %s: %v", p, err)
	}
	return b
}

// syncNow issues Sync and runs the completion, returning its outcome.
func syncNow(t tester, d *Disk, f env.File) error {
	t.Helper()
	var got error
	called := false
	f.Sync(func(err error) { got, called = err, true })
	d.RunPending()
	if !called {
		t.Fatalf("sync %s: completion did not run", f.Path())
	}
	return got
}

func syncDirNow(t tester, d *Disk, dir string) {
	t.Helper()
	called := false
	d.SyncDir(dir, func(err error) {
		called = true
		if err != nil {
			t.Fatalf("syncdir %s: %v", dir, err)
		}
	})
	d.RunPending()
	if !called {
		t.Fatalf("syncdir %s: completion did not run", dir)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("logs/topic-0"))
	f := create(t, d, "logs/topic-0/00000.log")
	mustWrite(t, f.Append([]byte("hello ")))
	mustWrite(t, f.Append([]byte("world")))
	mustWrite(t, f.WriteAt([]byte("W"), 6))
	if f.Size() != 11 {
		t.Fatalf("size %d, want 11", f.Size())
	}
	buf := make([]byte, 11)
	n, err := f.ReadAt(buf, 0)
	if err != nil || n != 11 || string(buf) != "hello World" {
		t.Fatalf("ReadAt = %d, %v, %q", n, err, buf)
	}
	// WriteAt past the end fills the gap with zeros.
	mustWrite(t, f.WriteAt([]byte("!"), 13))
	if got, want := readAll(t, d, f.Path()), []byte("hello World\x00\x00!"); !bytes.Equal(got, want) {
		t.Fatalf("content %q, want %q", got, want)
	}
	mustWrite(t, f.Truncate(5))
	if got := readAll(t, d, f.Path()); string(got) != "hello" {
		t.Fatalf("after truncate %q", got)
	}
	mustWrite(t, f.Truncate(7))
	if got := readAll(t, d, f.Path()); string(got) != "hello\x00\x00" {
		t.Fatalf("after extending truncate %q", got)
	}
}

func TestReadAtPastEnd(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "f")
	mustWrite(t, f.Append([]byte("abc")))
	buf := make([]byte, 5)
	n, err := f.ReadAt(buf, 1)
	if n != 2 || !errors.Is(err, io.EOF) || string(buf[:n]) != "bc" {
		t.Fatalf("short read = %d, %v, %q; want 2, EOF, bc", n, err, buf[:n])
	}
	n, err = f.ReadAt(buf, 3)
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read at end = %d, %v; want 0, EOF", n, err)
	}
	n, err = f.ReadAt(buf, 10)
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read past end = %d, %v; want 0, EOF", n, err)
	}
}

func TestWriteCopiesCallerBuffer(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "f")
	p := []byte("abc")
	mustWrite(t, f.Append(p))
	p[0] = 'X'
	if got := readAll(t, d, "f"); string(got) != "abc" {
		t.Fatalf("content %q changed with the caller's buffer", got)
	}
	got := readAll(t, d, "f")
	got[0] = 'Y'
	if again := readAll(t, d, "f"); string(again) != "abc" {
		t.Fatalf("ReadFile result aliases the content: %q", again)
	}
}

func TestListSortedAndNamespace(t *testing.T) {
	d := New(Options{})
	mustWrite(t, d.MkdirAll("a/b"))
	for _, name := range []string{"zeta", "alpha", "Beta", "a.index", "a.log"} {
		mustWrite(t, create(t, d, "a/"+name).Close())
	}
	got, err := d.List("a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Beta", "a.index", "a.log", "alpha", "b", "zeta"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	root, err := d.List(".")
	if err != nil || !cmp.Equal(root, []string{"a"}) {
		t.Fatalf("List root = %v, %v", root, err)
	}
	if _, err := d.List("missing"); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("List missing: %v, want ErrNotExist", err)
	}
	mustWrite(t, d.Remove("a/zeta"))
	if err := d.Remove("a/zeta"); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("second Remove: %v", err)
	}
	if err := d.Remove("a"); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	mustWrite(t, d.Remove("a/b"))
	got, _ = d.List("a")
	if diff := cmp.Diff([]string{"Beta", "a.index", "a.log", "alpha"}, got); diff != "" {
		t.Fatalf("List after removes (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"/abs", "a/../b", "..", "a//b", "a/"} {
		if _, err := d.List(bad); err == nil {
			t.Errorf("List(%q) accepted an unclean path", bad)
		}
	}
}

func TestOpenOptions(t *testing.T) {
	d := New(Options{})
	if _, err := d.Open("f", env.OpenOptions{}); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("open missing without Create: %v", err)
	}
	if _, err := d.Open("nodir/f", env.OpenOptions{Create: true}); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("create in missing dir: %v", err)
	}
	create(t, d, "f")
	if _, err := d.Open("f", env.OpenOptions{Create: true, Exclusive: true}); !errors.Is(err, env.ErrExist) {
		t.Fatalf("exclusive create of existing: %v", err)
	}
	mustWrite(t, d.MkdirAll("dir"))
	if _, err := d.Open("dir", env.OpenOptions{}); err == nil {
		t.Fatal("opened a directory as a file")
	}
	if err := d.MkdirAll("f/sub"); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
}

func TestTwoHandlesShareAFile(t *testing.T) {
	d := New(Options{})
	a := create(t, d, "f")
	b := mustOpen(t, d, "f", env.OpenOptions{})
	mustWrite(t, a.Append([]byte("from a;")))
	mustWrite(t, b.Append([]byte("from b")))
	if a.Size() != 13 || b.Size() != 13 {
		t.Fatalf("sizes %d, %d; want 13", a.Size(), b.Size())
	}
	mustWrite(t, a.Close())
	buf := make([]byte, 13)
	if _, err := b.ReadAt(buf, 0); err != nil || string(buf) != "from a;from b" {
		t.Fatalf("read via b: %q, %v", buf, err)
	}
}

func TestRenameAndRemoveKeepHandlesWorking(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "x.cleaned")
	mustWrite(t, f.Append([]byte("data")))
	old := create(t, d, "x.log")
	mustWrite(t, old.Append([]byte("old")))
	mustWrite(t, d.Rename("x.cleaned", "x.log"))
	if got := readAll(t, d, "x.log"); string(got) != "data" {
		t.Fatalf("renamed content %q", got)
	}
	if _, err := d.ReadFile("x.cleaned"); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("old name still there: %v", err)
	}
	// The replaced file lives on through its handle, as on POSIX.
	buf := make([]byte, 3)
	if _, err := old.ReadAt(buf, 0); err != nil || string(buf) != "old" {
		t.Fatalf("replaced file via handle: %q, %v", buf, err)
	}
	mustWrite(t, d.Remove("x.log"))
	mustWrite(t, f.Append([]byte("+")))
	if f.Size() != 5 {
		t.Fatalf("removed file's size %d, want 5", f.Size())
	}
	if err := d.Rename("missing", "y"); !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("rename missing: %v", err)
	}
	mustWrite(t, d.MkdirAll("a/b"))
	if err := d.Rename("a", "a/b/c"); err == nil {
		t.Fatal("renamed a directory into itself")
	}
}

func TestClosedHandle(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "f")
	mustWrite(t, f.Close())
	checkClosed(t, d, f)
}

func checkClosed(t *testing.T, d *Disk, f env.File) {
	t.Helper()
	for name, err := range map[string]error{
		"append":   f.Append([]byte("x")),
		"writeat":  f.WriteAt([]byte("x"), 0),
		"truncate": f.Truncate(0),
		"close":    f.Close(),
	} {
		if !errors.Is(err, env.ErrClosed) {
			t.Errorf("%s on closed handle: %v, want ErrClosed", name, err)
		}
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, env.ErrClosed) {
		t.Errorf("readat on closed handle: %v, want ErrClosed", err)
	}
	var syncErr error
	f.Sync(func(err error) { syncErr = err })
	d.RunPending()
	if !errors.Is(syncErr, env.ErrClosed) {
		t.Errorf("sync on closed handle: %v, want ErrClosed", syncErr)
	}
}

func TestSyncCompletesOnRunPendingInOrder(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "f")
	mustWrite(t, f.Append([]byte("abc")))
	var order []string
	f.Sync(func(err error) { order = append(order, "sync1") })
	d.SyncDir(".", func(err error) { order = append(order, "dir") })
	f.Sync(func(err error) { order = append(order, "sync2") })
	if len(order) != 0 {
		t.Fatalf("completions ran before RunPending: %v", order)
	}
	if size, _ := d.DurableSize("f"); size != 0 {
		t.Fatalf("durable size %d before the completion ran", size)
	}
	if n := d.RunPending(); n != 3 {
		t.Fatalf("RunPending ran %d, want 3", n)
	}
	if diff := cmp.Diff([]string{"sync1", "dir", "sync2"}, order); diff != "" {
		t.Fatalf("completion order (-want +got):\n%s", diff)
	}
	if size, ok := d.DurableSize("f"); !ok || size != 3 {
		t.Fatalf("durable size %d, %v; want 3", size, ok)
	}
	if n := d.RunPending(); n != 0 {
		t.Fatalf("second RunPending ran %d", n)
	}
}

func TestPostSchedulesCompletions(t *testing.T) {
	var posted []func()
	d := New(Options{Post: func(fn func()) { posted = append(posted, fn) }})
	f := create(t, d, "f")
	mustWrite(t, f.Append([]byte("abc")))
	called := false
	f.Sync(func(err error) { called = err == nil })
	if len(posted) != 1 || called {
		t.Fatalf("posted %d, called %v; want 1, false", len(posted), called)
	}
	if n := d.RunPending(); n != 0 {
		t.Fatalf("RunPending ran %d with Post set", n)
	}
	posted[0]()
	if !called {
		t.Fatal("posted completion did not call done")
	}
	if size, _ := d.DurableSize("f"); size != 3 {
		t.Fatalf("durable size %d, want 3", size)
	}
}

func TestSyncCoversOnlyEarlierWrites(t *testing.T) {
	d := New(Options{})
	f := create(t, d, "f")
	syncDirNow(t, d, ".")
	mustWrite(t, f.Append([]byte("before")))
	f.Sync(nil)
	mustWrite(t, f.Append([]byte("after")))
	d.RunPending()
	if size, _ := d.DurableSize("f"); size != 6 {
		t.Fatalf("durable size %d, want 6 (the Sync covers only writes before it)", size)
	}
}
