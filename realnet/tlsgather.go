package realnet

import (
	"net"
	"sync"
)

// tlsGatherBytesMax bounds the TLS records a recordGatherer holds before
// it writes them: 16 full records. Measured on loopback, gathering a
// megabyte's 64 records into writes of 256 KiB costs the sender about a
// third less CPU than one write(2) per record, and gathering more saves
// nothing further; it is also the most one TLS connection holds while it
// writes.
const tlsGatherBytesMax = 256 << 10

// recordGatherer sits between a server's tls.Conn and its TCP connection.
// crypto/tls writes every record of a Write with its own write(2), so a
// Fetch answer of a megabyte was 64 system calls of 16 KiB, each pushed
// as its own segment (Strand sets TCP_NODELAY, as Kafka does). While the
// response writer gathers (gather ... release), the records collect in a
// buffer and leave in writes of up to tlsGatherBytesMax: fewer calls, and
// the kernel builds full-size segments. Outside a gather (the handshake,
// an alert from the reader) writes pass straight through. The records'
// bytes and order are unchanged.
type recordGatherer struct {
	net.Conn
	mu sync.Mutex
	// gathering is set between gather and release; buf holds the records
	// written meanwhile (nil outside a gather: the pool has it).
	gathering bool
	buf       *[]byte
}

// gatherBufs are the gatherers' buffers, shared by the process's TLS
// connections: a connection holds one only while it writes an answer.
var gatherBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, tlsGatherBytesMax)
	return &b
}}

func newRecordGatherer(c net.Conn) *recordGatherer { return &recordGatherer{Conn: c} }

// Write is tls.Conn's: one record, or a handshake flight, or an alert.
func (g *recordGatherer) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.gathering {
		return g.Conn.Write(p)
	}
	if len(*g.buf)+len(p) > tlsGatherBytesMax {
		if err := g.writeHeldLocked(); err != nil {
			return 0, err
		}
		if len(p) >= tlsGatherBytesMax {
			return g.Conn.Write(p)
		}
	}
	*g.buf = append(*g.buf, p...)
	return len(p), nil
}

// gather holds the records written from now until release.
func (g *recordGatherer) gather() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.gathering {
		g.gathering, g.buf = true, gatherBufs.Get().(*[]byte)
	}
}

// release writes the held records and lets later writes pass straight
// through again.
func (g *recordGatherer) release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.gathering {
		return nil
	}
	err := g.writeHeldLocked()
	g.gathering = false
	gatherBufs.Put(g.buf)
	g.buf = nil
	return err
}

// writeHeldLocked writes the held records, keeping the buffer.
func (g *recordGatherer) writeHeldLocked() error {
	held := *g.buf
	*g.buf = held[:0]
	if len(held) == 0 {
		return nil
	}
	_, err := g.Conn.Write(held)
	return err
}
