package env

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// Frame is an encoded response frame, size prefix included, made of pieces
// sent in order. A piece is either bytes the core encoded or a region of a
// file, which the environment sends without copying it through the node's
// memory where it can: realnet with sendfile, while the simulator reads the
// region from its disk into the frame (SPEC.md §2.2). Fetch answers with
// Frames so that record batches go from the segment files to the socket
// untouched (CLARIFICATIONS.md, "Reads for Fetch").
type Frame struct {
	Pieces []FramePiece
	// Release, if not nil, runs exactly once on the node's event loop once
	// every piece has been sent or the connection is gone, whichever comes
	// first: the core pins the files' regions until then, so that nothing
	// truncates or closes them under a send. It may never run if the node
	// itself shuts down.
	Release func()
}

// FramePiece is one piece of a Frame: Region when Region.File is set, else
// Bytes.
type FramePiece struct {
	Bytes  []byte
	Region FileRegion
}

// FileRegion is Bytes bytes of File from Position on. The file must hold
// them until the Frame is released.
type FileRegion struct {
	File     File
	Position int64
	Bytes    int64
}

// Len is the frame's total size in bytes, size prefix included.
func (f Frame) Len() int64 {
	var total int64
	for _, p := range f.Pieces {
		if p.Region.File != nil {
			total += p.Region.Bytes
		} else {
			total += int64(len(p.Bytes))
		}
	}
	return total
}

// RegionBytes is the total size of the frame's file regions.
func (f Frame) RegionBytes() int64 {
	var total int64
	for _, p := range f.Pieces {
		if p.Region.File != nil {
			total += p.Region.Bytes
		}
	}
	return total
}

// AppendTo appends the whole frame to dst, reading each region from its
// file: for environments without sendfile (the simulator) and for tests.
// That read is the one copy of the region's bytes.
func (f Frame) AppendTo(dst []byte) ([]byte, error) {
	for _, p := range f.Pieces {
		if p.Region.File == nil {
			dst = append(dst, p.Bytes...)
			continue
		}
		r := p.Region
		at := len(dst)
		dst = slices.Grow(dst, int(r.Bytes))[:at+int(r.Bytes)]
		n, err := r.File.ReadAt(dst[at:], r.Position)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == r.Bytes) {
			return dst[:at], fmt.Errorf("read region of %s at %d (%d bytes): %w", r.File.Path(), r.Position, r.Bytes, err)
		}
	}
	return dst, nil
}
