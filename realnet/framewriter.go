package realnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"strand/core/env"
)

// Zero-copy Fetch (SPEC.md §7.5): a response frame the core encoded with file
// regions (env.Frame) is written as its byte pieces, with writev, and its
// regions, each sent with sendfile(2) from the segment file's descriptor at
// an explicit offset straight to the socket. (*net.TCPConn).ReadFrom would
// fall back to copying for anything but an *os.File read from its shared
// offset (CLARIFICATIONS.md, "Zero copy and mmap"). The core pins the
// regions until the frame's Release, which the writer posts to the event
// loop once the frame is written or the connection failed.
//
// A region smaller than sendfileBytesMin is read with pread(2)
// (ReadRegionAt) into the write buffer instead and leaves with the
// neighbouring byte pieces in one writev: below that size sendfile saves
// nothing measurable (BenchmarkRegionSend). So are the regions on
// connections that are not TCP. Off the loop the writer calls only the
// regionFile methods, which diskio makes safe on any goroutine; a region of
// a file without them (the fault-injecting disk) is read into the frame on
// the loop, in ReplyFrame (materialiseOnLoop).

// sendfileBytesMin is the smallest region sent with sendfile; see
// BenchmarkRegionSend for the measurements behind it.
const sendfileBytesMin = 16 << 10

// Fetches at the log's end (a follower's, a tailing consumer's) are answered
// with regions of bytes appended moments ago. ReplyFrame reads those on the
// loop instead (readTailOnLoop), with env.File's ReadAt: diskio serves
// bytes still queued for its write worker from memory, and the rest were
// just written, so they are in the page cache. The frame is then plain
// bytes, released at once, and the loop writes it itself like any other
// plain response, instead of waking the connection's writer, which would
// often wait for the write worker to write the region before its pread or
// sendfile. Regions of sendfile's size qualify too: a follower's answer
// under load carries tens of KiB, and the copy costs the loop less than the
// writer's wake-up and its wait for the write worker (SPEC.md §7.5). A frame reads at most
// loopReadBytesMax on the loop, into a pooled buffer (tailReadFrames) that
// goes back once written.
const (
	// loopReadBytesMax bounds the region bytes one frame reads on the loop:
	// a copy of at most a few tens of microseconds.
	loopReadBytesMax = 256 << 10
	// loopReadTailBytes is how close to its file's logical end a region
	// must end to be read on the loop: appended so recently that it is
	// still queued or in the page cache, never a disk read.
	loopReadTailBytes = 1 << 20
)

// loopReadAppendedWithin is how recently a file must have been appended to
// for its tail to be read on the loop (tailFile): a segment rolled long ago,
// whose tail a consumer catching up from far behind reads, may no longer be
// in the page cache, and its read goes to the writer like any other.
var loopReadAppendedWithin = 10 * time.Second

// tailFile is a file that says whether it is being appended to, and reads
// only what memory holds: diskio's. Regions of other files are never read on
// the loop.
type tailFile interface {
	AppendedWithin(d time.Duration) bool
	// ReadCachedAt fills p from off from queued appends and the page
	// cache only, reporting false if any byte would need the disk.
	ReadCachedAt(p []byte, off int64) (bool, error)
}

// sendfileChunkBytes caps one sendfile call, so that a huge region does not
// hold the socket's poll registration for long in one call.
const sendfileChunkBytes = 1 << 30

// regionFile is an env.File whose regions may be read off the event loop:
// diskio's File. Its appends may still sit in the disk's write worker, so
// both paths wait for a region's bytes to be in the file first: sendfile
// after WaitWritten, ReadRegionAt (pread) waits itself. These methods, and
// only these, may be called on any goroutine; the descriptor stays open
// while the region is pinned.
type regionFile interface {
	Fd() int
	WaitWritten(end int64) error
	ReadRegionAt(p []byte, off int64) (int, error)
}

// materialiseOnLoop replaces the regions of files without a descriptor by
// their bytes, read with ReadAt on the event loop (env.File's goroutine).
// An unreadable region fails the whole frame.
func materialiseOnLoop(frame env.Frame) (env.Frame, error) {
	out := frame
	copied := false
	for i, p := range frame.Pieces {
		if p.Region.File == nil {
			continue
		}
		if _, ok := p.Region.File.(regionFile); ok {
			continue
		}
		if !copied {
			out.Pieces = append([]env.FramePiece(nil), frame.Pieces...)
			copied = true
		}
		data, err := (env.Frame{Pieces: []env.FramePiece{p}}).AppendTo(nil)
		if err != nil {
			return frame, err
		}
		out.Pieces[i] = env.FramePiece{Bytes: data}
	}
	return out, nil
}

// tailReadFrames is the process's pool of the buffers readTailOnLoop reads
// regions into. A buffer goes back once its response is written, or its
// connection failed (serverConn), never while a piece of it may still be
// written; responses dropped on a closed connection leave theirs to the
// garbage collector.
var tailReadFrames framePool

// readTailOnLoop returns frame with its regions replaced by their bytes,
// read on the loop into buf (from tailReadFrames; the caller puts it back
// once nothing refers to the bytes), when they are all at the ends of files
// appended to lately, together at most loopReadBytesMax (see
// loopReadTailBytes, loopReadAppendedWithin), and all in memory (queued or
// in the page cache: tailFile.ReadCachedAt); otherwise it returns false and
// frame unchanged. It runs on the event loop (env.File's goroutine).
func readTailOnLoop(frame env.Frame) (read env.Frame, buf *frameBuf, ok bool) {
	var regionBytes int64
	regions := 0
	for _, p := range frame.Pieces {
		r := p.Region
		if r.File == nil {
			continue
		}
		regions++
		regionBytes += r.Bytes
		if regionBytes > loopReadBytesMax || r.Position+r.Bytes < r.File.Size()-loopReadTailBytes {
			return frame, nil, false
		}
		if tf, ok := r.File.(tailFile); !ok || !tf.AppendedWithin(loopReadAppendedWithin) {
			return frame, nil, false
		}
	}
	if regions == 0 {
		return frame, nil, false
	}
	buf = tailReadFrames.get(int(regionBytes))
	data := buf.buf[:0]
	out := env.Frame{Pieces: make([]env.FramePiece, 0, len(frame.Pieces))}
	for _, p := range frame.Pieces {
		if p.Region.File == nil {
			out.Pieces = append(out.Pieces, p)
			continue
		}
		at := len(data)
		data = data[:at+int(p.Region.Bytes)] // get sized buf for every region
		// Only bytes in memory: a region whose pages left the page cache
		// (the 10 s rule looks at the file's last append, not at the
		// age of these bytes) goes to the writer, whose read may wait.
		cached, err := p.Region.File.(tailFile).ReadCachedAt(data[at:], p.Region.Position)
		if err != nil || !cached {
			recycleTailRead(buf)
			return frame, nil, false // the writer's read reports an error
		}
		out.Pieces = append(out.Pieces, env.FramePiece{Bytes: data[at:len(data):len(data)]})
	}
	if int64(len(data)) != regionBytes || (regionBytes > 0 && &data[0] != &buf.buf[0]) {
		panic("realnet: a tail read did not fill its buffer exactly")
	}
	return out, buf, true
}

// recycleTailRead puts back a buffer of readTailOnLoop's (nil: none).
func recycleTailRead(buf *frameBuf) {
	if buf != nil && buf.pooled {
		tailReadFrames.put(buf)
	}
}

// responseWriter writes a run of answered slots: byte pieces gathered into
// one writev, regions sent with sendfile in between.
type responseWriter struct {
	c   net.Conn
	raw syscall.RawConn // nil when c is not TCP
	// sendfileMin is sendfileBytesMin; benchmarks move it to force a path.
	sendfileMin int64
	pieces      []env.FramePiece
	// pending gathers byte pieces for the next writev.
	pending net.Buffers
	// releases are the queued frames' Release funcs, posted to the loop
	// after the run, whatever its outcome.
	releases []func()
	// gather, on a TLS connection, is beneath c: writeJoined gathers the
	// records of its Write into few system calls (recordGatherer).
	gather *recordGatherer
}

func newResponseWriter(c net.Conn) *responseWriter {
	w := &responseWriter{c: c, sendfileMin: sendfileBytesMin}
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
	return w
}

// add queues a slot's response: a plain frame, a frame with regions, or
// nothing (Skip).
func (w *responseWriter) add(s slot) {
	if s.frame != nil {
		w.pieces = append(w.pieces, env.FramePiece{Bytes: s.frame})
	}
	w.pieces = append(w.pieces, s.pieced.Pieces...)
	if s.pieced.Release != nil {
		w.releases = append(w.releases, s.pieced.Release)
	}
}

// queued reports whether anything waits to be written or released.
func (w *responseWriter) queued() bool { return len(w.pieces) > 0 || len(w.releases) > 0 }

// run writes everything queued, then posts the releases to the loop. An
// error means the connection is broken.
func (w *responseWriter) run(post func(func()) bool) error {
	err := w.write()
	for _, release := range w.releases {
		post(release)
	}
	clear(w.releases)
	w.releases = w.releases[:0]
	clear(w.pieces) // let written frames be collected
	w.pieces = w.pieces[:0]
	clear(w.pending)
	w.pending = w.pending[:0]
	return err
}

func (w *responseWriter) write() error {
	if w.raw == nil {
		return w.writeJoined()
	}
	for _, p := range w.pieces {
		r := p.Region
		switch {
		case r.File == nil:
			w.pending = append(w.pending, p.Bytes)
		case !w.sendfileFits(r):
			data, err := preadRegion(r)
			if err != nil {
				return err
			}
			w.pending = append(w.pending, data)
		default:
			if err := w.writePending(); err != nil {
				return err
			}
			if err := w.sendfile(r); err != nil {
				return err
			}
		}
	}
	return w.writePending()
}

// writeJoined writes everything queued on a connection that is not TCP
// (TLS) as one buffer, its regions read into it with pread: net.Buffers
// would write each piece alone, and tls.Conn makes every Write at least
// one record and one system call, so a Fetch answer of a dozen pieces cost
// a dozen records (TestTLSWriterJoinsPieces). The buffer comes from a pool,
// so that a large answer costs no fresh zeroed memory: TLS cannot use
// sendfile, and a new buffer per region was a third of the broker's CPU
// for a TLS consumer.
func (w *responseWriter) writeJoined() error {
	total := 0
	for _, p := range w.pieces {
		if p.Region.File == nil {
			total += len(p.Bytes)
		} else {
			total += int(p.Region.Bytes)
		}
	}
	if total == 0 {
		return nil
	}
	fb := joinedWriteFrames.get(total)
	defer joinedWriteFrames.put(fb)
	buf := fb.buf[:0]
	for _, p := range w.pieces {
		r := p.Region
		if r.File == nil {
			buf = append(buf, p.Bytes...)
			continue
		}
		dst := buf[len(buf) : len(buf)+int(r.Bytes)]
		if _, err := fileOf(r).ReadRegionAt(dst, r.Position); err != nil {
			return fmt.Errorf("read region %s [%d, +%d): %w", r.File.Path(), r.Position, r.Bytes, err)
		}
		buf = buf[:len(buf)+int(r.Bytes)]
	}
	if w.gather == nil {
		_, err := w.c.Write(buf)
		return err
	}
	w.gather.gather()
	_, err := w.c.Write(buf) // tls.Conn encrypts into its own records before it returns
	return errors.Join(err, w.gather.release())
}

// joinedWriteFrames are writeJoined's buffers, shared by the process's TLS
// connections.
var joinedWriteFrames framePool

// writePending writes the gathered byte pieces with one writev.
func (w *responseWriter) writePending() error {
	if len(w.pending) == 0 {
		return nil
	}
	toWrite := w.pending // WriteTo consumes its receiver
	_, err := toWrite.WriteTo(w.c)
	clear(w.pending)
	w.pending = w.pending[:0]
	return err
}

// sendfileFits reports whether r is worth, and able to be, sent with
// sendfile.
func (w *responseWriter) sendfileFits(r env.FileRegion) bool {
	return w.raw != nil && r.Bytes >= w.sendfileMin
}

// fileOf returns r's file as a regionFile.
func fileOf(r env.FileRegion) regionFile {
	f, ok := r.File.(regionFile)
	if !ok {
		panic("realnet: a region of a file the writer cannot read reached it; ReplyFrame materialises those")
	}
	return f
}

// sendfile sends r from its file's descriptor at r.Position, without
// moving any file offset, waiting on the socket's poller when it is full.
func (w *responseWriter) sendfile(r env.FileRegion) error {
	f := fileOf(r)
	if err := f.WaitWritten(r.Position + r.Bytes); err != nil {
		return fmt.Errorf("sendfile %s [%d, +%d): %w", r.File.Path(), r.Position, r.Bytes, err)
	}
	fileFd := f.Fd()
	sent := int64(0)
	var sendErr error
	err := w.raw.Write(func(sock uintptr) bool {
		for sent < r.Bytes {
			offset := r.Position + sent
			n, err := unix.Sendfile(int(sock), fileFd, &offset, int(min(r.Bytes-sent, sendfileChunkBytes)))
			if n > 0 {
				sent += int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket is writable
			case err == unix.EINTR:
			case err != nil:
				sendErr = err
				return true
			case n == 0:
				// The file is shorter than the region: the pin failed.
				sendErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err = errors.Join(err, sendErr); err != nil {
		return fmt.Errorf("sendfile %s [%d, +%d) after %d bytes: %w", r.File.Path(), r.Position, r.Bytes, sent, err)
	}
	return nil
}

// preadRegion reads r into a new buffer with pread: the read+write path.
func preadRegion(r env.FileRegion) ([]byte, error) {
	data := make([]byte, r.Bytes)
	if _, err := fileOf(r).ReadRegionAt(data, r.Position); err != nil {
		return nil, fmt.Errorf("read region %s [%d, +%d): %w", r.File.Path(), r.Position, r.Bytes, err)
	}
	return data, nil
}

// responseBytes is the memory a slot's response holds: its frame, or the
// byte pieces of a pieced one (regions are file pages, not buffers).
func (s slot) responseBytes() int64 {
	total := int64(len(s.frame))
	for _, p := range s.pieced.Pieces {
		total += int64(len(p.Bytes))
	}
	return total
}

// writeNonBlocking writes what the socket takes of bufs now, with writev,
// without waiting for it to become writable, and returns the rest (nil when
// all was written): the event loop's direct writes, which must never wait
// on a peer's receive window. The returned slices alias bufs' buffers.
func writeNonBlocking(raw syscall.RawConn, bufs net.Buffers) (net.Buffers, error) {
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	if len(bufs) == 0 {
		return nil, nil
	}
	var writeErr error
	err := raw.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs[:min(len(bufs), iovecsMax)])
			if n > 0 {
				bufs = consumeBuffers(bufs, n)
			}
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return true // the writer goroutine waits for room instead
			case err != nil:
				writeErr = err
				return true
			case n == 0:
				writeErr = io.ErrShortWrite
				return true
			}
		}
		return true
	})
	if err = errors.Join(err, writeErr); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if len(bufs) == 0 {
		return nil, nil
	}
	return bufs, nil
}

// iovecsMax bounds the buffers one writev takes: Linux's IOV_MAX.
const iovecsMax = 1024

// consumeBuffers drops the first n bytes of bufs.
func consumeBuffers(bufs net.Buffers, n int) net.Buffers {
	for n > 0 {
		if n < len(bufs[0]) {
			bufs[0] = bufs[0][n:]
			return bufs
		}
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}
