package realnet

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"strand/core/env"
	"strand/realnet/authtest"
)

// passCountingConn passes writes through and counts them.
type passCountingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *passCountingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestTLSAnswerLeavesInFewWrites: a megabyte's answer over TLS, 64 records
// of 16 KiB, leaves the server in writes of up to tlsGatherBytesMax (5
// here) rather than one write(2) per record (65 without the gatherer), and
// the client decrypts the same bytes in order.
func TestTLSAnswerLeavesInFewWrites(t *testing.T) {
	ca, err := authtest.NewCA("gather CA")
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.Issue(pkix.Name{CommonName: "server"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair([]byte(issued.ChainPEM), []byte(issued.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca.PEM))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	answer := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	received := make(chan []byte, 1)
	go func() {
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(io.LimitReader(c, int64(len(answer))))
		received <- b
	}()
	tcp, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	counted := &passCountingConn{Conn: tcp}
	gather := newRecordGatherer(counted)
	server := tls.Server(gather, &tls.Config{Certificates: []tls.Certificate{cert}})
	defer server.Close()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	before := counted.writes.Load()
	w := newResponseWriter(server)
	w.gather = gather
	w.add(slot{pieced: env.Frame{Pieces: []env.FramePiece{{Bytes: answer[:100]}, {Bytes: answer[100:]}}}})
	if err := w.run(func(func()) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if writes := counted.writes.Load() - before; writes > 5 {
		t.Errorf("the answer took %d writes, want at most 5 (%d KiB each)", writes, tlsGatherBytesMax>>10)
	}
	if got := <-received; !bytes.Equal(got, answer) {
		t.Errorf("the client read %d bytes, not the %d of the answer in order", len(got), len(answer))
	}
}
