package main

// The log section's restart rows (SPEC.md §3.4): what reopening a log
// costs after a clean shutdown. One log is grown to -log-restart-bytes
// with 16 KiB batches, all in its active segment (a node whose partitions
// never rolled), and flushed, as Close flushes every log at a clean shutdown. It is
// then reopened, the repetitions interleaved, with two recovery points in
// recovery-point-offset-checkpoint (the rows' labels):
//
//   - before: the periodic checkpoint's, the last roll's flush, here 0,
//     what a shutdown that did not checkpoint its recovery points would
//     leave: the whole active segment is verified batch by batch (CRC-32C);
//   - after: the log end offset, what Close checkpoints after its final
//     flush: the segment is trusted, only the headers after its last
//     offset index entry are read (SPEC.md §3.4).
//
// Before each open the page cache of the log's files is dropped
// (POSIX_FADV_DONTNEED; the files are clean after the flush), as after a
// reboot. Bytes read are the process's rchar (/proc/self/io: every read
// system call, cached or not; the mmapped indexes are not in it) and its
// read_bytes (what reached the device).

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"strand/core/log"
)

// restartReadRatioMax is the goal: the clean restart reads at most this
// share of what the restart from recovery point 0 reads.
const restartReadRatioMax = 0.01

var restartFlags struct {
	logBytes int64
}

func registerRestartFlags() {
	flag.Int64Var(&restartFlags.logBytes, "log-restart-bytes", 1<<30-1<<20,
		"log section: size of the log reopened by the restart rows, all in its active segment (at most segment.bytes, 1 GiB)")
}

// restartRun is one reopen.
type restartRun struct {
	elapsed time.Duration
	// readBytes is the rchar delta, diskReadBytes the read_bytes delta.
	readBytes, diskReadBytes int64
}

// restartResults are the interleaved reopens of one log.
type restartResults struct {
	logBytes      int64
	before, after []restartRun
}

// measureRestart grows, flushes and closes one log, then reopens it reps
// times with each recovery point, and removes it.
func (b *logBench) measureRestart(logBytes int64) (_ *restartResults, err error) {
	if segmentBytes := log.DefaultConfig().SegmentBytes; logBytes < 1<<20 || logBytes > segmentBytes {
		return nil, fmt.Errorf("-log-restart-bytes %d: must be in [1 MiB, segment.bytes %d]", logBytes, segmentBytes)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(b.env.root, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", b.env.root, err)
	}
	if free := int64(st.Bavail) * st.Bsize; logBytes > free-diskHeadroomBytes {
		return nil, fmt.Errorf("-log-restart-bytes %d: only %.1f GB free in %s", logBytes, float64(free)/1e9, b.env.root)
	}
	nowMs := time.Now().UnixMilli()
	l, err := b.openLog(nowMs)
	if err != nil {
		return nil, err
	}
	dir := l.Dir()
	defer func() { err = errors.Join(err, os.RemoveAll(filepath.Join(b.env.root, dir))) }()
	first, _ := buildBatch(batchBytesTargets[0], nowMs)
	fmt.Printf("restart: growing one log to %.2f GB with %d B batches\n", float64(logBytes)/1e9, len(first))
	// Each batch a millisecond after the last, as a producer's batches
	// carry the time they were made: the max timestamp is in the last
	// batches, where a reopen finds it (SPEC.md §3.4). A fresh batch for
	// each append, which owns it.
	for i := int64(0); l.SizeBytes()+int64(len(first)) <= logBytes; i++ {
		next, _ := buildBatch(batchBytesTargets[0], nowMs+i)
		if _, err := l.AppendAsLeader(next, leaderEpoch, nowMs+i); err != nil {
			return nil, errors.Join(err, l.Close())
		}
		b.loop.runPending()
	}
	if err := b.flush(l, l.LogEndOffset()); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	leo, size := l.LogEndOffset(), l.SizeBytes()
	if l.SegmentCount() != 1 {
		return nil, errors.Join(fmt.Errorf("restart log %s rolled: %d segments", dir, l.SegmentCount()), l.Close())
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	r := &restartResults{logBytes: size}
	for range b.env.reps {
		for _, rp := range []int64{0, leo} {
			one, err := b.reopen(dir, rp, leo)
			if err != nil {
				return nil, err
			}
			if rp == 0 {
				r.before = append(r.before, one)
			} else {
				r.after = append(r.after, one)
			}
		}
	}
	return r, nil
}

// reopen drops the page cache of dir's files, opens the log in it with
// recoveryPoint, timed, checks that it ends at leo, and closes it.
func (b *logBench) reopen(dir string, recoveryPoint, leo int64) (restartRun, error) {
	if err := dropPageCache(filepath.Join(b.env.root, dir)); err != nil {
		return restartRun{}, err
	}
	rchar, readBytes, err := processIO()
	if err != nil {
		return restartRun{}, err
	}
	start := time.Now()
	l, err := log.Open(b.disk, dir, log.DefaultConfig(), log.OpenOptions{RecoveryPoint: recoveryPoint, NowMs: time.Now().UnixMilli()})
	elapsed := time.Since(start)
	if err != nil {
		return restartRun{}, err
	}
	rcharAfter, readBytesAfter, err := processIO()
	b.loop.runPending()
	if err == nil && l.LogEndOffset() != leo {
		err = fmt.Errorf("log %s reopened with recovery point %d ends at %d, want %d", dir, recoveryPoint, l.LogEndOffset(), leo)
	}
	if err := errors.Join(err, l.Close()); err != nil {
		return restartRun{}, err
	}
	return restartRun{elapsed: elapsed, readBytes: rcharAfter - rchar, diskReadBytes: readBytesAfter - readBytes}, nil
}

// dropPageCache asks the kernel to drop the cached pages of every file in
// dir (clean pages only: dirty ones stay).
func dropPageCache(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		f, err := os.Open(filepath.Join(dir, entry.Name()))
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		if err := errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("drop the page cache of %s: %w", entry.Name(), err)
		}
	}
	return nil
}

// processIO reads rchar and read_bytes from /proc/self/io.
func processIO() (rchar, readBytes int64, err error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	found := 0
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		name, value, ok := strings.Cut(lines.Text(), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(value, 10, 64)
		switch {
		case err != nil:
			continue
		case name == "rchar":
			rchar, found = n, found+1
		case name == "read_bytes":
			readBytes, found = n, found+1
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/self/io: rchar or read_bytes missing")
	}
	return rchar, readBytes, lines.Err()
}

// medianRestart is the median of figure over runs.
func medianRestart(runs []restartRun, figure func(restartRun) float64) float64 {
	values := make([]float64, len(runs))
	for i, r := range runs {
		values[i] = figure(r)
	}
	return medianFloat(values)
}

// printRestart prints the restart rows and reports whether the goal held.
func printRestart(r *restartResults) bool {
	ms := func(x restartRun) float64 { return x.elapsed.Seconds() * 1e3 }
	read := func(x restartRun) float64 { return float64(x.readBytes) }
	disk := func(x restartRun) float64 { return float64(x.diskReadBytes) }
	fmt.Println()
	fmt.Printf("Restart: reopening a log of %.2f GB in one active segment, page cache dropped before each open (medians of %d):\n",
		float64(r.logBytes)/1e9, len(r.after))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "recovery point checkpointed by the clean shutdown\topen ms\tMB read\tMB read from the device\t")
	for _, row := range []struct {
		name string
		runs []restartRun
	}{{"before: the last roll's (0)", r.before}, {"after: the log end offset", r.after}} {
		fmt.Fprintf(w, "%s\t%.1f\t%.3f\t%.3f\t\n", row.name, medianRestart(row.runs, ms),
			medianRestart(row.runs, read)/1e6, medianRestart(row.runs, disk)/1e6)
	}
	w.Flush()
	readRatio := medianRestart(r.after, read) / max(medianRestart(r.before, read), 1)
	timeRatio := medianRestart(r.after, ms) / max(medianRestart(r.before, ms), 1e-9)
	ok := readRatio <= restartReadRatioMax
	fmt.Printf("  after/before: open time %.4f, bytes read %.5f; goal: bytes read <= %.2f of before  %s\n",
		timeRatio, readRatio, restartReadRatioMax, passFail(ok))
	fmt.Println("  MB read: rchar of /proc/self/io (read system calls, cached or not); from the device: read_bytes")
	return ok
}
