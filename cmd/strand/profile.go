package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileFlag registers serve's --cpuprofile FILE, for benchmarks
// (cmd/strandbench profiles the broker process with it). Profiling starts
// while the flags are parsed; the returned function stops it and closes the
// file, and is meant to be deferred to the end of serve:
//
//	defer cpuProfileFlag(flags)()
func cpuProfileFlag(flags *flag.FlagSet) (stop func()) {
	p := &cpuProfile{}
	flags.Var(p, "cpuprofile", "write a CPU profile of the broker to this file until it stops (for benchmarks)")
	return p.stop
}

// cpuProfile is the --cpuprofile flag's value: the file being written.
type cpuProfile struct {
	file *os.File
}

func (p *cpuProfile) String() string {
	if p == nil || p.file == nil {
		return ""
	}
	return p.file.Name()
}

// Set starts profiling into path.
func (p *cpuProfile) Set(path string) error {
	if p.file != nil {
		return fmt.Errorf("given twice")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.file = f
	return nil
}

func (p *cpuProfile) stop() {
	if p.file == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := p.file.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "strand serve: --cpuprofile:", err)
	}
}
