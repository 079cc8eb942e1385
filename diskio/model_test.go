package diskio

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"pgregory.net/rapid"

	"strand/core/env"
)

// TestFileMatchesAModel drives a File, mapped or not, through random appends,
// overwrites, truncations, reads and reopens, and checks every read and every
// Size against a plain byte slice.
func TestFileMatchesAModel(t *testing.T) {
	d, _ := newTestDisk(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		filePath := fmt.Sprintf("f-%d", run)
		opts := env.OpenOptions{Create: true}
		if rapid.Bool().Draw(rt, "mapped") {
			opts.MappedBytesMax = int64(rapid.IntRange(1, 3*4096).Draw(rt, "mappedBytesMax"))
		}
		f, err := d.OpenFile(filePath, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { f.Close() }()
		var model []byte
		bytesGen := rapid.SliceOfN(rapid.Byte(), 0, 5000)

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				p := bytesGen.Draw(rt, "p")
				if err := f.Append(bytes.Clone(p)); err != nil {
					rt.Fatal(err)
				}
				model = append(model, p...)
			},
			"writeAt": func(rt *rapid.T) {
				p := bytesGen.Draw(rt, "p")
				off := rapid.IntRange(0, len(model)+100).Draw(rt, "off")
				if err := f.WriteAt(bytes.Clone(p), int64(off)); err != nil {
					rt.Fatal(err)
				}
				if len(p) == 0 {
					return // an empty write extends nothing
				}
				if end := off + len(p); end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], p)
			},
			"truncate": func(rt *rapid.T) {
				size := rapid.IntRange(0, len(model)+100).Draw(rt, "size")
				if err := f.Truncate(int64(size)); err != nil {
					rt.Fatal(err)
				}
				if size > len(model) {
					model = append(model, make([]byte, size-len(model))...)
				}
				model = model[:size]
			},
			"readAt": func(rt *rapid.T) {
				off := rapid.IntRange(0, len(model)+10).Draw(rt, "off")
				n := rapid.IntRange(0, 6000).Draw(rt, "n")
				got := make([]byte, n)
				read, err := f.ReadAt(got, int64(off))
				wantRead := max(0, min(n, len(model)-off))
				if read != wantRead {
					rt.Fatalf("ReadAt(%d bytes at %d) read %d, want %d (size %d)", n, off, read, wantRead, len(model))
				}
				if wantRead < n && err != io.EOF {
					rt.Fatalf("short ReadAt returned %v, want io.EOF", err)
				}
				if wantRead == n && err != nil {
					rt.Fatalf("full ReadAt returned %v", err)
				}
				if read > 0 && !bytes.Equal(got[:read], model[off:off+read]) {
					rt.Fatalf("ReadAt(%d bytes at %d) returned different bytes", n, off)
				}
			},
			"reopen": func(rt *rapid.T) {
				if err := f.Close(); err != nil {
					rt.Fatal(err)
				}
				if f, err = d.OpenFile(filePath, opts); err != nil {
					rt.Fatal(err)
				}
			},
			"": func(rt *rapid.T) {
				if f.Size() != int64(len(model)) {
					rt.Fatalf("Size() = %d, model has %d bytes", f.Size(), len(model))
				}
			},
		})
	})
}
