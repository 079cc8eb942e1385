package realnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/wire"
)

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

// TestReviewLoopStressManyConnections: many connections pipeline requests
// that the loop answers in and out of order, plain and with Releases, some
// clients closing early and some reading slowly (so direct writes are cut
// short); every full stream must arrive in order, no two events may run at
// once, requests of a connection reach the core in order, and after
// Stop/Wait/Shutdown/RunReleases every Release has run exactly once. Run
// with -race: the handler's maps are touched without locks, on the loop
// and, after Wait, by the test.
func TestReviewLoopStressManyConnections(t *testing.T) {
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

// TestReviewPeerRequestsStayInOrder sends many pipelined requests of up to
// 30 KiB to one peer that reads in bursts, so that the loop's direct writes
// find the socket full and leave the rest to the writer: the peer must see
// every request whole and in correlation order, and every callback must
// get its answer, once, in send order.
func TestReviewPeerRequestsStayInOrder(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const requests = 3000
	peerErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			peerErr <- err
			return
		}
		defer c.Close()
		for i := range int32(requests) {
			if i%200 == 0 {
				time.Sleep(20 * time.Millisecond) // let the node's socket fill
			}
			var prefix [4]byte
			if _, err := io.ReadFull(c, prefix[:]); err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(prefix[:]))
			if _, err := io.ReadFull(c, frame); err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			hdr, req, err := wire.ParseRequest(frame, func(int16, int16) bool { return true }, wire.DefaultRequestLimits())
			if err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			if hdr.CorrelationID != i {
				peerErr <- fmt.Errorf("request %d arrived where %d was due", hdr.CorrelationID, i)
				return
			}
			if name := req.(*kmsg.ApiVersionsRequest).ClientSoftwareName; name != peerSoftwareName(i) {
				peerErr <- fmt.Errorf("request %d: body of %d bytes corrupt", i, len(name))
				return
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(3)
			resp.ThrottleMillis = i
			if _, err := c.Write(wire.AppendResponse(nil, i, resp)); err != nil {
				peerErr <- err
				return
			}
		}
		peerErr <- nil
	}()
	loop := NewLoop()
	go loop.Run()
	defer func() { loop.Stop(); loop.Wait() }()
	n := testNetwork(t, loop, cfg)
	defer n.Shutdown()
	n.peers.brokerAddress = func(env.NodeID) (string, bool) { return l.Addr().String(), true }
	answered := make(chan int32, requests)
	next := int32(0) // loop only
	for start := int32(0); start < requests; start += 50 {
		loop.Call(func() {
			for i := start; i < start+50; i++ {
				req := kmsg.NewPtrApiVersionsRequest()
				req.SetVersion(3)
				req.ClientSoftwareName = peerSoftwareName(i)
				req.ClientSoftwareVersion = "1"
				n.Send(3, req, func(resp kmsg.Response, err error) {
					got := int32(-1)
					if err == nil {
						got = resp.(*kmsg.ApiVersionsResponse).ThrottleMillis
					}
					if got != next {
						t.Errorf("callback %d got answer %d (err %v)", next, got, err)
					}
					next++
					answered <- got
				})
			}
		})
	}
	peerDone := peerErr
	for got := 0; got < requests; {
		select {
		case <-answered:
			got++
		case err := <-peerDone:
			if err != nil {
				t.Fatalf("peer: %v", err)
			}
			peerDone = nil // answered everything; the callbacks follow
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d requests answered", got, requests)
		}
	}
}

// peerSoftwareName is request i's ClientSoftwareName: up to 30 KiB, so that
// requests fill the socket.
func peerSoftwareName(i int32) string {
	size := int(i*7919) % (30 << 10)
	b := make([]byte, size)
	for k := range b {
		b[k] = 'a' + byte((int(i)+k)%26)
	}
	return string(b)
}

// TestReviewLoopNeverWaitsOnASlowClient: while a connection's writer is
// blocked writing a large response to a client that does not read, the
// loop answers that connection again; the answer must be queued, not
// written (a write would wait on the fd's write lock, which the blocked
// writer holds, stalling every connection of the node). Then the client
// reads both, in order.
func TestReviewLoopNeverWaitsOnASlowClient(t *testing.T) {
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
