package main

// The page-cache write limit of the broker section: what this machine's
// kernel charges a process for writing the bytes Strand's case (a) writes,
// measured right after each of (a)'s 1 KiB produce runs, so that it sees the
// memory state (a)'s run saw.
//
// On this VM (Firecracker, virtio-balloon free page reporting) memory the
// guest freed is handed back to the host, and a page the guest allocates
// afresh costs a host fault on first touch: writing into new page-cache pages
// costs several times what overwriting cached ones does, and at 1 KiB most of
// Strand's broker CPU is that copy (docs/benchmarks.md).
// kfake keeps its records on its Go heap and writes no file. The limit makes
// every run show how much of Strand's CPU per record is the machine's; it is
// information beside the goal, never a new goal: "broker CPU per record ≤
// 0.5 × kfake's" is held to Strand's whole figure.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// pageCacheWriteBytes is the size of each write of the limit. Strand's write
// worker (diskio/writer.go) writes each run of queued appends with one
// pwritev, and under kgo at 1 KiB each append is one Produce request's
// batch, about 1 MB (kgo's ProducerBatchMaxBytes, 1,000,012 by default):
// 1 MiB writes are the broker's. The same size as the disk limit's.
const pageCacheWriteBytes = diskWriteBytes

// pageCacheValueBytes is the value size whose CPU goal the limit explains:
// the limit runs after (a)'s produce runs of this size only; the other
// size's figures are scaled by its bytes per record.
const pageCacheValueBytes = 1 << 10

// pageCacheRun is one measurement of the limit: bytes written into a new
// file, then the same bytes again over that file while its pages are still
// cached. The CPU times are the writing thread's alone (user + system).
type pageCacheRun struct {
	bytes int64
	// fresh is the CPU time of writing the new file: every page a new
	// page-cache page, which this VM's host faults on first touch.
	fresh time.Duration
	// cached is the CPU time of overwriting it: the copy alone, no page
	// allocated, below what any machine pays for new pages.
	cached time.Duration
}

// secPerGB is cpu seconds per 10^9 bytes of the run.
func (r pageCacheRun) secPerGB(cpu time.Duration) float64 {
	return cpu.Seconds() / (float64(r.bytes) / 1e9)
}

// secPerMillion is cpu scaled to a million records of bytesPerRecord bytes
// each: the CPU seconds writing them would cost at the run's cost per byte.
func (r pageCacheRun) secPerMillion(cpu time.Duration, bytesPerRecord float64) float64 {
	return cpu.Seconds() / float64(r.bytes) * bytesPerRecord * 1e6
}

// threadCPU is the calling thread's CPU time so far, user and system, to
// the nanosecond (getrusage's RUSAGE_THREAD moves only at the scheduler's
// ticks). The caller must be locked to its thread (runtime.LockOSThread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(fmt.Sprintf("strandbench: clock_gettime(CLOCK_THREAD_CPUTIME_ID): %v", err)) // cannot fail on Linux
	}
	return time.Duration(ts.Nano())
}

// measurePageCacheWrite writes totalBytes into a new file at path with
// pageCacheWriteBytes pwrites and no fsync, then overwrites it the same way,
// with the calling goroutine locked to its thread, and returns the two CPU
// times of that thread: the rest of this process (kgo's goroutines winding
// down, the garbage collector) does not enter them. The file is left in
// place, its pages in the page cache: removing it would free gigabytes that
// the next runs would then reuse at a fraction of the cost of new pages.
func measurePageCacheWrite(path string, totalBytes int64) (pageCacheRun, error) {
	if totalBytes <= 0 {
		return pageCacheRun{}, fmt.Errorf("page-cache write limit: %d bytes to write, must be > 0", totalBytes)
	}
	// Unlocked on return: a goroutine that ends locked ends its thread, and
	// the kernel sends a child its Pdeathsig when the thread that forked it
	// ends (brokerProcess.start sets SIGKILL). A first version measured on
	// a goroutine of its own that ended locked, and killed the brokers its
	// thread had started.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return writePageCache(path, totalBytes)
}

// writePageCache is measurePageCacheWrite's work, on a locked thread.
func writePageCache(path string, totalBytes int64) (pageCacheRun, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return pageCacheRun{}, fmt.Errorf("page-cache write limit: create %s: %w", path, err)
	}
	defer unix.Close(fd)
	buf := recordValue(pageCacheWriteBytes) // touched here, outside the timing
	writeAll := func() (time.Duration, error) {
		start := threadCPU()
		for off := int64(0); off < totalBytes; off += pageCacheWriteBytes {
			if err := pwriteFull(fd, buf[:min(pageCacheWriteBytes, totalBytes-off)], off); err != nil {
				return 0, fmt.Errorf("page-cache write limit: %s: %w", path, err)
			}
		}
		return threadCPU() - start, nil
	}
	run := pageCacheRun{bytes: totalBytes}
	if run.fresh, err = writeAll(); err != nil {
		return pageCacheRun{}, err
	}
	if run.cached, err = writeAll(); err != nil {
		return pageCacheRun{}, err
	}
	return run, nil
}

// pwriteFull writes all of p at off, continuing after short writes and
// EINTR.
func pwriteFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pwrite of %d bytes at %d: %w", len(p), off, err)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// logBytes is the size of the .log segment files of partition 0 of topic,
// summed over the cluster's Strand nodes: the record batches they have
// written. Space allocated ahead of a segment's end is not in its size.
func (c *cluster) logBytes(topic string) (int64, error) {
	if len(c.dataDirs) == 0 {
		return 0, fmt.Errorf("%s: no data directories (not a Strand cluster)", c.name)
	}
	var total int64
	for _, dir := range c.dataDirs {
		paths, err := filepath.Glob(filepath.Join(dir, topic+"-0", "*.log"))
		if err != nil {
			return 0, err
		}
		for _, p := range paths {
			info, err := os.Stat(p)
			if err != nil {
				return 0, err
			}
			total += info.Size()
		}
	}
	return total, nil
}

// settledLogBytes is logBytes once two reads 20 ms apart agree: a produce
// run's last appends may still be queued in the broker's write worker when
// its acknowledgements arrive. It gives up waiting after a second.
func (c *cluster) settledLogBytes(topic string) (int64, error) {
	last, err := c.logBytes(topic)
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		now, err := c.logBytes(topic)
		if err != nil {
			return 0, err
		}
		if now == last {
			break
		}
		last = now
	}
	return last, nil
}

// bytesPerRecord is the median over a size's produce runs of the case of
// the log bytes each run added per record (its warm-up record included).
func (r *caseResults) bytesPerRecord(size int) float64 {
	var values []float64
	for i, logged := range r.loggedBytes[size] {
		values = append(values, float64(logged)/float64(r.produce[size][i].records+1))
	}
	return medianFloat(values)
}

// pageCacheFigures are the limit's per-record figures for one of (a)'s
// runs of pageCacheValueBytes, paired with (a)'s and kfake's runs of the
// same repetition.
type pageCacheFigures struct {
	// freshPerMillion and cachedPerMillion are the limit's CPU seconds per
	// million records of (a)'s bytes per record in that run.
	freshPerMillion, cachedPerMillion float64
	// strandPerMillion and kfakePerMillion are the brokers' CPU seconds
	// per million records in the repetition.
	strandPerMillion, kfakePerMillion float64
}

// machineShare is the part of Strand's CPU per record the new page-cache
// pages account for.
func (f pageCacheFigures) machineShare() float64 { return f.freshPerMillion / f.strandPerMillion }

// ownOverKfake is Strand's CPU per record without the new page-cache write,
// over kfake's.
func (f pageCacheFigures) ownOverKfake() float64 {
	return (f.strandPerMillion - f.freshPerMillion) / f.kfakePerMillion
}

// pageCachePairs are the figures of each repetition of a's runs of
// pageCacheValueBytes, with kfake's runs of the same repetition.
func pageCachePairs(a, kfake *caseResults) []pageCacheFigures {
	size := slices.Index(valueSizes, pageCacheValueBytes)
	var pairs []pageCacheFigures
	for i, pc := range a.pageCacheRuns {
		strand := a.produce[size][i]
		bytesPerRecord := float64(a.loggedBytes[size][i]) / float64(strand.records+1)
		pairs = append(pairs, pageCacheFigures{
			freshPerMillion:  pc.secPerMillion(pc.fresh, bytesPerRecord),
			cachedPerMillion: pc.secPerMillion(pc.cached, bytesPerRecord),
			strandPerMillion: strand.cpuSecPerMillion(),
			kfakePerMillion:  kfake.produce[size][i].cpuSecPerMillion(),
		})
	}
	return pairs
}

// medianOfPairs is the median of figure over pairs.
func medianOfPairs(pairs []pageCacheFigures, figure func(pageCacheFigures) float64) float64 {
	var values []float64
	for _, p := range pairs {
		values = append(values, figure(p))
	}
	return medianFloat(values)
}

// printPageCacheLimit prints the limit's table: one row per run, and the
// medians. a is the case whose writes it repeats; nothing is printed if it
// has no runs.
func printPageCacheLimit(out io.Writer, a, kfake *caseResults) {
	if len(a.pageCacheRuns) == 0 {
		return
	}
	pairs := pageCachePairs(a, kfake)
	const small = 0 // valueSizes[0], the 100-byte values
	smallBytesPerRecord := a.bytesPerRecord(small)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "limit: page-cache write of %s's %s runs' bytes\tMB\tCPU s/GB new\tcached\ts/M %s rec new\tcached\ts/M %s rec new\tcached\t%s broker s/M %s rec\tnew/%s\t(%s-new)/kfake\t\n",
		a.c.label, sizeName(pageCacheValueBytes), sizeName(pageCacheValueBytes), sizeName(valueSizes[small]), a.c.label, sizeName(pageCacheValueBytes), a.c.label, a.c.label)
	var (
		rows       [][]float64
		bytesTotal int64
	)
	for i, pc := range a.pageCacheRuns {
		p := pairs[i]
		bytesTotal += pc.bytes
		rows = append(rows, []float64{float64(pc.bytes) / 1e6, pc.secPerGB(pc.fresh), pc.secPerGB(pc.cached), p.freshPerMillion, p.cachedPerMillion,
			pc.secPerMillion(pc.fresh, smallBytesPerRecord), pc.secPerMillion(pc.cached, smallBytesPerRecord), p.strandPerMillion, p.machineShare(), p.ownOverKfake()})
	}
	formats := []string{"%.0f", "%.3f", "%.3f", "%.2f", "%.2f", "%.3f", "%.3f", "%.2f", "%.2f", "%.2f"}
	printRow := func(label string, values []float64) {
		var b strings.Builder
		b.WriteString(label)
		for j, v := range values {
			b.WriteString("\t")
			fmt.Fprintf(&b, formats[j], v)
		}
		fmt.Fprintln(w, b.String()+"\t")
	}
	for i, row := range rows {
		printRow(fmt.Sprintf("run %d", i+1), row)
	}
	medians := make([]float64, len(formats))
	for j := range medians {
		var column []float64
		for _, row := range rows {
			column = append(column, row[j])
		}
		medians[j] = medianFloat(column)
	}
	printRow("median", medians)
	w.Flush()
	fmt.Fprintf(out, `
  The page-cache write limit runs right after each of %s's %s produce runs, on the broker's filesystem:
  the bytes that run added to its log (%.0f MB in all; %.1f bytes per record at %s, %.1f at %s), written
  from one reused buffer into a new file with %d KiB pwrites and no fsync ("new": fresh page-cache pages,
  which this VM's host faults on first touch), then the same bytes over that file ("cached": the copy
  alone, no page to allocate, below what any machine pays for new pages). CPU is the writing thread's,
  user + system. The files stay until the end, so that the next runs do not reuse their freed pages.
  s/M rec scales the cost per byte to %s's bytes per record; new/%s is the limit's share of %s's broker
  CPU in the same repetition, (%s-new)/kfake what is left of it over (c)'s. The cost of new pages swings
  (0.2 to 2.3 s/GB on this VM) with how much memory the machine freed in the seconds before and has not yet
  handed back: a share near or above 1 means (a)'s run got cheaper pages than the limit, right after it,
  did. Information: the CPU goal is held to the whole figure.
`, a.c.label, sizeName(pageCacheValueBytes), float64(bytesTotal)/1e6, a.bytesPerRecord(slices.Index(valueSizes, pageCacheValueBytes)), sizeName(pageCacheValueBytes),
		smallBytesPerRecord, sizeName(valueSizes[small]), pageCacheWriteBytes>>10, a.c.label, a.c.label, a.c.label, a.c.label)
}
