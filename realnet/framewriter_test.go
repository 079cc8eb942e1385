package realnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/core/wire"
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
// region size; sendfileBytesMin comes from it (SPEC.md §7.5).
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

// stressHandler answers ApiVersions requests with synthetic frames: at once
// or after a random timer (so answers arrive out of order), plain (written
// by the loop when it can) or with a Release (written by the writer), or
// not at all (Skip) for every seventh correlation id. Its state is touched
// only on the loop, without locks: the race detector then reports any event
// that runs beside another, or after Wait returned.
type stressHandler struct {
	n     *Network
	clock *Clock
	// inside counts handlers running at once; more than one is a broken loop.
	inside atomic.Int32
	// overlap is set if two events ever ran at once.
	overlap atomic.Bool
	// released counts Releases run, issued the Releases handed to the
	// network; each Release checks it runs once.
	issued, released atomic.Int64
	doubleRelease    atomic.Bool
	// loop-only state.
	events   int                  // events run
	requests map[env.ConnID]int32 // last correlation id seen per connection
	closed   map[env.ConnID]bool
	outOfOrd bool
}

func responseSize(cid int32) int {
	// Mostly small, some large enough to fill a socket buffer.
	r := rand.New(rand.NewPCG(uint64(cid), 7))
	if r.IntN(8) == 0 {
		return 8 + r.IntN(256<<10)
	}
	return 8 + r.IntN(512)
}

func skipped(cid int32) bool { return cid%7 == 6 }

func stressResponse(cid int32) []byte {
	size := responseSize(cid)
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(size-4))
	binary.BigEndian.PutUint32(b[4:], uint32(cid))
	for k := 8; k < size; k++ {
		b[k] = byte(int(cid) + k)
	}
	return b
}

func (h *stressHandler) enter() {
	if h.inside.Add(1) != 1 {
		h.overlap.Store(true)
	}
}

func (h *stressHandler) leave() {
	h.events++
	h.inside.Add(-1)
}

func (h *stressHandler) HandleRequest(conn env.ConnID, hdr env.RequestHeader, _ kmsg.Request) {
	h.enter()
	defer h.leave()
	if last, ok := h.requests[conn]; ok && hdr.CorrelationID <= last {
		h.outOfOrd = true
	}
	h.requests[conn] = hdr.CorrelationID
	cid := hdr.CorrelationID
	if cid%50 == 0 {
		time.Sleep(time.Millisecond) // a slow event, for Stop to land in
	}
	if skipped(cid) {
		h.n.Skip(conn, cid)
		return
	}
	r := rand.New(rand.NewPCG(uint64(cid), uint64(conn)))
	withRelease := r.IntN(4) == 0
	answer := func() {
		frame := env.Frame{Pieces: []env.FramePiece{{Bytes: stressResponse(cid)}}}
		if withRelease {
			h.issued.Add(1)
			var once atomic.Bool
			frame.Release = func() {
				if once.Swap(true) {
					h.doubleRelease.Store(true)
				}
				h.released.Add(1)
			}
		}
		h.n.ReplyFrame(conn, cid, frame)
	}
	if r.IntN(3) == 0 {
		answer()
		return
	}
	h.clock.SetTimer(int64(r.IntN(2000))*1000, func() {
		h.enter()
		defer h.leave()
		answer()
	})
}

func (h *stressHandler) HandleClosed(conn env.ConnID) {
	h.enter()
	defer h.leave()
	h.closed[conn] = true
}

// stressNetwork serves a Network with a stressHandler on a fresh loop.
func stressNetwork(t *testing.T) (*Loop, *Network, *stressHandler, net.Addr) {
	t.Helper()
	cfg := networkTestConfig(t, nil)
	loop := NewLoop()
	go loop.Run()
	n := testNetwork(t, loop, cfg)
	h := &stressHandler{n: n, clock: NewClock(loop), requests: map[env.ConnID]int32{}, closed: map[env.ConnID]bool{}}
	versions := []kmsg.ApiVersionsResponseApiKey{{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: 0, MaxVersion: 3}}
	n.setHandler(h, func(string) []kmsg.ApiVersionsResponseApiKey { return versions }, versions)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Small send buffers on the server side, so that direct writes of the
	// larger responses are cut short and the writer finishes them. (A
	// client's SO_RCVBUF shrunk after connect stalls loopback TCP itself,
	// with or without this code: not used.)
	if err := n.Serve("PLAINTEXT", smallSendBuffers{l.(*net.TCPListener)}); err != nil {
		t.Fatal(err)
	}
	return loop, n, h, l.Addr()
}

// smallSendBuffers is a listener whose connections have 16 KiB send buffers.
type smallSendBuffers struct{ *net.TCPListener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	c.SetWriteBuffer(16 << 10)
	return c, nil
}

// stressClient pipelines requests on one connection and checks that every
// answered one comes back whole, once, in request order. closeAfter >= 0
// closes the connection after that many responses. It returns nil when the
// stream was right up to where it ended; stopping tolerates a broken stream.
func stressClient(addr net.Addr, base int32, requests int, closeAfter int, slowReader bool) error {
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	writeErr := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(0)
		var buf []byte
		for i := range requests {
			hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: 0, CorrelationID: base + int32(i), ClientID: "stress"}
			buf = wire.AppendRequest(buf, hdr, req)
			if len(buf) > 4<<10 || i == requests-1 {
				if _, err := c.Write(buf); err != nil {
					writeErr <- err
					return
				}
				buf = buf[:0]
			}
		}
		writeErr <- nil
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	got := 0
	for i := range requests {
		cid := base + int32(i)
		if skipped(cid) {
			continue
		}
		if got == closeAfter {
			return nil
		}
		var prefix [8]byte
		if _, err := io.ReadFull(c, prefix[:]); err != nil {
			return fmt.Errorf("response to %d (after %d): %w", cid, got, err)
		}
		if g := int32(binary.BigEndian.Uint32(prefix[4:])); g != cid {
			return fmt.Errorf("response %d arrived where %d was due", g, cid)
		}
		size := int(binary.BigEndian.Uint32(prefix[:4])) + 4
		if size != responseSize(cid) {
			return fmt.Errorf("response %d: %d bytes, want %d", cid, size, responseSize(cid))
		}
		rest := make([]byte, size-8)
		if _, err := io.ReadFull(c, rest); err != nil {
			return fmt.Errorf("response %d body: %w", cid, err)
		}
		for k, b := range rest {
			if b != byte(int(cid)+k+8) {
				return fmt.Errorf("response %d: byte %d corrupt", cid, k+8)
			}
		}
		got++
		if slowReader && got%20 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return <-writeErr
}

// TestLoopStressManyConnections: many connections pipeline requests
// that the loop answers in and out of order, plain and with Releases, some
// clients closing early and some reading slowly (so direct writes are cut
// short); every full stream must arrive in order, no two events may run at
// once, requests of a connection reach the core in order, and after
// Stop/Wait/Shutdown/RunReleases every Release has run exactly once. Run
// with -race: the handler's maps are touched without locks, on the loop
// and, after Wait, by the test.
func TestLoopStressManyConnections(t *testing.T) {
	for round := range 2 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			loop, n, h, addr := stressNetwork(t)
			const clients = 16
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					closeAfter := -1
					if i%4 == 3 {
						closeAfter = 20 + i
					}
					if err := stressClient(addr, int32(i*100000), 400, closeAfter, i%3 == 0); err != nil {
						errs <- fmt.Errorf("client %d: %w", i, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// A second wave, stopped in the middle.
			stopping := make(chan struct{})
			var wave sync.WaitGroup
			for i := range clients {
				wave.Add(1)
				go func() {
					defer wave.Done()
					err := stressClient(addr, int32(5_000_000+i*100000), 1000, -1, i%3 == 0)
					select {
					case <-stopping:
					default:
						if err != nil && !errors.Is(err, io.EOF) {
							t.Errorf("wave client %d before stop: %v", i, err)
						}
					}
				}()
			}
			time.Sleep(time.Duration(20+round*30) * time.Millisecond)
			close(stopping)
			loop.Stop()
			loop.Wait()
			// The loop is stopped and Wait returned: no event may run any
			// more, so the handler's state is the test's (the race
			// detector checks this read).
			outOfOrder, overlap, events := h.outOfOrd, h.overlap.Load(), h.events
			n.Shutdown()
			loop.RunReleases()
			wave.Wait()
			time.Sleep(10 * time.Millisecond) // timers due now post in vain
			if h.events != events {
				t.Errorf("%d events ran after Wait returned", h.events-events)
			}
			if overlap {
				t.Error("two events ran at once")
			}
			if outOfOrder {
				t.Error("a connection's requests reached the core out of order")
			}
			if h.doubleRelease.Load() {
				t.Error("a Release ran twice")
			}
			if issued, released := h.issued.Load(), h.released.Load(); issued != released {
				t.Errorf("%d Releases issued, %d run", issued, released)
			}
		})
	}
}

// TestLoopNeverWaitsOnASlowClient: while a connection's writer is
// blocked writing a large response to a client that does not read, the
// loop answers that connection again; the answer must be queued, not
// written (a write would wait on the fd's write lock, which the blocked
// writer holds, stalling every connection of the node). Then the client
// reads both, in order.
func TestLoopNeverWaitsOnASlowClient(t *testing.T) {
	cfg := networkTestConfig(t, map[string]string{"strand.connection.buffered.bytes.max": "1073741824"})
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	n := testNetwork(t, loop, cfg)
	n.handler = closedHandler{}
	server, client := tcpPair(t)
	if err := server.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	sc := testServerConn(t, n, 7, server)
	n.conns[7] = sc
	n.goroutines.Add(1)
	go sc.writeLoop()
	defer func() { sc.shutdown(); n.goroutines.Wait() }()
	sc.push(slot{correlationID: 0}, 0)
	sc.push(slot{correlationID: 1}, 0)
	big := make([]byte, 1<<20) // far more than the socket buffers hold
	binary.BigEndian.PutUint32(big, uint32(len(big)-4))
	binary.BigEndian.PutUint32(big[4:], 0)
	loop.Call(func() {
		n.ReplyFrame(7, 0, env.Frame{Pieces: []env.FramePiece{{Bytes: big}}, Release: func() {}})
	})
	waitUntil(t, "the writer is blocked on the unread socket", 5*time.Second, func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.writing && len(sc.slots) == 1
	})
	small := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 4), 1)
	answered := make(chan struct{})
	go func() {
		loop.Call(func() { sc.answer(1, small) })
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
		// Unblock the loop so the test can end, then fail.
		go io.Copy(io.Discard, client)
		t.Fatal("the loop waited on a connection whose writer is blocked")
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for want := range uint32(2) {
		var prefix [8]byte
		if _, err := io.ReadFull(client, prefix[:]); err != nil {
			t.Fatalf("response %d: %v", want, err)
		}
		if got := binary.BigEndian.Uint32(prefix[4:]); got != want {
			t.Fatalf("response %d arrived where %d was due", got, want)
		}
		if _, err := io.CopyN(io.Discard, client, int64(binary.BigEndian.Uint32(prefix[:]))-4); err != nil {
			t.Fatalf("response %d: %v", want, err)
		}
	}
}
