package main

import (
	"errors"
	"io"
	"net"
	"time"
)

// loopbackWriteBytes is the size of each write of the loopback measurement:
// large, so that the figure is the link's, not the system calls'.
const loopbackWriteBytes = 1 << 20

// loopbackBandwidth measures TCP over 127.0.0.1 for duration: one goroutine
// writes 1 MiB buffers, another reads them into a 1 MiB buffer, in this
// process. The result is the received bytes over the time to receive them.
func loopbackBandwidth(duration time.Duration) (run, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return run{}, err
	}
	defer listener.Close()
	type received struct {
		bytes int64
		err   error
	}
	done := make(chan received, 1)
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			done <- received{err: err}
			return
		}
		defer conn.Close()
		buf := make([]byte, loopbackWriteBytes)
		var total int64
		for {
			n, err := conn.Read(buf)
			total += int64(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- received{bytes: total, err: err}
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		return run{}, err
	}
	buf := recordValue(loopbackWriteBytes)
	start, cpuStart := time.Now(), processCPU()
	for time.Since(start) < duration {
		if _, err := conn.Write(buf); err != nil {
			conn.Close()
			return run{}, err
		}
	}
	if err := conn.Close(); err != nil {
		return run{}, err
	}
	r := <-done
	if r.err != nil {
		return run{}, r.err
	}
	return run{bytes: r.bytes, elapsed: time.Since(start), cpu: processCPU() - cpuStart}, nil
}
