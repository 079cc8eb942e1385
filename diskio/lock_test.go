package diskio

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockDirRefusesASecondHolder: a locked directory refuses a second
// LockDir, in this process too (a second node started on the same
// log.dirs), naming the directory and the holder's pid; once released it
// can be locked again.
func TestLockDirRefusesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	first, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := os.ReadFile(filepath.Join(dir, LockFileName)); strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this process's pid %d", pid, os.Getpid())
	}
	_, err = LockDir(dir)
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrDirInUse) {
		t.Fatalf("second LockDir: %v, want a DirInUseError", err)
	}
	if inUse.Dir != dir || inUse.HolderPID != os.Getpid() {
		t.Errorf("refusal names dir %q, holder %d; want %q, %d", inUse.Dir, inUse.HolderPID, dir, os.Getpid())
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not name %q", err, want)
		}
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestLockDirMissingDirectoryIsAnError: a directory that does not exist
// cannot be locked, and the error is not ErrDirInUse.
func TestLockDirMissingDirectoryIsAnError(t *testing.T) {
	_, err := LockDir(filepath.Join(t.TempDir(), "missing"))
	if err == nil || errors.Is(err, ErrDirInUse) {
		t.Fatalf("LockDir of a missing directory: %v", err)
	}
}

// lockHolderEnv makes the test binary a lock holder (TestLockHolderProcess).
const lockHolderEnv = "DISKIO_TEST_HOLD_LOCK_IN"

// TestLockHolderProcess is not a test: run with lockHolderEnv set, it
// locks that directory, says "locked" and waits to be killed.
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("a helper process for TestLockReleasedWhenTheHolderIsKilled")
	}
	if _, err := LockDir(dir); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
}

// TestLockReleasedWhenTheHolderIsKilled: another process's lock refuses
// this one, naming its pid, and the kernel drops it when that process is
// killed with SIGKILL: a restart after kill -9 finds the directory free.
func TestLockReleasedWhenTheHolderIsKilled(t *testing.T) {
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$")
	holder.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		holder.Process.Kill()
		<-exited
	})
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "locked" {
		t.Fatalf("helper did not lock: %q %v", lines.Text(), lines.Err())
	}
	go func() {
		for lines.Scan() {
		}
		holder.Wait()
		close(exited)
	}()

	_, err = LockDir(dir)
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || inUse.HolderPID != holder.Process.Pid {
		t.Fatalf("LockDir while another process holds it: %v, want a DirInUseError naming pid %d", err, holder.Process.Pid)
	}
	if !strings.Contains(err.Error(), "process "+strconv.Itoa(holder.Process.Pid)) {
		t.Errorf("message %q does not name the holder's pid", err)
	}

	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	l, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after the holder was killed: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}
