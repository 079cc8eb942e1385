package diskio

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Raw filesystem throughput, the physical limit the log benchmark reports its
// own figures against (CLARIFICATIONS.md, "Benchmarks": the denominator of
// the log append ratio is raw sequential write with the same write size and
// no fsync, measured in the same run). These functions are deliberately the
// plainest possible loops, pwrite or pread of one reused buffer, with no
// diskio.File in the way. Throughput is in MB/s, 10^6 bytes per second.

// rawScratchSequence keeps concurrent RawSequentialWrite calls in one process
// on distinct scratch files.
var rawScratchSequence atomic.Int64

// RawSequentialWrite writes totalBytes to a new scratch file in dir with
// pwrite calls of writeBytes each, and returns the throughput in MB/s. With
// fsyncEach it calls fdatasync after every write (the figure for
// log.flush.interval.messages=1); without, the bytes end in the page cache
// and are never synced, which is what the default flush policy compares to.
// The scratch file is removed before returning.
func RawSequentialWrite(dir string, writeBytes int, totalBytes int64, fsyncEach bool) (mbPerSec float64, err error) {
	if writeBytes <= 0 {
		return 0, fmt.Errorf("diskio: raw write: writeBytes is %d, must be > 0", writeBytes)
	}
	if totalBytes < int64(writeBytes) {
		return 0, fmt.Errorf("diskio: raw write: totalBytes %d is less than writeBytes %d", totalBytes, writeBytes)
	}
	scratchPath := filepath.Join(dir, fmt.Sprintf("raw-write-%d-%d.tmp", os.Getpid(), rawScratchSequence.Add(1)))
	fd, err := unix.Open(scratchPath, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return 0, wrapErr("raw write", scratchPath, err)
	}
	defer unix.Unlink(scratchPath)
	defer unix.Close(fd)

	buf := make([]byte, writeBytes)
	for i := range buf {
		buf[i] = byte(i*7 + 1) // not zeros: some filesystems treat zero pages specially
	}
	start := time.Now()
	for off := int64(0); off < totalBytes; off += int64(writeBytes) {
		chunk := buf[:min(int64(writeBytes), totalBytes-off)]
		if n, err := pwriteAll(fd, chunk, off); err != nil {
			return 0, wrapErr("raw write", scratchPath, fmt.Errorf("wrote %d of %d bytes at %d: %w", n, len(chunk), off, err))
		}
		if fsyncEach {
			if err := ignoringEINTR(func() error { return unix.Fdatasync(fd) }); err != nil {
				return 0, wrapSyncErr("raw write", scratchPath, err)
			}
		}
	}
	return megabytesPerSecond(totalBytes, time.Since(start)), nil
}

// RawSequentialRead reads the whole file at filePath with pread calls of
// readBytes each and returns the throughput in MB/s. It reads whatever cache
// state the file is in: read a file just written for the page-cache figure.
func RawSequentialRead(filePath string, readBytes int) (mbPerSec float64, err error) {
	if readBytes <= 0 {
		return 0, fmt.Errorf("diskio: raw read: readBytes is %d, must be > 0", readBytes)
	}
	fd, err := unix.Open(filePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, wrapErr("raw read", filePath, err)
	}
	defer unix.Close(fd)

	buf := make([]byte, readBytes)
	totalBytes := int64(0)
	start := time.Now()
	for {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Pread(fd, buf, totalBytes)
			return err
		})
		if err != nil {
			return 0, wrapErr("raw read", filePath, err)
		}
		if n == 0 {
			break
		}
		totalBytes += int64(n)
	}
	elapsed := time.Since(start)
	if totalBytes == 0 {
		return 0, fmt.Errorf("diskio: raw read %s: file is empty, nothing to measure", filePath)
	}
	return megabytesPerSecond(totalBytes, elapsed), nil
}

// megabytesPerSecond converts a byte count and a duration to MB/s.
func megabytesPerSecond(bytes int64, elapsed time.Duration) float64 {
	return float64(bytes) / 1e6 / max(elapsed.Seconds(), 1e-9)
}
