package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"strand/diskio"
)

// lockedBuffer is a bytes.Buffer that serve's logger and the test may use
// at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// unopenableDir returns a path no log directory can be made at, even by
// root: a regular file (asFile) or a path under one.
func unopenableDir(t *testing.T, asFile bool) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if asFile {
		return file
	}
	return filepath.Join(file, "data")
}

// TestServeStartsWithoutAnUnusableSecondLogDir: a second log dir that is a
// regular file, or a path under one (so it cannot be created), does not
// stop serve: the first is formatted, the broker starts with the second
// offline, logs one ERROR line naming it and the cause, serves its
// controller listener, and stops on the signal.
func TestServeStartsWithoutAnUnusableSecondLogDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		asFile bool
		cause  string
	}{
		{"regular file", true, "not a directory"},
		{"under a regular file", false, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := filepath.Join(t.TempDir(), "data")
			second := unopenableDir(t, tc.asFile)
			cfgPath := writeConfig(t, "1", []string{first, second})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr lockedBuffer
			status := make(chan int, 1)
			go func() {
				status <- serveUntil(ctx, []string{"--config", cfgPath,
					"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, &stdout, &stderr)
			}()
			offlineLine := func() []string {
				var lines []string
				for _, line := range strings.Split(stderr.String(), "\n") {
					if strings.Contains(line, "level=ERROR") && strings.Contains(line, "log_dir="+second) {
						lines = append(lines, line)
					}
				}
				return lines
			}
			deadline := time.Now().Add(20 * time.Second)
			for len(offlineLine()) == 0 || !strings.Contains(stderr.String(), "msg=listening") {
				select {
				case s := <-status:
					t.Fatalf("serve exited with status %d; stderr:\n%s", s, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no ERROR line naming %s, or no listener served, within 20 s; stderr:\n%s", second, stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // a second line would come with the start
			if lines := offlineLine(); len(lines) != 1 || !strings.Contains(lines[0], tc.cause) {
				t.Errorf("ERROR lines naming %s: %q, want one naming the cause %q", second, lines, tc.cause)
			}
			if m := readMeta(t, first); m.NodeID != 1 {
				t.Errorf("first log dir formatted for node %d, want 1", m.NodeID)
			}
			cancel()
			select {
			case <-status:
				// The status is 1: the offline directory cannot be flushed,
				// so the shutdown is not clean (no clean-shutdown marker).
				if !strings.Contains(stderr.String(), "controlled shutdown complete") {
					t.Errorf("no controlled shutdown; stderr:\n%s", stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatal("serve did not stop within 60 s of the stop signal")
			}
		})
	}
}

// TestServeStartsWithoutAnUnreadableSecondMetaProperties: a second log dir
// whose meta.properties cannot be parsed starts offline (Kafka's loader
// puts a directory whose meta.properties it cannot read among its error
// log dirs), while the same in the first refuses the start.
func TestServeStartsWithoutAnUnreadableSecondMetaProperties(t *testing.T) {
	first := filepath.Join(t.TempDir(), "data")
	second := dirWithUnreadableMeta(t)
	status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{second, first}))
	if status != 1 || !strings.Contains(stderr, "log dir "+second+", the first, which holds the metadata log") ||
		!strings.Contains(stderr, "meta.properties") {
		t.Errorf("first log dir with an unreadable meta.properties: status %d, stderr %q; want a refusal naming it", status, stderr)
	}

	cfg, _, err := loadConfig(writeConfig(t, "1", []string{first, second}), overrideFlags{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := prepareLogDirs(cfg, prepareOptions{})
	if err != nil {
		t.Fatalf("prepareLogDirs with an unreadable second meta.properties: %v, want it offline", err)
	}
	dirs.release()
	if offline := dirs.offline; offline[second] == nil || !strings.Contains(offline[second].Error(), "meta.properties") || len(offline) != 1 {
		t.Errorf("offline log dirs %v, want only %s, naming meta.properties", offline, second)
	}
}

// TestServeRefusesAMismatchedSecondLogDir: a second log dir formatted for
// another node is a misconfiguration, not a disk failure: serve refuses to
// start, as Kafka does ("Stored node id ... doesn't match").
func TestServeRefusesAMismatchedSecondLogDir(t *testing.T) {
	first := filepath.Join(t.TempDir(), "data")
	second := filepath.Join(t.TempDir(), "data2")
	if status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "2", []string{second})); status != 0 {
		t.Fatal(stderr)
	}
	status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{first, second}))
	if status != 1 || !strings.Contains(stderr, "belongs to node.id 2, this is node.id 1") {
		t.Errorf("status %d, stderr %q; want a refusal naming the node ids", status, stderr)
	}
	if strings.Contains(stderr, "msg=listening") {
		t.Error("serve went on past a mismatched second log dir")
	}
}

// TestServeRefusesAnUnusableFirstLogDir: the first log dir holds the
// metadata log; serve refuses to start without it, naming it.
func TestServeRefusesAnUnusableFirstLogDir(t *testing.T) {
	first := unopenableDir(t, true)
	status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{first, filepath.Join(t.TempDir(), "data")}))
	if status != 1 || !strings.Contains(stderr, "log dir "+first+", the first, which holds the metadata log") {
		t.Errorf("status %d, stderr %q; want a refusal naming the first log dir", status, stderr)
	}
}

// TestFormatRefusesAnUnusableLogDir: format formats every directory, so
// one it cannot use fails it, naming it.
func TestFormatRefusesAnUnusableLogDir(t *testing.T) {
	second := unopenableDir(t, false)
	status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{filepath.Join(t.TempDir(), "data"), second}))
	if status != 1 || !strings.Contains(stderr, "log dir "+second) {
		t.Errorf("status %d, stderr %q; want a refusal naming %s", status, stderr, second)
	}
}

// TestAnOfflineLogDirIsLockedToo: a second log dir that starts offline (its
// meta.properties cannot be read) is locked all the same, as Kafka locks
// every log dir it can: another process configured with it is refused,
// naming the directory, though the broker holding it does not use it.
func TestAnOfflineLogDirIsLockedToo(t *testing.T) {
	first := filepath.Join(t.TempDir(), "data")
	second := dirWithUnreadableMeta(t)
	cfg, _, err := loadConfig(writeConfig(t, "1", []string{first, second}), overrideFlags{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := prepareLogDirs(cfg, prepareOptions{})
	if err != nil {
		t.Fatalf("prepareLogDirs: %v", err)
	}
	defer dirs.release()
	if dirs.offline[second] == nil || !dirs.holds(second) {
		t.Fatalf("second log dir offline %v, locked %v; want both", dirs.offline[second], dirs.holds(second))
	}
	other, _, err := loadConfig(writeConfig(t, "2", []string{second}), overrideFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepareLogDirs(other, prepareOptions{}); !errors.Is(err, diskio.ErrDirInUse) || !strings.Contains(err.Error(), second) {
		t.Errorf("another process on the offline log dir: %v, want it refused as in use, naming it", err)
	}
}

// dirWithUnreadableMeta is a new log dir whose meta.properties cannot be
// parsed.
func dirWithUnreadableMeta(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
