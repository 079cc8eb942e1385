package main

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// run is one timed measurement: bytes moved in elapsed wall time, using cpu
// seconds of the process (user + system, every thread).
type run struct {
	bytes   int64
	elapsed time.Duration
	cpu     time.Duration
}

// processCPU is the CPU time the process has used so far, user and system.
// Other processes' load on the shared machine does not enter it, which makes
// it a steadier comparison than wall time; the goals are still on wall time.
func processCPU() time.Duration {
	var usage unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &usage); err != nil {
		panic(fmt.Sprintf("strandbench: getrusage: %v", err)) // cannot fail with valid arguments
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// mbPerCPUSec is the bytes moved per CPU second, in MB.
func (r run) mbPerCPUSec() float64 {
	return float64(r.bytes) / 1e6 / max(r.cpu.Seconds(), 1e-9)
}

// mbPerSec is the throughput in MB/s, 10^6 bytes per second, as diskio's raw
// figures are.
func (r run) mbPerSec() float64 {
	return float64(r.bytes) / 1e6 / max(r.elapsed.Seconds(), 1e-9)
}

// runFromRate rebuilds a run from a byte count and a throughput, for the raw
// figures diskio reports only as MB/s, and the CPU time measured around it.
func runFromRate(bytes int64, mbPerSec float64, cpu time.Duration) run {
	return run{bytes: bytes, elapsed: time.Duration(float64(bytes) / 1e6 / mbPerSec * float64(time.Second)), cpu: cpu}
}

func (r run) String() string {
	return fmt.Sprintf("%.1f MB in %.3f s = %4.0f MB/s (cpu %.3f s)", float64(r.bytes)/1e6, r.elapsed.Seconds(), r.mbPerSec(), r.cpu.Seconds())
}

// series is the repetitions of one measurement, in the order they ran.
type series []run

// median is the median wall throughput, MB/s.
func (s series) median() float64 { return s.medianOf(run.mbPerSec) }

// medianPerCPU is the median of MB per CPU second.
func (s series) medianPerCPU() float64 { return s.medianOf(run.mbPerCPUSec) }

// medianOf is the median of rate over the runs (the mean of the middle two
// for an even count).
func (s series) medianOf(rate func(run) float64) float64 {
	if len(s) == 0 {
		panic("strandbench: median of no runs")
	}
	rates := make([]float64, len(s))
	for i, r := range s {
		rates[i] = rate(r)
	}
	slices.Sort(rates)
	middle := len(rates) / 2
	if len(rates)%2 == 1 {
		return rates[middle]
	}
	return (rates[middle-1] + rates[middle]) / 2
}

// pairedRatio is the median, over the repetitions, of subject/limit for the
// runs made back to back (subject[i] right after limit[i]): pairing cancels
// the load that drifts on a shared machine, where a ratio of medians would
// compare runs made minutes apart.
func pairedRatio(subject, limit series, rate func(run) float64) float64 {
	if len(subject) != len(limit) || len(subject) == 0 {
		panic(fmt.Sprintf("strandbench: %d subject runs paired with %d limit runs", len(subject), len(limit)))
	}
	ratios := make([]float64, len(subject))
	for i := range subject {
		ratios[i] = rate(subject[i]) / rate(limit[i])
	}
	slices.Sort(ratios)
	middle := len(ratios) / 2
	if len(ratios)%2 == 1 {
		return ratios[middle]
	}
	return (ratios[middle-1] + ratios[middle]) / 2
}

// goal is a lower bound on a ratio; a zero goal is informational.
type goal struct {
	ratioMin float64
}

func (g goal) describe() string {
	if g.ratioMin == 0 {
		return "-"
	}
	return fmt.Sprintf(">= %.2f", g.ratioMin)
}

// verdict is PASS or FAIL, or "info" for a measurement without a goal.
func (g goal) verdict(ratio float64) string {
	switch {
	case g.ratioMin == 0:
		return "info"
	case ratio >= g.ratioMin:
		return "PASS"
	default:
		return "FAIL"
	}
}
