package diskio

import (
	"fmt"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// mapAtLeast (re)maps the file read-only and shared, covering at least
// bytesMin bytes rounded up to whole pages. Mapping past the end of the file
// is legal on Linux; only touching pages wholly past it faults, and reads stay
// below the logical size. Writes go through pwrite, which the shared mapping
// sees at once because both use the same page cache.
func (f *File) mapAtLeast(bytesMin int64) error {
	pageBytes := int64(unix.Getpagesize())
	mapBytes := (bytesMin + pageBytes - 1) / pageBytes * pageBytes
	mapped, err := unix.Mmap(f.fd, 0, int(mapBytes), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return wrapErr("mmap", f.path, err)
	}
	if err := f.unmap(); err != nil {
		unix.Munmap(mapped)
		return err
	}
	f.mapped = mapped
	return nil
}

// unmap drops the mapping, if any.
func (f *File) unmap() error {
	if f.mapped == nil {
		return nil
	}
	err := unix.Munmap(f.mapped)
	f.mapped = nil
	if err != nil {
		return wrapErr("munmap", f.path, err)
	}
	return nil
}

// readMapped copies p from the mapping at off; off+len(p) is within the
// logical size. A file that has grown past the mapping is remapped at twice
// the size, so that a growing index is remapped a logarithmic number of
// times. A fault while copying (the file was truncated behind the File's
// back, or the device failed to read the page in) becomes env.ErrIO.
func (f *File) readMapped(p []byte, off int64) error {
	end := off + int64(len(p))
	if end > int64(len(f.mapped)) {
		if err := f.mapAtLeast(max(end, 2*int64(len(f.mapped)))); err != nil {
			return err
		}
	}
	if addr, faulted := copyCatchingFault(p, f.mapped[off:end]); faulted {
		return fmt.Errorf("diskio: readat %s: memory fault at %#x reading [%d, %d) through the map: %w",
			f.path, addr, off, end, env.ErrIO)
	}
	return nil
}

// copyCatchingFault copies src to dst and turns a memory fault (SIGBUS on a
// mapped page the file no longer backs) into a result instead of a crash. Any
// other panic propagates.
func copyCatchingFault(dst, src []byte) (faultAddr uintptr, faulted bool) {
	previous := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(previous)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fault, ok := r.(interface{ Addr() uintptr })
		if !ok {
			panic(r)
		}
		faultAddr, faulted = fault.Addr(), true
	}()
	copy(dst, src)
	return 0, false
}
