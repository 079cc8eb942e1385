package diskio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFileName is the file in every log directory that the process using
// the directory holds an exclusive flock on, as Kafka's LogManager holds
// one on its .lock. It also holds the holder's pid, for the operator and
// for the message of a process refused the lock.
const LockFileName = ".lock"

// ErrDirInUse reports a log directory whose lock another process, or
// another user in this process, holds (DirInUseError says which).
var ErrDirInUse = errors.New("log directory in use")

// DirInUseError is LockDir's refusal: Dir is locked, by HolderPID when it
// could be learnt (from /proc/locks, else the pid in the lock file), 0 if
// not.
type DirInUseError struct {
	Dir       string
	HolderPID int
}

func (e *DirInUseError) Error() string {
	holder := "another process"
	switch {
	case e.HolderPID == os.Getpid():
		holder = fmt.Sprintf("this process (pid %d)", e.HolderPID)
	case e.HolderPID > 0:
		holder = fmt.Sprintf("process %d", e.HolderPID)
	}
	return fmt.Sprintf("log dir %s is in use by %s, which holds the lock on %s: stop that process first, or give this one other log.dirs",
		e.Dir, holder, filepath.Join(e.Dir, LockFileName))
}

// Is makes errors.Is(err, ErrDirInUse) hold.
func (e *DirInUseError) Is(target error) bool { return target == ErrDirInUse }

// DirLock is the exclusive lock on a log directory, held until Release or
// the end of the process: the kernel drops a flock when its last
// descriptor closes, so a process killed with SIGKILL leaves nothing to
// clean up.
type DirLock struct {
	dir string
	fd  int
}

// LockDir takes the exclusive lock on the existing directory dir: a
// non-blocking flock on dir/.lock, created if missing, into which it then
// writes this process's pid. A lock held elsewhere fails at once with a
// *DirInUseError; any other failure is an I/O error of the directory.
// Locks are per open file, so a second LockDir of the same directory in
// this process is refused too.
func LockDir(dir string) (*DirLock, error) {
	lockPath := filepath.Join(dir, LockFileName)
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(lockPath, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		return err
	})
	if err != nil {
		return nil, wrapErr("lock", lockPath, err)
	}
	err = ignoringEINTR(func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
	if err == unix.EWOULDBLOCK {
		holder := lockHolderPID(fd)
		unix.Close(fd)
		return nil, &DirInUseError{Dir: dir, HolderPID: holder}
	}
	if err != nil {
		unix.Close(fd)
		return nil, wrapErr("lock", lockPath, err)
	}
	// The pid only informs: a full disk that cannot take these few bytes
	// must not stop the process that holds the lock (/proc/locks still
	// names it).
	if unix.Ftruncate(fd, 0) == nil {
		_, _ = unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{dir: dir, fd: fd}, nil
}

// Dir is the locked directory.
func (l *DirLock) Dir() string { return l.dir }

// Release empties the pid and drops the lock. Calling it again does nothing.
func (l *DirLock) Release() error {
	if l.fd < 0 {
		return nil
	}
	_ = unix.Ftruncate(l.fd, 0) // a stale pid would only mislead
	err := unix.Close(l.fd)
	l.fd = -1
	if err != nil {
		return wrapErr("unlock", filepath.Join(l.dir, LockFileName), err)
	}
	return nil
}

// lockHolderPID names the process holding the flock on fd's file: from
// /proc/locks, which the kernel keeps, else from the pid the holder wrote
// into the file (which a holder that has just taken the lock may not have
// written yet); 0 if neither says.
func lockHolderPID(fd int) int {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		if pid := flockHolderFromProcLocks(st.Dev, st.Ino); pid > 0 {
			return pid
		}
	}
	buf := make([]byte, 32)
	n, _ := unix.Pread(fd, buf, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:max(n, 0)])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// flockHolderFromProcLocks finds the holder of a FLOCK on the file (dev,
// ino) in /proc/locks, whose lines read
// "1: FLOCK  ADVISORY  WRITE 4242 08:02:1311 0 EOF" (major and minor in
// hex); waiters' lines ("1: -> FLOCK ...") are skipped. 0 if none.
func flockHolderFromProcLocks(dev, ino uint64) int {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
