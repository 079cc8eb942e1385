package main

import (
	"fmt"
	"slices"
	"time"
)

// run is one timed measurement: bytes moved in elapsed time.
type run struct {
	bytes   int64
	elapsed time.Duration
}

// mbPerSec is the throughput in MB/s, 10^6 bytes per second, as diskio's raw
// figures are.
func (r run) mbPerSec() float64 {
	return float64(r.bytes) / 1e6 / max(r.elapsed.Seconds(), 1e-9)
}

// runFromRate rebuilds a run from a byte count and a throughput, for the raw
// figures diskio reports only as MB/s.
func runFromRate(bytes int64, mbPerSec float64) run {
	return run{bytes: bytes, elapsed: time.Duration(float64(bytes) / 1e6 / mbPerSec * float64(time.Second))}
}

func (r run) String() string {
	return fmt.Sprintf("%.1f MB in %.3f s = %.0f MB/s", float64(r.bytes)/1e6, r.elapsed.Seconds(), r.mbPerSec())
}

// series is the repetitions of one measurement, in the order they ran.
type series []run

// median is the median throughput (the mean of the middle two for an even
// count).
func (s series) median() float64 {
	if len(s) == 0 {
		panic("strandbench: median of no runs")
	}
	rates := make([]float64, len(s))
	for i, r := range s {
		rates[i] = r.mbPerSec()
	}
	slices.Sort(rates)
	middle := len(rates) / 2
	if len(rates)%2 == 1 {
		return rates[middle]
	}
	return (rates[middle-1] + rates[middle]) / 2
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
