package realnet

import (
	"bytes"
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

	"strand/core/env"
	"strand/diskio"
)

// TestColdTailOfAGrowingFileIsLeftToTheWriter: the 10 s rule looks at the
// file's last append, not at the age of the bytes a region covers, so a slow
// partition's segment can qualify with a tail long gone from the page cache.
// Such a region is read by the connection's writer, never on the loop, where
// a disk read would stall every connection; the fresh bytes just appended
// still are read on the loop. Which bytes are in memory is the file's answer
// (diskio's TestReadCachedAtReadsOnlyMemory checks that one against the page
// cache); here a file declares its first bytes cold, so that the loop's
// decision is checked the same on every file system.
func TestColdTailOfAGrowingFileIsLeftToTheWriter(t *testing.T) {
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	old := bytes.Repeat([]byte("o"), 200<<10)
	appended, closeDisk := appendedFile(t, loop, old)
	defer closeDisk()
	file := coldBelow{File: appended.(*diskio.File), coldEnd: int64(len(old))}
	loop.Call(func() {
		if err := file.Append([]byte("new")); err != nil {
			t.Error(err)
		}
	})
	read := func(position, bytes int64) (cached bool, got []byte) {
		frame := env.Frame{Pieces: []env.FramePiece{{Bytes: []byte("hdr")}, {Region: env.FileRegion{File: file, Position: position, Bytes: bytes}}}}
		loop.Call(func() {
			read, buf, ok := readTailOnLoop(frame)
			cached = ok
			if ok {
				for _, piece := range read.Pieces {
					got = append(got, piece.Bytes...)
				}
			}
			recycleTailRead(buf)
		})
		return cached, got
	}
	if cached, _ := read(0, int64(len(old))); cached {
		t.Fatal("a region whose pages left the page cache was read on the loop")
	}
	if cached, _ := read(int64(len(old))-1, 4); cached {
		t.Fatal("a region with one byte no longer in the page cache was read on the loop")
	}
	if cached, got := read(int64(len(old)), 3); !cached || string(got) != "hdrnew" {
		t.Fatalf("the bytes just appended: read on the loop %v, frame %q; want true, \"hdrnew\"", cached, got)
	}
}

// coldBelow is a diskio file whose bytes below coldEnd are not in memory, as
// far as ReadCachedAt tells: those of a segment whose tail left the page cache.
type coldBelow struct {
	*diskio.File
	coldEnd int64
}

func (f coldBelow) ReadCachedAt(p []byte, off int64) (bool, error) {
	if off < f.coldEnd {
		return false, nil
	}
	return f.File.ReadCachedAt(p, off)
}

// tailByteAt is the byte the tail-read test's file holds at position p: a
// hash of p, so that bytes from another answer, another region or another
// offset of the same region do not match by luck.
func tailByteAt(p int64) byte {
	x := uint64(p) * 0x9e3779b97f4a7c15
	return byte(x >> 56)
}

// TestTailReadsUnderPartialWritesAndCloses drives many connections at
// once with Fetch-like answers whose regions are read on the loop (tail
// reads into pooled buffers), sent by the writer (sendfile, pread) or mixed,
// through small socket buffers and slow readers, so that the loop's direct
// writes are cut short and the writer finishes them, while some
// connections are shut down mid-stream from other goroutines. Every byte a
// client reads must be the file's byte at that region's offset; a frame's
// Release overwrites its regions in the file at once (as a deleted or
// truncated segment would lose them), so a Release that ran before the
// regions were read shows as wrong bytes too: not for frames the writer sent
// with sendfile, whose pages the socket may still hold after the call
// returns (zero copy), so that an overwrite would show whatever realnet did.
// Every Release must run exactly once. It fails if writeDirect puts back a
// buffer it left partly written to the writer, if the writer puts its
// buffers back before writing them, or if a tail-read frame is released
// before its regions are copied.
func TestTailReadsUnderPartialWritesAndCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	cfg := networkTestConfig(t, map[string]string{"strand.connection.buffered.bytes.max": "1073741824"})
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	appended, closeDisk := appendedFile(t, loop, []byte("start"))
	defer closeDisk()
	file := appended.(*diskio.File)
	n := testNetwork(t, loop, cfg)
	n.handler = closedHandler{}

	const (
		conns     = 8
		answers   = 60
		closeConn = 3 // connections below this one are shut down mid-stream
	)
	type conn struct {
		sc     *serverConn
		client net.Conn
	}
	cs := make([]conn, conns)
	for i := range cs {
		server, client := tcpPair(t)
		// A small send buffer cuts the loop's direct writes short. The
		// client's receive buffer stays above loopback's MSS (64 KiB):
		// below it Linux can stall a connection for good, with a 32 KiB
		// segment queued against a 16 KiB window.
		server.(*net.TCPConn).SetWriteBuffer(8 << 10)
		client.(*net.TCPConn).SetReadBuffer(128 << 10)
		id := env.ConnID(100 + i)
		sc := testServerConn(t, n, id, server)
		if sc.raw == nil {
			t.Fatal("no raw descriptor: direct writes are off")
		}
		for k := range answers {
			sc.push(slot{correlationID: int32(k)}, 0)
		}
		n.mu.Lock()
		n.conns[id] = sc
		n.mu.Unlock()
		n.goroutines.Add(2)
		go sc.writeLoop()
		go sc.readLoop() // reads nothing; finishes the connection once it is shut down
		cs[i] = conn{sc: sc, client: client}
	}
	defer func() {
		for _, c := range cs {
			c.sc.shutdown()
		}
		n.goroutines.Wait()
	}()

	// Clients: read every answer in order and check each byte.
	errs := make(chan error, conns)
	var readers sync.WaitGroup
	for i, c := range cs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			c.client.SetReadDeadline(time.Now().Add(60 * time.Second))
			for k := range answers {
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // a slow reader
				}
				var hdr [12]byte
				if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
					errs <- readErr(i, k, err)
					return
				}
				size := int(binary.BigEndian.Uint32(hdr[:]))
				if corr := int(binary.BigEndian.Uint32(hdr[4:])); corr != k {
					errs <- fmt.Errorf("conn %d: answer %d arrived where %d was due", i, corr, k)
					return
				}
				regions := int(binary.BigEndian.Uint32(hdr[8:]))
				desc := make([]byte, 12*regions)
				if _, err := io.ReadFull(c.client, desc); err != nil {
					errs <- readErr(i, k, err)
					return
				}
				body := 8 + len(desc)
				for r := range regions {
					pos := int64(binary.BigEndian.Uint64(desc[12*r:]))
					length := int(binary.BigEndian.Uint32(desc[12*r+8:]))
					var mark [4]byte
					if _, err := io.ReadFull(c.client, mark[:]); err != nil {
						errs <- readErr(i, k, err)
						return
					}
					if string(mark[:]) != "<rg>" {
						errs <- fmt.Errorf("conn %d answer %d region %d: marker %q", i, k, r, mark)
						return
					}
					data := make([]byte, length)
					got, err := io.ReadFull(c.client, data)
					for b := range got {
						if data[b] != tailByteAt(pos+int64(b)) {
							errs <- fmt.Errorf("conn %d answer %d region %d [%d, +%d): byte %d is %#x, want %#x",
								i, k, r, pos, length, b, data[b], tailByteAt(pos+int64(b)))
							return
						}
					}
					if err != nil {
						errs <- readErr(i, k, err)
						return
					}
					body += 4 + length
				}
				if body != size {
					errs <- fmt.Errorf("conn %d answer %d: %d bytes after the size prefix, want %d", i, k, body, size)
					return
				}
			}
		}()
	}

	// Closers: shut some connections down mid-stream, from other goroutines.
	for i := range closeConn {
		go func() {
			time.Sleep(time.Duration(20+30*i) * time.Millisecond)
			switch i % 3 {
			case 0:
				cs[i].sc.shutdown()
			case 1:
				// A close in request order (env.Network.Close) on the
				// oldest request not answered yet: the answers before it
				// are still written, those after it dropped, and their
				// frames released once, when answered.
				loop.Post(func() {
					sc := cs[i].sc
					sc.mu.Lock()
					corr, waiting := int32(0), false
					for _, s := range sc.slots {
						if !s.answered {
							corr, waiting = s.correlationID, true
							break
						}
					}
					sc.mu.Unlock()
					if waiting {
						n.Close(sc.id, corr)
					} else {
						sc.shutdown()
					}
				})
			default:
				cs[i].client.Close()
			}
		}()
	}

	// The loop's side: answers built from freshly appended chunks, each
	// region used by one answer only; some answered at once (tail reads),
	// some later (far from the end by then: the writer's).
	var releases sync.Map // frame number -> *int, touched on the loop
	type pending struct {
		conn  int
		corr  int32
		frame env.Frame
	}
	var later []pending
	next := make([]int32, conns)
	rng := rand.New(rand.NewPCG(3, 4))
	regionSize := func() int {
		switch r := rng.IntN(20); {
		case r < 10:
			return 1 + rng.IntN(sendfileBytesMin)
		case r < 18:
			return sendfileBytesMin + rng.IntN(loopReadBytesMax-sendfileBytesMin)
		default:
			return loopReadBytesMax + rng.IntN(300<<10)
		}
	}
	frames, sendfiled, overwritten := 0, 0, 0
	build := func(corr int32) (env.Frame, error) {
		regions := 1 + rng.IntN(3)
		if rng.IntN(10) == 0 {
			regions = 0 // a plain answer
		}
		hdr := make([]byte, 12+12*regions)
		binary.BigEndian.PutUint32(hdr[4:], uint32(corr))
		binary.BigEndian.PutUint32(hdr[8:], uint32(regions))
		frame := env.Frame{Pieces: []env.FramePiece{{Bytes: hdr}}}
		body := len(hdr) - 4
		var pins []*tailRegionFile
		var regionsOf []env.FileRegion
		for r := range regions {
			length := regionSize()
			pos := file.Size()
			chunk := make([]byte, length)
			for b := range chunk {
				chunk[b] = tailByteAt(pos + int64(b))
			}
			if err := file.Append(chunk); err != nil {
				return env.Frame{}, err
			}
			binary.BigEndian.PutUint64(hdr[12+12*r:], uint64(pos))
			binary.BigEndian.PutUint32(hdr[12+12*r+8:], uint32(length))
			pin := &tailRegionFile{File: file}
			region := env.FileRegion{File: pin, Position: pos, Bytes: int64(length)}
			frame.Pieces = append(frame.Pieces, env.FramePiece{Bytes: []byte("<rg>")}, env.FramePiece{Region: region})
			pins = append(pins, pin)
			regionsOf = append(regionsOf, region)
			body += 4 + length
		}
		binary.BigEndian.PutUint32(hdr, uint32(body))
		if regions > 0 {
			frames++
			count := new(int)
			releases.Store(frames, count)
			frame.Release = func() {
				*count++
				// The pin is gone: the bytes may go too (a deleted
				// or truncated segment). Overwrite them, unless a
				// region went by sendfile: the socket may still hold
				// the page cache's pages then (zero copy), and would
				// send the new bytes whatever realnet does.
				for _, pin := range pins {
					if pin.sendfiled.Load() {
						sendfiled++
						return
					}
				}
				overwritten++
				for _, r := range regionsOf {
					garbage := make([]byte, r.Bytes)
					for b := range garbage {
						garbage[b] = ^tailByteAt(r.Position + int64(b))
					}
					if err := file.WriteAt(garbage, r.Position); err != nil {
						panic(err)
					}
				}
			}
		}
		return frame, nil
	}
	reply := func(c int, corr int32, frame env.Frame) {
		if len(frame.Pieces) == 1 {
			if sc := n.conn(cs[c].sc.id); sc != nil {
				sc.answer(corr, frame.Pieces[0].Bytes)
			}
			return
		}
		n.ReplyFrame(cs[c].sc.id, corr, frame)
	}
	for remaining := conns * answers; remaining > 0; {
		var buildErr error
		loop.Call(func() {
			for range 4 {
				c := rng.IntN(conns)
				if next[c] == answers {
					continue
				}
				corr := next[c]
				next[c]++
				remaining--
				frame, err := build(corr)
				if err != nil {
					buildErr = err
					return
				}
				if rng.IntN(4) == 0 {
					later = append(later, pending{c, corr, frame})
				} else {
					reply(c, corr, frame)
				}
			}
			if len(later) > 6 || (remaining == 0 && len(later) > 0) {
				rng.Shuffle(len(later), func(a, b int) { later[a], later[b] = later[b], later[a] })
				for _, p := range later {
					reply(p.conn, p.corr, p.frame)
				}
				later = later[:0]
			}
		})
		if buildErr != nil {
			t.Fatal(buildErr)
		}
	}

	readers.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		var ce *closedConnErr
		if errors.As(err, &ce) && ce.conn < closeConn {
			continue // shut down on purpose; its bytes up to then were checked
		}
		t.Error(err)
		failed++
	}
	if failed > 0 {
		return
	}
	for _, c := range cs {
		c.sc.shutdown()
	}
	n.goroutines.Wait()
	waitUntil(t, "every Release", 10*time.Second, func() bool {
		ok := true
		loop.Call(func() {
			releases.Range(func(k, v any) bool {
				if got := *v.(*int); got != 1 {
					ok = false
					if got > 1 {
						t.Errorf("frame %d released %d times", k, got)
					}
				}
				return true
			})
		})
		return ok
	})
	loop.Call(func() {
		t.Logf("%d frames with regions: %d overwritten on release, %d sent with sendfile; tail-read buffers recycled so far: %d",
			frames, overwritten, sendfiled, tailReadFrames.recycled.Load())
		if overwritten == 0 || sendfiled == 0 {
			t.Errorf("want frames both overwritten on release and sent with sendfile")
		}
	})
}

// tailRegionFile is one region's view of a diskio file: it records
// whether the writer sent the region with sendfile (which asks for Fd).
type tailRegionFile struct {
	*diskio.File
	sendfiled atomic.Bool
}

func (f *tailRegionFile) Fd() int {
	f.sendfiled.Store(true)
	return f.File.Fd()
}

// closedConnErr is a client read that ended early.
type closedConnErr struct {
	conn, answer int
	err          error
}

func (e *closedConnErr) Error() string {
	return fmt.Sprintf("conn %d answer %d: %v", e.conn, e.answer, e.err)
}

func readErr(conn, answer int, err error) error {
	return &closedConnErr{conn: conn, answer: answer, err: err}
}
