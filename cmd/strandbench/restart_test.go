package main

import (
	"os"
	"strconv"
	"testing"

	"strand/diskio"
)

// TestRestartRows runs the restart measurement on a small log (or on
// STRANDBENCH_RESTART_BYTES, to reproduce the section's figure without the
// rest of it): the reopen at the recovery point a clean shutdown now
// checkpoints reads under 1% of what the reopen at the old one read, which
// verifies the whole segment, and nothing is left behind.
func TestRestartRows(t *testing.T) {
	logBytes := int64(16 << 20)
	if s := os.Getenv("STRANDBENCH_RESTART_BYTES"); s != "" {
		var err error
		if logBytes, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("STRANDBENCH_RESTART_BYTES=%q: %v", s, err)
		}
	}
	root := t.TempDir()
	loop := newEventLoop()
	disk, err := diskio.New(root, diskio.Options{Post: loop.post})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	b := &logBench{env: &benchEnv{root: root, reps: 3}, loop: loop, disk: disk}
	r, err := b.measureRestart(logBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.before) != 3 || len(r.after) != 3 || r.logBytes > logBytes || r.logBytes < logBytes-(32<<10) {
		t.Fatalf("%d and %d runs of a %d-byte log, want 3 each of about %d bytes", len(r.before), len(r.after), r.logBytes, logBytes)
	}
	for i := range r.before {
		if r.before[i].readBytes < r.logBytes {
			t.Errorf("rep %d: the reopen at the old recovery point read %d bytes, less than the %d-byte segment it verifies", i, r.before[i].readBytes, r.logBytes)
		}
		if r.after[i].readBytes > r.logBytes/100 {
			t.Errorf("rep %d: the reopen at the log end offset read %d bytes of a %d-byte log", i, r.after[i].readBytes, r.logBytes)
		}
		t.Logf("rep %d: before %v, %d B read (%d from the device); after %v, %d B read (%d from the device)", i,
			r.before[i].elapsed, r.before[i].readBytes, r.before[i].diskReadBytes, r.after[i].elapsed, r.after[i].readBytes, r.after[i].diskReadBytes)
	}
	if !printRestart(r) {
		t.Error("printRestart reports the goal missed")
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Errorf("left behind in %s: %v, %v", root, entries, err)
	}
}
