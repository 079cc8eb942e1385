package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// referenceDataDir is where the broker keeps its data by default
// (log.dirs=./data): the benchmark must write on the same filesystem, or its
// figures say nothing about the broker.
const referenceDataDir = "./data"

// benchEnv is what every section shares: the directory to write in and how
// often to repeat each measurement.
type benchEnv struct {
	// root is an empty directory of the benchmark's own, removed by close.
	root string
	reps int
	// filesystem describes the filesystem root lives on.
	filesystem mountInfo
	// reference is the directory whose filesystem root was checked against
	// (./data, or its nearest existing ancestor).
	reference string
}

// newBenchEnv creates the benchmark's directory: inside dir if given, else in
// the system temporary directory if that shares ./data's filesystem, else in
// the current directory (the repository). It refuses a dir on another
// filesystem than ./data.
func newBenchEnv(dir string, reps int) (*benchEnv, error) {
	reference, err := nearestExisting(referenceDataDir)
	if err != nil {
		return nil, err
	}
	referenceDev, err := deviceOf(reference)
	if err != nil {
		return nil, err
	}
	parent := dir
	if parent == "" {
		parent = os.TempDir()
		if dev, err := deviceOf(parent); err != nil || dev != referenceDev {
			parent = "."
		}
	}
	parentDev, err := deviceOf(parent)
	if err != nil {
		return nil, err
	}
	if parentDev != referenceDev {
		return nil, fmt.Errorf("-dir %s is not on the filesystem of %s (%s): the figures would not be the broker's", parent, referenceDataDir, reference)
	}
	root, err := os.MkdirTemp(parent, "strandbench-")
	if err != nil {
		return nil, fmt.Errorf("create benchmark directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, err
	}
	mount, err := mountOf(parentDev)
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return &benchEnv{root: root, reps: reps, filesystem: mount, reference: reference}, nil
}

// describe prints where the benchmark writes.
func (e *benchEnv) describe() {
	fmt.Printf("strandbench: writing in %s\n", e.root)
	fmt.Printf("  filesystem: %s on %s, mounted at %s; the same filesystem as %s (checked on %s)\n",
		e.filesystem.fsType, e.filesystem.source, e.filesystem.mountPoint, referenceDataDir, e.reference)
	fmt.Printf("  every figure is the median of %d runs, interleaved with the runs of its limit\n", e.reps)
	printLoad("at start")
}

// printLoad prints the load average: the machine is shared, and wall-clock
// figures mean little when the run queue is long.
func printLoad(when string) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return // informational only
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return
	}
	fmt.Printf("  load average %s: %s %s %s (1, 5, 15 min) on %d CPUs\n", when, fields[0], fields[1], fields[2], runtime.NumCPU())
}

// close removes everything the benchmark wrote.
func (e *benchEnv) close() {
	if err := os.RemoveAll(e.root); err != nil {
		fmt.Fprintln(os.Stderr, "strandbench: cleanup:", err)
	}
}

// nearestExisting returns path made absolute, or its nearest ancestor that
// exists: ./data is created by the broker and may not exist yet.
func nearestExisting(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(abs); err == nil {
			return abs, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return "", fmt.Errorf("no ancestor of %s exists", path)
		}
		abs = parent
	}
}

func deviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Dev, nil
}

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	mountPoint, fsType, source string
}

// mountOf finds the mount of device dev in /proc/self/mountinfo, whose lines
// read: id parent major:minor root mountpoint options [optional...] - fstype
// source superoptions.
func mountOf(dev uint64) (mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountInfo{}, err
	}
	defer f.Close()
	want := strconv.FormatUint(uint64(unix.Major(dev)), 10) + ":" + strconv.FormatUint(uint64(unix.Minor(dev)), 10)
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		dash := -1
		for i, field := range fields {
			if field == "-" {
				dash = i
				break
			}
		}
		if len(fields) < 5 || dash < 0 || dash+2 >= len(fields) || fields[2] != want {
			continue
		}
		return mountInfo{mountPoint: fields[4], fsType: fields[dash+1], source: fields[dash+2]}, nil
	}
	if err := scanner.Err(); err != nil {
		return mountInfo{}, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	return mountInfo{}, fmt.Errorf("device %s not found in /proc/self/mountinfo", want)
}

// memoryKiB reads RssAnon and RssFile (kB) from /proc/self/status. RssAnon
// is what the memory goal measures (CLARIFICATIONS.md, "Memory"); RssFile
// holds the mapped index pages, which are excluded.
func memoryKiB() (rssAnon, rssFile int64, err error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", name, err)
		}
		if name == "RssAnon" {
			rssAnon = kib
		} else {
			rssFile = kib
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc/self/status: RssAnon or RssFile missing")
	}
	return rssAnon, rssFile, nil
}
