package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogBytesPerRecordCountsOnlyThePartitionsLogs: the bytes per record
// are the .log files of the topic's partition 0, not its indexes.
func TestLogBytesPerRecordCountsOnlyThePartitionsLogs(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "bench-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"00000000000000000000.log": 6000, "00000000000000000050.log": 6000, "00000000000000000000.index": 4000} {
		if err := os.WriteFile(filepath.Join(part, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := logBytesPerRecord(dir, "bench", 100)
	if err != nil || got != 120 {
		t.Fatalf("got %v, %v; want 120 bytes per record", got, err)
	}
	if _, err := logBytesPerRecord(dir, "other", 100); err == nil {
		t.Fatal("a topic without a log gave a figure")
	}
}

// TestSealCostGrowsWithTheRecord: the seal limit is per byte, so twice the
// bytes per record cost about twice as much.
func TestSealCostGrowsWithTheRecord(t *testing.T) {
	small, err := sealSecPerMillion(100)
	if err != nil || small <= 0 {
		t.Fatalf("seal of 100 B records: %v, %v", small, err)
	}
	large, err := sealSecPerMillion(1000)
	if err != nil {
		t.Fatal(err)
	}
	if ratio := large / small; ratio < 5 || ratio > 20 {
		t.Fatalf("1000 B records cost %.1f× 100 B ones, want about 10×", ratio)
	}
}
