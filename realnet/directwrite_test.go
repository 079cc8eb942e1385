package realnet

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"strand/core/env"
	"strand/diskio"
)

// TestDirectWritesKeepResponseOrder answers a connection's requests out of
// order from the loop, with plain responses (which the loop writes itself
// when the writer is idle) and responses with a Release (which only the
// writer writes) mixed, large enough that the client's unread socket fills
// and direct writes are cut short. The client must read every response
// once, whole, in request order, and every Release must run.
func TestDirectWritesKeepResponseOrder(t *testing.T) {
	cfg := networkTestConfig(t, map[string]string{"strand.connection.buffered.bytes.max": "1073741824"})
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	n := testNetwork(t, loop, cfg)
	n.handler = closedHandler{}
	server, client := tcpPair(t)
	// Small socket buffers: a direct write of one large response is cut
	// short, and the writer must finish it.
	if err := server.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	sc := testServerConn(t, n, 7, server)
	if sc.raw == nil {
		t.Fatal("a TCP connection has no raw descriptor: direct writes are off, the test proves nothing")
	}
	n.conns[7] = sc
	n.goroutines.Add(1)
	go sc.writeLoop()
	defer func() { sc.shutdown(); n.goroutines.Wait() }()

	const requests = 200
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, requests)
	for i := range sizes {
		sizes[i] = 8 + rng.IntN(200<<10) // up to 200 KiB: the socket fills
	}
	response := func(i int) []byte {
		b := make([]byte, sizes[i])
		binary.BigEndian.PutUint32(b, uint32(sizes[i]-4))
		binary.BigEndian.PutUint32(b[4:], uint32(i))
		for k := 8; k < len(b); k++ {
			b[k] = byte(i + k)
		}
		return b
	}
	for i := range requests {
		sc.push(slot{correlationID: int32(i)}, 0)
	}
	released := make(chan int, requests)
	order := rng.Perm(requests)
	// Answer in bursts, so that some answers find the head ready and the
	// writer idle, and others find it busy.
	for start := 0; start < requests; start += 10 {
		loop.Call(func() {
			for _, i := range order[start:min(start+10, requests)] {
				if i%5 == 4 {
					n.ReplyFrame(7, int32(i), env.Frame{Pieces: []env.FramePiece{{Bytes: response(i)}}, Release: func() { released <- i }})
				} else {
					sc.answer(int32(i), response(i))
				}
			}
		})
	}
	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range requests {
		var prefix [8]byte
		if _, err := io.ReadFull(client, prefix[:]); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if got := int(binary.BigEndian.Uint32(prefix[4:])); got != i {
			t.Fatalf("response %d arrived where %d was due", got, i)
		}
		if size := int(binary.BigEndian.Uint32(prefix[:4])) + 4; size != sizes[i] {
			t.Fatalf("response %d: size %d, want %d", i, size, sizes[i])
		}
		rest := make([]byte, sizes[i]-8)
		if _, err := io.ReadFull(client, rest); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		for k, b := range rest {
			if b != byte(i+k+8) {
				t.Fatalf("response %d: byte %d is %d, want %d", i, k+8, b, byte(i+k+8))
			}
		}
	}
	for range requests / 5 {
		select {
		case <-released:
		case <-time.After(5 * time.Second):
			t.Fatal("a written response's Release never ran")
		}
	}
	waitUntil(t, "every written response's bytes leave the buffered count", 5*time.Second, func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.slots) == 0 && sc.acct.BufferedBytes() == 0
	})
}

// TestLoopWritesAPlainResponseItself: with no writer goroutine at all, a
// plain response next in line reaches the client, written by the loop;
// a response with a Release behind it waits for the writer.
func TestLoopWritesAPlainResponseItself(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	n := testNetwork(t, loop, cfg)
	server, client := tcpPair(t)
	sc := testServerConn(t, n, 7, server)
	n.conns[7] = sc
	sc.push(slot{correlationID: 1}, 0)
	sc.push(slot{correlationID: 2}, 0)
	loop.Call(func() {
		sc.answer(1, []byte("plain"))
		n.ReplyFrame(7, 2, env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("pieced")}}, Release: func() {}})
	})
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len("plain"))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "plain" {
		t.Fatalf("read %q, %v; want the plain response, written by the loop", got, err)
	}
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if k, err := client.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d more bytes: the loop wrote a response with a Release", k)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.slots) != 1 || !sc.slots[0].answered {
		t.Fatalf("%d slots left, want the pieced response still queued for the writer", len(sc.slots))
	}
}

// TestTailRegionsAreReadAndWrittenOnTheLoop: a Fetch answer whose regions
// end near their file's end (bytes just appended, still queued in diskio or
// just written) is read on the loop, released at once and written by the
// loop, with no writer goroutine, sendfile's sizes included; a region far
// from the end, or more than the loop may copy, is left to the writer.
func TestTailRegionsAreReadAndWrittenOnTheLoop(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	head := bytes.Repeat([]byte("old."), (loopReadTailBytes+sendfileBytesMin)/4)
	file, closeDisk := appendedFile(t, loop, head, []byte("just-appended"))
	defer closeDisk()
	n := testNetwork(t, loop, cfg)
	server, client := tcpPair(t)
	sc := testServerConn(t, n, 7, server)
	n.conns[7] = sc
	for id := range int32(3) {
		sc.push(slot{correlationID: id}, 0)
	}
	tail := int64(len(head))
	var released [3]bool // touched only on the loop
	frame := func(i int, r env.FileRegion) env.Frame {
		return env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("hdr:")}, {Region: r}}, Release: func() { released[i] = true }}
	}
	var releasedAtOnce bool
	loop.Call(func() {
		n.ReplyFrame(7, 0, frame(0, env.FileRegion{File: file, Position: tail, Bytes: 13}))
		n.ReplyFrame(7, 1, frame(1, env.FileRegion{File: file, Position: 0, Bytes: 4}))                                              // far from the end
		n.ReplyFrame(7, 2, frame(2, env.FileRegion{File: file, Position: tail - loopReadBytesMax - 4, Bytes: loopReadBytesMax + 4})) // too big for the loop
	})
	loop.Call(func() { releasedAtOnce = released[0] && !released[1] && !released[2] })
	if !releasedAtOnce {
		t.Error("want only the tail region's frame released on the loop, before any write")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	want := "hdr:just-appended"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q, written by the loop", got, err, want)
	}
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if k, err := client.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d more bytes with no writer running: a region far from the end or too big went out on the loop", k)
	}
	n.goroutines.Add(1)
	go sc.writeLoop()
	defer func() { sc.shutdown(); n.goroutines.Wait() }()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest := make([]byte, 4+4+4+loopReadBytesMax+4)
	if _, err := io.ReadFull(client, rest); err != nil || string(rest[:8]) != "hdr:old." {
		t.Fatalf("the writer's part: read %q..., %v", rest[:min(len(rest), 8)], err)
	}
}

// TestTailOfAFileNoLongerAppendedToIsLeftToTheWriter: only files appended
// to lately have their tails read on the loop; the tail of a segment that
// stopped growing (rolled, and read by a consumer catching up from far
// behind) may be cold, and a read of it must not stall the loop.
func TestTailOfAFileNoLongerAppendedToIsLeftToTheWriter(t *testing.T) {
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	file, closeDisk := appendedFile(t, loop, []byte("tail"))
	defer closeDisk()
	frame := env.Frame{Pieces: []env.FramePiece{{Region: env.FileRegion{File: file, Position: 0, Bytes: 4}}}}
	var readNow, readLater bool
	loop.Call(func() {
		var buf *frameBuf
		_, buf, readNow = readTailOnLoop(frame)
		recycleTailRead(buf)
	})
	defer func(d time.Duration) { loopReadAppendedWithin = d }(loopReadAppendedWithin)
	loopReadAppendedWithin = time.Millisecond
	time.Sleep(5 * time.Millisecond)
	loop.Call(func() {
		var buf *frameBuf
		_, buf, readLater = readTailOnLoop(frame)
		recycleTailRead(buf)
	})
	if !readNow || readLater {
		t.Fatalf("read on the loop just after the append: %v, %v after it stopped growing; want true, false", readNow, readLater)
	}
}

// appendedFile opens segment.log on a diskio Disk of loop's and appends
// chunks to it, on the loop; closeDisk closes the Disk and waits for it.
func appendedFile(t *testing.T, loop *Loop, chunks ...[]byte) (file env.File, closeDisk func()) {
	t.Helper()
	disk, err := diskio.New(t.TempDir(), diskio.Options{Post: func(fn func()) { loop.Enqueue(fn) }})
	if err != nil {
		t.Fatal(err)
	}
	loop.Call(func() {
		file, err = disk.Open("segment.log", env.OpenOptions{Create: true})
		for _, chunk := range chunks {
			if err == nil {
				err = file.Append(chunk)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return file, func() { disk.Close(); disk.Wait() }
}

// TestTailReadBuffersGoBackOnlyOnceWritten: the buffer a tail region is read
// into on the loop goes back to its pool when the loop's own write took all
// of it, and, when the socket took only part (a client not reading), only
// after the writer has written the rest: recycled frames are poisoned in
// tests, so a buffer put back early would reach the client as garbage.
func TestTailReadBuffersGoBackOnlyOnceWritten(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	small := []byte("small tail")
	big := make([]byte, loopReadBytesMax-len(small))
	for i := range big {
		big[i] = byte(i % 251)
	}
	file, closeDisk := appendedFile(t, loop, big, small)
	defer closeDisk()
	n := testNetwork(t, loop, cfg)
	server, client := tcpPair(t)
	// Small socket buffers, so that the big answer does not fit at once.
	server.(*net.TCPConn).SetWriteBuffer(4 << 10)
	client.(*net.TCPConn).SetReadBuffer(4 << 10)
	sc := testServerConn(t, n, 7, server)
	n.conns[7] = sc
	sc.push(slot{correlationID: 0}, 0)
	sc.push(slot{correlationID: 1}, 0)
	region := func(pos, bytes int) env.Frame {
		return env.Frame{Pieces: []env.FramePiece{{Region: env.FileRegion{File: file, Position: int64(pos), Bytes: int64(bytes)}}}}
	}

	before := tailReadFrames.recycled.Load()
	loop.Call(func() { n.ReplyFrame(7, 0, region(len(big), len(small))) })
	got := make([]byte, len(small))
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("read %q, %v; want %q", got, err, small)
	}
	afterDirect := tailReadFrames.recycled.Load()
	if afterDirect == before {
		t.Fatal("the tail-read buffer did not go back after a whole direct write")
	}

	loop.Call(func() { n.ReplyFrame(7, 1, region(0, len(big)+len(small))) })
	var unwritten, held int
	loop.Call(func() {
		sc.mu.Lock()
		unwritten, held = len(sc.unwritten), len(sc.unwrittenRecycle)
		sc.mu.Unlock()
	})
	if unwritten == 0 {
		t.Fatal("the loop's write took the whole answer; the test needs the socket to take only part of it")
	}
	if held != 1 {
		t.Fatalf("%d tail-read buffers held for the writer with part of an answer unwritten, want 1", held)
	}
	n.goroutines.Add(1)
	go sc.writeLoop()
	defer func() { sc.shutdown(); n.goroutines.Wait() }()
	rest := make([]byte, len(big)+len(small))
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(client, rest); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, append(append([]byte(nil), big...), small...)) {
		t.Fatal("the answer the writer finished differs from the file's bytes")
	}
	deadline := time.Now().Add(5 * time.Second)
	for tailReadFrames.recycled.Load() == afterDirect {
		if time.Now().After(deadline) {
			t.Fatal("the tail-read buffer did not go back after the writer finished the answer")
		}
		time.Sleep(time.Millisecond)
	}
}
