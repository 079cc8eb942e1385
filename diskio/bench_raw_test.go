package diskio

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRawSequentialWriteAndRead(t *testing.T) {
	dir := t.TempDir()
	for _, fsyncEach := range []bool{false, true} {
		mbPerSec, err := RawSequentialWrite(dir, 64<<10, 1<<20, fsyncEach)
		if err != nil {
			t.Fatalf("fsyncEach=%v: %v", fsyncEach, err)
		}
		if mbPerSec <= 0 {
			t.Errorf("fsyncEach=%v: throughput %v MB/s, want > 0", fsyncEach, mbPerSec)
		}
		t.Logf("raw write 64 KiB, fsyncEach=%v: %.0f MB/s", fsyncEach, mbPerSec)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("scratch files left behind: %v, %v", entries, err)
	}

	readPath := filepath.Join(dir, "read-me")
	if err := os.WriteFile(readPath, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	mbPerSec, err := RawSequentialRead(readPath, 64<<10)
	if err != nil || mbPerSec <= 0 {
		t.Errorf("raw read: %v MB/s, %v", mbPerSec, err)
	}
	t.Logf("raw page-cache read 64 KiB: %.0f MB/s", mbPerSec)
}

func TestRawThroughputRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	if _, err := RawSequentialWrite(dir, 0, 1<<20, false); err == nil {
		t.Error("writeBytes 0 accepted")
	}
	if _, err := RawSequentialWrite(dir, 1<<20, 1, false); err == nil {
		t.Error("totalBytes below writeBytes accepted")
	}
	if _, err := RawSequentialRead(filepath.Join(dir, "missing"), 4096); err == nil {
		t.Error("reading a missing file succeeded")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := RawSequentialRead(empty, 4096); err == nil {
		t.Error("reading an empty file measured something")
	}
}
