package env_test

import (
	"bytes"
	"errors"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// A frame reads as its pieces in order, regions read from their file; a
// region the file does not hold is an error, not a short frame.
func TestFrameAppendToReadsRegionsInOrder(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	f, err := disk.Open("seg", env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Append([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	frame := env.Frame{Pieces: []env.FramePiece{
		{Bytes: []byte("<")},
		{Region: env.FileRegion{File: f, Position: 2, Bytes: 3}},
		{Bytes: []byte("|")},
		{Region: env.FileRegion{File: f, Position: 8, Bytes: 2}},
		{Bytes: []byte(">")},
	}}
	got, err := frame.AppendTo([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "x<234|89>"; string(got) != want {
		t.Fatalf("AppendTo = %q, want %q", got, want)
	}
	if frame.Len() != 8 || frame.RegionBytes() != 5 {
		t.Fatalf("Len %d, RegionBytes %d; want 8, 5", frame.Len(), frame.RegionBytes())
	}
	short := env.Frame{Pieces: []env.FramePiece{{Region: env.FileRegion{File: f, Position: 8, Bytes: 5}}}}
	if got, err := short.AppendTo([]byte("x")); err == nil || !bytes.Equal(got, []byte("x")) {
		t.Fatalf("a region past the end of the file: %q, %v; want an error and dst unchanged", got, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := frame.AppendTo(nil); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("a region of a closed file: %v, want ErrClosed", err)
	}
}
