package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"strand/core/config"
	"strand/diskio"
)

// inUseBy is how a refusal names a log dir this test process locked.
func inUseBy(dir string) string {
	return "log dir " + dir + " is in use by this process (pid " + strconv.Itoa(os.Getpid()) + ")"
}

// TestFormatRefusesALogDirInUse: format refuses a directory whose lock is
// held (a running node), formatted or not, with --ignore-formatted too, in
// one line naming the directory and the holder, and writes nothing; once
// the lock is released it formats.
func TestFormatRefusesALogDirInUse(t *testing.T) {
	root := t.TempDir()
	free, used := filepath.Join(root, "free"), filepath.Join(root, "used")
	if err := os.Mkdir(used, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := diskio.LockDir(used)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, "1", []string{free, used})
	for _, flags := range [][]string{nil, {"--ignore-formatted"}} {
		status, stdout, stderr := runCmd(t, append([]string{"format", "--config", cfgPath}, flags...)...)
		if status != 1 || stdout != "" || !strings.Contains(stderr, inUseBy(used)) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("format %v of a dir in use: status %d, stdout %q, stderr %q; want status 1 and one line with %q", flags, status, stdout, stderr, inUseBy(used))
		}
	}
	for _, dir := range []string{free, used} {
		if _, err := os.Stat(filepath.Join(dir, config.MetaFileName)); !os.IsNotExist(err) {
			t.Errorf("the refused format wrote %s: %v", dir, err)
		}
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if status, stdout, stderr := runCmd(t, "format", "--config", cfgPath); status != 0 || !strings.HasPrefix(stdout, "formatted 2 log dir(s)") {
		t.Errorf("format once the lock is released: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// TestServeHoldsItsLogDirsUntilItStops: while serve runs, a second serve
// on the same log dirs (other ports) and a format are refused, naming the
// directory and the holder; once the first has stopped, the directory is
// free again. Two processes must never serve the same directories.
func TestServeHoldsItsLogDirsUntilItStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfgPath := writeConfig(t, "1", []string{dir})
	ports := []string{"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	status := make(chan int, 1)
	go func() {
		status <- serveUntil(ctx, append([]string{"--config", cfgPath}, ports...), &lockedBuffer{}, &stderr)
	}()
	waitUntil(t, "the first serve listening", 20*time.Second, func() bool {
		return strings.Contains(stderr.String(), "msg=listening")
	})

	// Bounded, so that a second serve that does start (as before) stops.
	secondCtx, stopSecond := context.WithTimeout(ctx, 5*time.Second)
	defer stopSecond()
	var secondStderr lockedBuffer
	second := serveUntil(secondCtx, append([]string{"--config", cfgPath}, ports...), &lockedBuffer{}, &secondStderr)
	secondErr := secondStderr.String()
	if second != 1 || !strings.Contains(secondErr, inUseBy(dir)) || strings.Contains(secondErr, "msg=listening") {
		t.Errorf("second serve on the same log dir: status %d, stderr %q; want a refusal with %q before listening", second, secondErr, inUseBy(dir))
	}
	if s, _, formatErr := runCmd(t, "format", "--config", cfgPath, "--ignore-formatted"); s != 1 || !strings.Contains(formatErr, inUseBy(dir)) {
		t.Errorf("format of a served log dir: status %d, stderr %q", s, formatErr)
	}

	cancel()
	select {
	case s := <-status:
		if s != 0 {
			t.Fatalf("first serve: status %d; stderr:\n%s", s, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s of the stop signal")
	}
	lock, err := diskio.LockDir(dir)
	if err != nil {
		t.Fatalf("the log dir is still locked after serve stopped: %v", err)
	}
	lock.Release()
}

// waitUntil polls cond every 20 ms until it holds, failing after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
