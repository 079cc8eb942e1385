package diskio

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// ErrBadPath reports a path that is absolute, empty where a file is needed,
// or climbs out of the disk's root with "..".
var ErrBadPath = errors.New("path must be slash-separated, relative to the disk root and stay inside it")

// sentinelFor returns the env sentinel an errno stands for, or nil when the
// core has no use for telling it apart.
func sentinelFor(errno unix.Errno) error {
	switch errno {
	case unix.ENOENT:
		return env.ErrNotExist
	case unix.EEXIST:
		return env.ErrExist
	case unix.ENOSPC, unix.EDQUOT:
		return env.ErrNoSpace
	case unix.EIO:
		return env.ErrIO
	}
	return nil
}

// wrapErr wraps a system-call error with the operation and path. When the
// errno has an env sentinel, the result matches both the sentinel and the
// errno with errors.Is.
func wrapErr(op, filePath string, err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if sentinel := sentinelFor(errno); sentinel != nil {
			return fmt.Errorf("diskio: %s %s: %w (%w)", op, filePath, sentinel, err)
		}
	}
	return fmt.Errorf("diskio: %s %s: %w", op, filePath, err)
}

// wrapSyncErr wraps a failed fsync or fdatasync. Whatever the errno, a failed
// sync is env.ErrIO: the durable contents of the file are now unknown.
func wrapSyncErr(op, filePath string, err error) error {
	return fmt.Errorf("diskio: %s %s: %w (%w)", op, filePath, env.ErrIO, err)
}

// closedErr is the error for a call on a closed File or Disk.
func closedErr(op, filePath string) error {
	return fmt.Errorf("diskio: %s %s: %w", op, filePath, env.ErrClosed)
}

// cleanPath checks a caller's path and returns it cleaned, relative to the
// root ("." is the root itself). It rejects absolute paths and paths that
// climb out of the root; "a/../b" is fine because it stays inside.
func cleanPath(op, p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("diskio: %s %q: absolute path: %w", op, p, ErrBadPath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("diskio: %s %q: NUL byte in path: %w", op, p, ErrBadPath)
	}
	cleaned := path.Clean(p)
	if cleaned == ".." || strings.HasPrefix(cleaned, "../") {
		return "", fmt.Errorf("diskio: %s %q: escapes the disk root: %w", op, p, ErrBadPath)
	}
	return cleaned, nil
}

// cleanFilePath is cleanPath for operations that need a file, not the root.
func cleanFilePath(op, p string) (string, error) {
	cleaned, err := cleanPath(op, p)
	if err != nil {
		return "", err
	}
	if cleaned == "." {
		return "", fmt.Errorf("diskio: %s %q: names the disk root, not a file: %w", op, p, ErrBadPath)
	}
	return cleaned, nil
}

// ignoringEINTR retries a system call interrupted by a signal. Go installs
// its handlers with SA_RESTART, but a few calls can still see EINTR.
func ignoringEINTR(call func() error) error {
	for {
		err := call()
		if err != unix.EINTR {
			return err
		}
	}
}
