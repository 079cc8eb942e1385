package realnet

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"strand/core/config"
	"strand/core/env"
)

// osFile is an env.File over an *os.File, just enough for the writer: the
// regionFile methods and a path.
type osFile struct {
	env.File
	f *os.File
}

func (o osFile) Path() string                                  { return o.f.Name() }
func (o osFile) ReadRegionAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }
func (o osFile) WaitWritten(int64) error                       { return nil }
func (o osFile) Fd() int                                       { return int(o.f.Fd()) }

// tempFileOf writes data to a new file and returns it as an env.File.
func tempFileOf(tb testing.TB, data []byte) osFile {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return osFile{f: f}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(tb testing.TB) (server, client net.Conn) {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestResponseWriterSendsPiecesInOrder: byte pieces and regions, on either
// side of the sendfile threshold, arrive as one stream in frame order, and
// every frame's Release is posted once.
func TestResponseWriterSendsPiecesInOrder(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	file := tempFileOf(t, data)
	for _, sendfileMin := range []int64{0, sendfileBytesMin, math.MaxInt64} {
		t.Run(fmt.Sprint(sendfileMin), func(t *testing.T) {
			server, client := tcpPair(t)
			w := newResponseWriter(server)
			if w.raw == nil {
				t.Fatal("a TCP connection has no raw descriptor")
			}
			w.sendfileMin = sendfileMin
			var want []byte
			released := 0
			for i := range 20 {
				header := []byte(fmt.Sprintf("frame %d header;", i))
				position := rand.Int64N(int64(len(data)) / 2)
				length := rand.Int64N(64 << 10)
				if i%5 == 0 {
					length = rand.Int64N(int64(len(data))/2) + 1
				}
				frame := env.Frame{Pieces: []env.FramePiece{
					{Bytes: header},
					{Region: env.FileRegion{File: file, Position: position, Bytes: length}},
					{Bytes: []byte("tail")},
				}, Release: func() { released++ }}
				w.add(slot{pieced: frame})
				w.add(slot{frame: []byte("plain response")})
				want = append(want, header...)
				want = append(want, data[position:position+length]...)
				want = append(want, "tailplain response"...)
			}
			got := make(chan []byte)
			go func() {
				b, _ := io.ReadAll(io.LimitReader(client, int64(len(want))))
				got <- b
			}()
			var posted []func()
			if err := w.run(func(f func()) bool { posted = append(posted, f); return true }); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("received %d bytes, want %d, or different bytes", len(b), len(want))
			}
			for _, f := range posted {
				f()
			}
			if released != 20 {
				t.Fatalf("%d releases posted, want 20", released)
			}
		})
	}
}

// A region the file no longer holds (a pin that failed) is an error, not a
// short response.
func TestSendfileOfMissingBytesFails(t *testing.T) {
	file := tempFileOf(t, make([]byte, 100<<10))
	server, _ := tcpPair(t)
	w := newResponseWriter(server)
	w.add(slot{pieced: env.Frame{Pieces: []env.FramePiece{{Region: env.FileRegion{File: file, Position: 90 << 10, Bytes: 20 << 10}}}}})
	if err := w.run(func(func()) bool { return true }); err == nil {
		t.Fatal("sendfile past the end of the file succeeded")
	}
}

// BenchmarkRegionSend measures one response (a 32-byte header and one
// region) sent over loopback TCP with sendfile and with pread+writev, by
// region size; sendfileBytesMin comes from it (SPEC.md §7).
func BenchmarkRegionSend(b *testing.B) {
	const fileBytes = 32 << 20
	data := make([]byte, fileBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	file := tempFileOf(b, data)
	for _, size := range []int64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, mode := range []string{"sendfile", "readwrite"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) {
				server, client := tcpPair(b)
				go io.Copy(io.Discard, client)
				w := newResponseWriter(server)
				w.sendfileMin = 0
				if mode == "readwrite" {
					w.sendfileMin = math.MaxInt64
				}
				header := make([]byte, 32)
				post := func(func()) bool { return true }
				b.SetBytes(size)
				position := int64(0)
				for b.Loop() {
					w.add(slot{pieced: env.Frame{Pieces: []env.FramePiece{{Bytes: header},
						{Region: env.FileRegion{File: file, Position: position, Bytes: size}}}}})
					if err := w.run(post); err != nil {
						b.Fatal(err)
					}
					position = (position + size) % (fileBytes - size)
				}
			})
		}
	}
}

// plainFile is an env.File with no descriptor (as diskio/faulty's files).
type plainFile struct {
	env.File
	data []byte
}

func (p plainFile) Path() string { return "plain" }
func (p plainFile) ReadAt(b []byte, off int64) (int, error) {
	return copy(b, p.data[off:]), nil
}

// Regions of files the writer cannot read off the loop are read into the
// frame on the loop; others stay regions.
func TestMaterialiseOnLoopOnlyPlainFiles(t *testing.T) {
	plain := plainFile{data: []byte("0123456789")}
	withFd := tempFileOf(t, []byte("abcdef"))
	frame := env.Frame{Pieces: []env.FramePiece{
		{Bytes: []byte("h")},
		{Region: env.FileRegion{File: plain, Position: 2, Bytes: 5}},
		{Region: env.FileRegion{File: withFd, Position: 1, Bytes: 3}},
	}}
	out, err := materialiseOnLoop(frame)
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Pieces[1].Bytes) != "23456" || out.Pieces[1].Region.File != nil {
		t.Fatalf("the plain file's region became %+v, want the bytes 23456", out.Pieces[1])
	}
	if out.Pieces[2].Region.File == nil || frame.Pieces[1].Region.File == nil {
		t.Fatal("a descriptor-backed region was materialised, or the caller's frame changed")
	}
}

// networkTestConfig is the configuration of a broker-only node 1 for tests
// that build a Network by hand, with extra properties on top.
func networkTestConfig(t *testing.T, extra map[string]string) config.Broker {
	t.Helper()
	props := map[string]string{
		"node.id": "1", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
		"controller.listener.names": "CONTROLLER", "controller.quorum.voters": "2@127.0.0.1:9",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	}
	maps.Copy(props, extra)
	cfg, _, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testNetwork is newNetwork for a test that drives connections itself: its
// reaper stops at the test's end.
func testNetwork(t *testing.T, loop *Loop, cfg config.Broker) *Network {
	t.Helper()
	n, err := newNetwork(loop, cfg, testLogger(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.closed {
			n.closed = true
			close(n.stopped)
		}
	})
	return n
}

// testServerConn is newServerConn for a connection c the test accepted on
// the listener "test", admitted by n's gate as admit would.
func testServerConn(t *testing.T, n *Network, id env.ConnID, c net.Conn) *serverConn {
	t.Helper()
	n.gateMu.Lock()
	admitted, v := n.gate.Open("test", hostOf(c.RemoteAddr()), n.nowMs())
	n.gateMu.Unlock()
	if !v.Admitted() {
		t.Fatalf("the gate refused a test connection: %+v", v)
	}
	return newServerConn(n, id, "test", c, admitted)
}

// A frame the writer never sends is still released, on the loop: answered
// on a connection already closed, or queued when its connection ends.
func TestUnsentFramesAreReleased(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	n := testNetwork(t, loop, cfg)
	n.handler = closedHandler{}
	released := make(chan int, 3)
	frameNo := func(i int) env.Frame {
		return env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("x")}}, Release: func() { released <- i }}
	}
	// Unknown connection: released at once.
	loop.Call(func() { n.ReplyFrame(99, 1, frameNo(1)) })
	// Answered after its connection closed.
	server, _ := tcpPair(t)
	sc := testServerConn(t, n, 7, server)
	n.conns[7] = sc
	sc.push(slot{correlationID: 5}, 0)
	sc.push(slot{correlationID: 6}, 0)
	loop.Call(func() { n.ReplyFrame(7, 6, frameNo(2)) }) // queued behind 5: not written
	sc.shutdown()
	loop.Call(func() { n.ReplyFrame(7, 5, frameNo(3)) }) // closed: released at once
	sc.finish()                                          // the reader ends: frame 2 is released
	got := map[int]bool{}
	for range 3 {
		select {
		case i := <-released:
			got[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("released %v, want frames 1, 2 and 3", got)
		}
	}
}

// closedHandler ignores the close a finished connection reports.
type closedHandler struct{ env.Handler }

func (closedHandler) HandleClosed(env.ConnID) {}
