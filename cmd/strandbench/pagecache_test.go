package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestThreadCPUCountsOnlyItsThread: while another goroutine spins for
// 150 ms of the process's CPU, a thread that sleeps is charged almost
// nothing. Measured with the process's CPU (getrusage RUSAGE_SELF), the
// limit would count kgo's and the garbage collector's work as the kernel's.
func TestThreadCPUCountsOnlyItsThread(t *testing.T) {
	const spin = 150 * time.Millisecond
	spun := make(chan struct{})
	started := make(chan struct{})
	go func() {
		close(started)
		for spinStart := processCPU(); processCPU()-spinStart < spin; {
		}
		close(spun)
	}()
	<-started
	type result struct{ thread, process time.Duration }
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		threadStart, processStart := threadCPU(), processCPU()
		<-spun
		done <- result{threadCPU() - threadStart, processCPU() - processStart}
	}()
	r := <-done
	if r.process < spin/2 || r.thread > 30*time.Millisecond {
		t.Errorf("while another goroutine spun: this thread %v, the process %v; want under 30 ms and at least %v", r.thread, r.process, spin/2)
	}
}

// TestMeasurePageCacheWriteSparesChildren: a child started with a
// Pdeathsig from a goroutine's thread, as the brokers are, survives that
// goroutine measuring the limit and ending. Go ends the thread of a
// goroutine that ends locked, and the kernel then kills every child that
// thread forked with a Pdeathsig: the brokers died mid-benchmark that way.
func TestMeasurePageCacheWriteSparesChildren(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limit")
	started := make(chan *exec.Cmd, 1)
	measured := make(chan error, 1)
	go func() {
		// Fork on this thread; the measurement then locks it again (the
		// goroutine could move between, which would let a bug pass, never
		// fail a correct version).
		runtime.LockOSThread()
		child := exec.Command("sleep", "10")
		child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := child.Start(); err != nil {
			runtime.UnlockOSThread()
			measured <- err
			return
		}
		started <- child
		runtime.UnlockOSThread()
		_, err := measurePageCacheWrite(path, pageCacheWriteBytes)
		measured <- err
	}()
	if err := <-measured; err != nil {
		t.Fatal(err)
	}
	child := <-started
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the child ended when the measuring goroutine did: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	child.Process.Kill()
	<-exited
}

// TestMeasurePageCacheWriteWritesTheBytes: the limit writes exactly the
// bytes asked, a last partial write included, charges both passes some CPU,
// and refuses to reuse a file (its pages would be cached: not a new file).
func TestMeasurePageCacheWriteWritesTheBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limit")
	const total = 3*pageCacheWriteBytes + 5
	r, err := measurePageCacheWrite(path, total)
	if err != nil {
		t.Fatal(err)
	}
	if r.bytes != total || r.fresh <= 0 || r.cached <= 0 {
		t.Errorf("run %+v; want %d bytes and CPU time for each pass", r, total)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	value := recordValue(pageCacheWriteBytes)
	if len(data) != total || !bytes.Equal(data[:pageCacheWriteBytes], value) || !bytes.Equal(data[3*pageCacheWriteBytes:], value[:5]) {
		t.Errorf("the file has %d bytes, want %d of the record pattern", len(data), total)
	}
	if _, err := measurePageCacheWrite(path, total); err == nil {
		t.Error("an existing file was written over as if new")
	}
	if _, err := measurePageCacheWrite(filepath.Join(t.TempDir(), "empty"), 0); err == nil {
		t.Error("no bytes to write: no error")
	}
}

// pageCacheResults are (a) and kfake with three repetitions of a million
// records: (a) at 2.6, 3.0 and 2.8 s per M records of 1 KiB, 1050 bytes
// logged per record, the limit 1.2 s per GB new and 0.2 cached; kfake at
// 5 s per M. At 100 B (a) logged 110 bytes per record.
func pageCacheResults() (a, kfake *caseResults) {
	a = &caseResults{c: brokerCase{label: "(a)", pageCacheLimit: true}}
	kfake = &caseResults{c: brokerCase{label: "(c)"}}
	const records = 1_000_000 // and the warm-up record
	for _, size := range valueSizes {
		var strand, fake []produceResult
		var logged []int64
		for _, cpu := range []float64{2.6, 3.0, 2.8} {
			strand = append(strand, produceResult{records: records, brokerCPU: time.Duration(cpu * float64(time.Second))})
			fake = append(fake, produceResult{records: records, brokerCPU: 5 * time.Second})
			if size == pageCacheValueBytes {
				logged = append(logged, 1050*(records+1))
				a.pageCacheRuns = append(a.pageCacheRuns, pageCacheRun{bytes: 1050 * (records + 1), fresh: 1260 * (records + 1), cached: 210 * (records + 1)})
			} else {
				logged = append(logged, 110*(records+1))
			}
		}
		a.produce, kfake.produce = append(a.produce, strand), append(kfake.produce, fake)
		a.loggedBytes = append(a.loggedBytes, logged)
	}
	return a, kfake
}

func TestPageCacheFigures(t *testing.T) {
	a, kfake := pageCacheResults()
	pairs := pageCachePairs(a, kfake)
	if len(pairs) != 3 {
		t.Fatalf("%d pairs, want 3", len(pairs))
	}
	near := func(got, want float64) bool { return got > want*(1-1e-9) && got < want*(1+1e-9) }
	// 1.2 s per GB × 1050 bytes = 1.26 s per M records; the median run is
	// (a)'s 2.8: share 1.26/2.8, the rest (2.8-1.26)/5.
	if f := pairs[2]; !near(f.freshPerMillion, 1.26) || !near(f.cachedPerMillion, 0.21) || !near(f.strandPerMillion, 2.8) || !near(f.kfakePerMillion, 5) {
		t.Errorf("third repetition %+v", f)
	}
	if got := medianOfPairs(pairs, pageCacheFigures.machineShare); !near(got, 1.26/2.8) {
		t.Errorf("median share %v, want %v", got, 1.26/2.8)
	}
	if got := medianOfPairs(pairs, pageCacheFigures.ownOverKfake); !near(got, 1.54/5) {
		t.Errorf("median rest over kfake %v, want %v", got, 1.54/5)
	}
	if got := a.bytesPerRecord(0); !near(got, 110) {
		t.Errorf("100 B bytes per record %v, want 110", got)
	}

	var out strings.Builder
	printPageCacheLimit(&out, a, kfake)
	var median string
	for l := range strings.SplitSeq(out.String(), "\n") {
		if fields := strings.Fields(l); len(fields) > 0 && fields[0] == "median" {
			median = l
		}
	}
	// MB, s/GB new and cached, s/M 1 KiB new and cached, s/M 100 B new and
	// cached (110 bytes per record), (a)'s s/M, share, rest over kfake.
	want := []string{"median", "1050", "1.200", "0.200", "1.26", "0.21", "0.132", "0.022", "2.80", "0.45", "0.31"}
	if got := strings.Fields(median); !slices.Equal(got, want) {
		t.Errorf("median row %q, want %q:\n%s", got, want, out.String())
	}
	if !strings.Contains(out.String(), "3150 MB in all; 1050.0 bytes per record at 1 KiB, 110.0 at 100 B") {
		t.Errorf("the notes do not state the volume and bytes per record:\n%s", out.String())
	}

	out.Reset()
	printPageCacheLimit(&out, &caseResults{c: brokerCase{label: "(a)"}}, kfake)
	if out.Len() != 0 {
		t.Errorf("without limit runs the table printed:\n%s", out.String())
	}
}
