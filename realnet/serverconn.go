package realnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/wire"
)

// readBufferBytes is the reader's buffer: small requests are read with few
// system calls; large frames bypass it.
const readBufferBytes = 64 << 10

// closeLingerMs bounds how long a connection closing in request order
// (closeAt) waits, once its last answer and its FIN are written, for the
// client to close its end. Until then the reader discards what the client
// still sends, so that the socket is closed with nothing unread: Linux
// answers a close with unread bytes by a reset and drops what it has not
// transmitted yet, the very answers the ordered close exists to deliver.
// A Kafka client closes as soon as it reads the FIN; the bound is for one
// that does not, and is long enough for a slow client to take a full send
// buffer.
const closeLingerMs = 30_000

// slot is one request read from a connection and not yet written back.
type slot struct {
	correlationID int32
	// seq numbers the connection's requests in arrival order, from 1.
	seq uint64
	// requestBytes is the frame's size, counted in the connection's
	// buffered bytes until the slot is written.
	requestBytes int64
	answered     bool
	// frame is the encoded response; nil for Skip or a pieced response.
	frame []byte
	// pieced is a response with file regions (Fetch), written by
	// responseWriter; its Release is posted once it is written or dropped.
	pieced env.Frame
	// recycle is the tailReadFrames buffer the response's pieces alias
	// (readTailOnLoop), put back once they are written; nil for none.
	recycle *frameBuf
	// closes marks the request the connection closes on (closeAt): it is
	// answered by the close, and no slot follows it.
	closes bool
}

// serverConn is one inbound connection: a reader goroutine that decodes
// requests and hands them to the loop, and a writer goroutine that writes
// responses in request order. A response made only of bytes that is next in
// line while the writer is idle is written by the loop itself, with one
// non-blocking write (writeDirect): a produce answer then leaves without
// waking the writer.
type serverConn struct {
	net      *Network
	id       env.ConnID
	listener string
	c        net.Conn
	// clientHost is the peer's address as Kafka reports it ("/" and the
	// IP), set in every request header (env.RequestHeader.ClientHost).
	clientHost string
	// raw is c's descriptor, for the loop's non-blocking writes; nil when
	// c is not TCP.
	raw syscall.RawConn
	// auth is the connection's authentication (authconn.go): TLS, SASL,
	// and the principal its requests carry.
	auth *connAuth

	mu sync.Mutex
	// room is broadcast when requests or buffered bytes go (the reader
	// waits on it); work is signalled when the writer has something to
	// write.
	room sync.Cond
	work sync.Cond
	// slots are the requests read and not yet written, in arrival order.
	slots []slot
	// bufferedBytes counts request frames until written back and response
	// frames until written (strand.connection.buffered.bytes.max).
	bufferedBytes int64
	closed        bool
	// seqLast is the seq of the newest slot.
	seqLast uint64
	// closing is set once the connection closes in request order
	// (closeAt): the slot that closes is the last, no request read later
	// is delivered, and the writer writes the answers before it, then the
	// FIN (finSent). closeTimer then shuts the connection down if an
	// answer never comes (env.CloseAnswersWaitMs), or if the client does
	// not close its end after the FIN (closeLingerMs).
	closing    bool
	finSent    bool
	closeTimer *time.Timer
	// closeSeq is the seq of the request closed on, 0 for none. The event
	// loop reads it without mu before delivering a request, to drop those
	// that arrived after it.
	closeSeq atomic.Uint64
	// writing is set while a goroutine writes responses outside mu: the
	// writer, or the loop in writeDirect. The other does not write then.
	writing bool
	// unwritten is what the socket did not take of the loop's last direct
	// write; the writer writes it before anything else, then frees
	// unwrittenFreed buffered bytes.
	unwritten      net.Buffers
	unwrittenFreed int64
	// unwrittenRecycle are the tail-read buffers unwritten aliases, put
	// back by the writer once it has written them.
	unwrittenRecycle []*frameBuf
	// directRecycle is writeDirect's scratch list of tail-read buffers
	// (loop only).
	directRecycle []*frameBuf
	// direct is writeDirect's scratch list of frames (loop only).
	direct net.Buffers
}

// clientHostOf renders a peer address as Kafka's ClientHost: "/" and the
// IP (Java's InetAddress.toString with no host name), or the address as it
// is when it has no IP.
func clientHostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return "/" + host
	}
	return "/" + addr.String()
}

func newServerConn(n *Network, id env.ConnID, listener string, c net.Conn) *serverConn {
	sc := &serverConn{net: n, id: id, listener: listener, c: c, clientHost: clientHostOf(c.RemoteAddr()), auth: newConnAuth(nil)}
	sc.room.L = &sc.mu
	sc.work.L = &sc.mu
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			sc.raw = raw
		}
	}
	return sc
}

// readLoop reads, checks and decodes frames until the connection ends, then
// reports the close to the node.
func (sc *serverConn) readLoop() {
	defer sc.net.goroutines.Done()
	defer sc.finish()
	if !sc.authenticateTransport() {
		return
	}
	r := bufio.NewReaderSize(sc.c, readBufferBytes)
	for sc.waitForRoom() {
		if err := sc.readOne(r); err != nil {
			var bad *badRequestError
			if errors.As(err, &bad) || (!sc.closingInOrder() && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed)) {
				sc.net.logger.Info("closing connection", "conn", sc.id, "listener", sc.listener,
					"remote", sc.c.RemoteAddr().String(), "err", err)
			}
			if bad != nil {
				sc.closeAfterEarlier()
			}
			break
		}
	}
	if sc.closingInOrder() {
		sc.drainUntilClosed(r)
	}
}

// badRequestError is a frame the reader refuses (a size over
// socket.request.max.bytes, a request core/wire cannot decode or the node
// does not accept): the connection closes in request order, as Kafka,
// which reads a connection's next request only once the previous one is
// answered, would close it after every earlier answer.
type badRequestError struct{ err error }

func (e *badRequestError) Error() string { return e.err.Error() }
func (e *badRequestError) Unwrap() error { return e.err }

// closingInOrder reports whether the connection is closing in request
// order (closeAt) and has not been shut down yet.
func (sc *serverConn) closingInOrder() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.closing && !sc.closed
}

// drainUntilClosed is the reader's end on a connection closing in request
// order: it reads and discards what the client still sends until the client
// closes its end or the socket is shut down (so that closing the socket
// finds nothing unread: see closeLingerMs), then waits until the writer has
// written the answers and the FIN, or the connection was shut down. The
// reader's finish then closes the socket and reports the close.
func (sc *serverConn) drainUntilClosed(r *bufio.Reader) {
	_, _ = io.Copy(io.Discard, r) // any end of reading will do: EOF, or the socket shut down
	sc.mu.Lock()
	for !sc.closed && !sc.finSent {
		sc.room.Wait()
	}
	sc.mu.Unlock()
}

// readOne reads one frame and hands it on. An error ends the connection.
func (sc *serverConn) readOne(r *bufio.Reader) error {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return err
	}
	length, err := wire.FrameLength(prefix, sc.frameBytesMax())
	if err != nil {
		return sc.refuseFrameLength(err) // before anything is allocated for the frame
	}
	size := int64(length)
	if !sc.reserve(size) {
		return net.ErrClosed
	}
	if !sc.net.budget.acquire(size) {
		sc.unreserve(size)
		return net.ErrClosed
	}
	// The decoded request aliases its frame (kmsg). A Produce frame is
	// recycled once the core has handled the request and diskio has
	// written its batches (framepool.go); any other gets a fresh buffer, as
	// the core may keep referring to it.
	fb, err := sc.frameFor(r, length)
	if err != nil {
		sc.net.budget.release(size)
		sc.unreserve(size)
		return err
	}
	frame := fb.buf
	if _, err := io.ReadFull(r, frame); err != nil {
		sc.net.budget.release(size)
		sc.unreserve(size)
		return err
	}
	if sc.intercepts(frame) {
		// SASL authentication, before (or instead of) the core.
		sc.net.budget.release(size)
		err := sc.authenticateFrame(frame, size)
		if fb.pooled {
			produceFrames.release(fb)
		}
		return err
	}
	hdr, req, err := wire.ParseRequest(frame, sc.net.supported, sc.net.checks.limits)
	if err != nil {
		sc.net.budget.release(size)
		var reqErr *wire.RequestError
		if errors.As(err, &reqErr) && reqErr.Kind == wire.KindUnsupportedVersion && hdr.APIKey == kmsg.ApiVersions.Int16() {
			// KIP-511: answer with v0 and our table so the client retries.
			resp := wire.AppendResponse(nil, hdr.CorrelationID, wire.APIVersionsUnsupported(sc.net.advertised(sc.listener)))
			if _, ok := sc.push(slot{correlationID: hdr.CorrelationID, requestBytes: size, answered: true, frame: resp}, int64(len(resp))); !ok {
				return net.ErrClosed
			}
			return nil
		}
		sc.unreserve(size)
		return &badRequestError{err}
	}
	return sc.deliver(hdr, req, size, fb)
}

// deliver hands a decoded request to the node, on the loop, with the
// connection's identity; size is its bytes, reserved in the connection's
// buffered bytes and acquired from the node's budget.
func (sc *serverConn) deliver(hdr env.RequestHeader, req kmsg.Request, size int64, fb *frameBuf) error {
	hdr.ClientHost, hdr.Listener, hdr.Principal = sc.clientHost, sc.listener, sc.auth.principal
	handler := sc.net.handler
	req = sc.net.checks.precheck(hdr, req) // here, not on the loop: decompression, CRCs, recompression
	seq, ok := sc.push(slot{correlationID: hdr.CorrelationID, requestBytes: size}, 0)
	if !ok {
		sc.net.budget.release(size)
		if fb.pooled {
			produceFrames.release(fb)
		}
		return net.ErrClosed
	}
	budget := sc.net.budget
	id := sc.id
	if !sc.net.loop.Post(func() {
		budget.release(size)
		if closeSeq := sc.closeSeq.Load(); closeSeq == 0 || seq < closeSeq {
			// Not behind a request the connection closes on (closeAt),
			// which the core would not have read yet in Kafka.
			handler.HandleRequest(id, hdr, req)
		}
		if fb.pooled {
			produceFrames.release(fb)
		}
	}) {
		budget.release(size)
		return net.ErrClosed
	}
	return nil
}

// frameFor returns the buffer to read a frame of length bytes into: a pooled
// one for a Produce request (its api key, the body's first two bytes, is
// peeked from r), a fresh one otherwise.
func (sc *serverConn) frameFor(r *bufio.Reader, length int32) (*frameBuf, error) {
	if length < 2 {
		return &frameBuf{buf: make([]byte, length)}, nil
	}
	key, err := r.Peek(2)
	if err != nil {
		return nil, err
	}
	if int16(binary.BigEndian.Uint16(key)) != kmsg.Produce.Int16() {
		return &frameBuf{buf: make([]byte, length)}, nil
	}
	return produceFrames.get(int(length)), nil
}

// waitForRoom blocks while the connection has as many requests in flight
// or bytes buffered as it may (backpressure: the socket is not read, so the
// client's sends eventually block). False once the connection closed or
// is closing in request order.
func (sc *serverConn) waitForRoom() bool {
	limits := sc.net.limits
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for !sc.closed && !sc.closing && (int64(len(sc.slots)) >= int64(limits.ConnectionRequestsInFlightMax) ||
		sc.bufferedBytes >= limits.ConnectionBufferedBytesMax) {
		sc.room.Wait()
	}
	return !sc.closed && !sc.closing
}

// reserve counts size bytes of a frame about to be read, waiting while they
// do not fit beside what is buffered; a frame always fits when nothing else
// is (config guarantees socket.request.max.bytes fits the budget).
func (sc *serverConn) reserve(size int64) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for !sc.closed && !sc.closing && sc.bufferedBytes > 0 && sc.bufferedBytes+size > sc.net.limits.ConnectionBufferedBytesMax {
		sc.room.Wait()
	}
	if sc.closed || sc.closing {
		return false
	}
	sc.bufferedBytes += size
	return true
}

func (sc *serverConn) unreserve(size int64) {
	sc.mu.Lock()
	sc.bufferedBytes -= size
	sc.mu.Unlock()
	sc.room.Broadcast()
}

// push appends a slot whose request bytes are already reserved, plus
// extraBytes of response frame, and returns its seq. On a connection
// closing in request order (or closed) it appends nothing, gives the
// reservation back and reports false: the request is not to be delivered.
func (sc *serverConn) push(s slot, extraBytes int64) (uint64, bool) {
	sc.mu.Lock()
	if sc.closing || sc.closed {
		sc.bufferedBytes -= s.requestBytes
		sc.mu.Unlock()
		sc.room.Broadcast()
		return 0, false
	}
	sc.seqLast++
	s.seq = sc.seqLast
	sc.slots = append(sc.slots, s)
	sc.bufferedBytes += extraBytes
	sc.mu.Unlock()
	if s.answered {
		sc.work.Signal()
	}
	return s.seq, true
}

// answer fills the first unanswered slot for correlationID (frame nil:
// skipped). An answer nobody waits for is a core bug on a live connection,
// but after a close the slots are gone, and on a connection closing in
// request order those after the close are, so it is ignored.
func (sc *serverConn) answer(correlationID int32, frame []byte) {
	sc.answerWith(correlationID, frame, env.Frame{}, nil)
}

// answerWith is answer with a pieced response too, whose pieces may alias a
// tail-read buffer (recycle, put back once they are written). It runs on
// the event loop, so a response dropped on a closed connection is released
// at once.
func (sc *serverConn) answerWith(correlationID int32, frame []byte, pieced env.Frame, recycle *frameBuf) {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		if pieced.Release != nil {
			pieced.Release()
		}
		return
	}
	i := sc.waitingSlotLocked(correlationID)
	if i == len(sc.slots) {
		closing := sc.closing
		sc.mu.Unlock()
		if !closing {
			panic("realnet: the node answered a request that is not waiting on its connection")
		}
		if pieced.Release != nil {
			pieced.Release()
		}
		return
	}
	sc.slots[i].answered, sc.slots[i].frame, sc.slots[i].pieced, sc.slots[i].recycle = true, frame, pieced, recycle
	sc.bufferedBytes += sc.slots[i].responseBytes()
	switch {
	case i != 0:
		sc.mu.Unlock()
	case sc.directWritableLocked():
		sc.writeDirect()
	default:
		sc.mu.Unlock()
		sc.work.Signal()
	}
}

// waitingSlotLocked returns the index of the unanswered slot of
// correlationID, or len(sc.slots) if none waits. sc.mu is held.
func (sc *serverConn) waitingSlotLocked(correlationID int32) int {
	i := 0
	for i < len(sc.slots) && (sc.slots[i].answered || sc.slots[i].correlationID != correlationID) {
		i++
	}
	return i
}

// closeAt closes the connection in request order (env.Network.Close) on
// the first unanswered request correlationID: the slots after it are
// dropped (their requests, if not delivered yet, never will be), it
// becomes the last slot, answered by the close, and the writer writes the
// answers before it as they come, then the FIN. It runs on the event loop.
// A close naming no waiting request is a core bug on a live connection,
// and ignored on one already closing (the request was dropped) or closed.
func (sc *serverConn) closeAt(correlationID int32) {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	i := sc.waitingSlotLocked(correlationID)
	if i == len(sc.slots) {
		closing := sc.closing
		sc.mu.Unlock()
		if !closing {
			panic("realnet: the node closed on a request that is not waiting on its connection")
		}
		return
	}
	var releases []func()
	for _, s := range sc.slots[i+1:] {
		sc.bufferedBytes -= s.requestBytes + s.responseBytes()
		if s.pieced.Release != nil {
			releases = append(releases, s.pieced.Release)
		}
		if s.recycle != nil {
			recycleTailRead(s.recycle)
		}
	}
	clear(sc.slots[i+1:])
	sc.slots = sc.slots[:i+1]
	sc.slots[i].answered, sc.slots[i].closes = true, true
	sc.closeSeq.Store(sc.slots[i].seq)
	if !sc.closing {
		sc.closing = true
		sc.closeTimer = time.AfterFunc(env.CloseAnswersWaitMs*time.Millisecond, sc.shutdown)
	}
	sc.mu.Unlock()
	for _, release := range releases { // on the loop: at once, as answerWith does
		release()
	}
	sc.room.Broadcast()
	sc.work.Signal()
}

// closeAfterEarlier closes the connection in request order after the
// requests read so far, for a frame the reader refused (badRequestError):
// a close slot goes last, answered by the close, and the writer writes the
// answers before it, then the FIN, as closeAt does for the core.
func (sc *serverConn) closeAfterEarlier() {
	sc.mu.Lock()
	if sc.closed || sc.closing {
		sc.mu.Unlock()
		return
	}
	sc.seqLast++
	sc.slots = append(sc.slots, slot{correlationID: -1, seq: sc.seqLast, answered: true, closes: true})
	sc.closeSeq.Store(sc.seqLast)
	sc.closing = true
	sc.closeTimer = time.AfterFunc(env.CloseAnswersWaitMs*time.Millisecond, sc.shutdown)
	sc.mu.Unlock()
	sc.room.Broadcast()
	sc.work.Signal()
}

// writerHasWorkLocked reports whether the writer has something to write: the
// rest of a direct write, or the oldest request's answer (or close). With mu
// held.
func (sc *serverConn) writerHasWorkLocked() bool {
	return len(sc.unwritten) > 0 || (len(sc.slots) > 0 && sc.slots[0].answered)
}

// directWritableLocked reports whether the loop may write the answered
// responses at the head itself: nobody else is writing or has bytes left
// to write, and they are all plain bytes without a Release (a frame with
// regions may have to wait for the disk, and goes to the writer, which
// posts its Release). With mu held.
func (sc *serverConn) directWritableLocked() bool {
	if sc.raw == nil || sc.writing || len(sc.unwritten) > 0 {
		return false
	}
	for _, s := range sc.slots {
		if !s.answered {
			break
		}
		if s.pieced.Release != nil {
			return false
		}
		for _, p := range s.pieced.Pieces {
			if p.Region.File != nil {
				return false
			}
		}
	}
	return true
}

// writeDirect writes the answered responses at the head on the loop, with
// one non-blocking writev, and leaves what the socket did not take to the
// writer. Called with mu held (directWritableLocked); returns with it
// released. A failed write closes the connection, as the writer's would.
func (sc *serverConn) writeDirect() {
	frames := sc.direct[:0]
	recycle := sc.directRecycle[:0]
	var freed int64
	for len(sc.slots) > 0 && sc.slots[0].answered && !sc.slots[0].closes {
		s := sc.slots[0]
		sc.slots[0] = slot{}
		sc.slots = sc.slots[1:]
		freed += s.requestBytes + s.responseBytes()
		if s.frame != nil {
			frames = append(frames, s.frame)
		}
		for _, p := range s.pieced.Pieces {
			frames = append(frames, p.Bytes)
		}
		if s.recycle != nil {
			recycle = append(recycle, s.recycle)
		}
	}
	sc.writing = true
	sc.mu.Unlock()
	rest, err := writeNonBlocking(sc.raw, frames)
	sc.mu.Lock()
	sc.writing = false
	if len(rest) > 0 && err == nil && !sc.closed {
		sc.unwritten = append(sc.unwritten[:0], rest...)
		sc.unwrittenFreed = freed
		sc.unwrittenRecycle = append(sc.unwrittenRecycle[:0], recycle...)
	} else {
		sc.bufferedBytes -= freed
		for _, buf := range recycle { // written, or never to be
			recycleTailRead(buf)
		}
	}
	wake := sc.writerHasWorkLocked()
	sc.mu.Unlock()
	clear(frames)
	sc.direct = frames[:0]
	clear(recycle)
	sc.directRecycle = recycle[:0]
	sc.room.Broadcast()
	if err != nil {
		sc.shutdown()
		return
	}
	if wake {
		sc.work.Signal()
	}
}

// writeLoop writes answered responses in request order: it waits until the
// oldest request is answered (or a direct write left bytes), then writes
// every answered one in a row. When the oldest is the request the
// connection closes on (closeAt), every earlier answer is written: it
// writes the FIN and ends.
func (sc *serverConn) writeLoop() {
	defer sc.net.goroutines.Done()
	out := newResponseWriter(sc.c)
	var recycle []*frameBuf
	for {
		sc.mu.Lock()
		for !sc.closed && (sc.writing || !sc.writerHasWorkLocked()) {
			sc.work.Wait()
		}
		if sc.closed {
			sc.mu.Unlock()
			return
		}
		if len(sc.unwritten) == 0 && sc.slots[0].closes {
			sc.sendFinLocked()
			return
		}
		freed := sc.unwrittenFreed
		for _, b := range sc.unwritten {
			out.add(slot{frame: b})
		}
		clear(sc.unwritten)
		sc.unwritten, sc.unwrittenFreed = sc.unwritten[:0], 0
		recycle = append(recycle[:0], sc.unwrittenRecycle...)
		clear(sc.unwrittenRecycle)
		sc.unwrittenRecycle = sc.unwrittenRecycle[:0]
		for len(sc.slots) > 0 && sc.slots[0].answered && !sc.slots[0].closes {
			s := sc.slots[0]
			sc.slots[0] = slot{}
			sc.slots = sc.slots[1:]
			freed += s.requestBytes + s.responseBytes()
			out.add(s)
			if s.recycle != nil {
				recycle = append(recycle, s.recycle)
			}
		}
		sc.writing = true
		sc.mu.Unlock()
		var err error
		if out.queued() {
			err = out.run(sc.net.loop.PostRelease)
		}
		for _, buf := range recycle { // written, or never to be
			recycleTailRead(buf)
		}
		clear(recycle)
		if err != nil {
			sc.shutdown()
			return
		}
		sc.mu.Lock()
		sc.writing = false
		sc.bufferedBytes -= freed
		sc.mu.Unlock()
		sc.room.Broadcast()
	}
}

// sendFinLocked ends the writer of a connection closing in request order
// once every answer before the close is written: it shuts the socket's
// write side (the client reads the answers, then end of stream) and gives
// the client closeLingerMs to close its end, which the reader waits for
// (drainUntilClosed). Called with mu held; returns with it released.
func (sc *serverConn) sendFinLocked() {
	sc.finSent = true
	sc.closeTimer.Reset(closeLingerMs * time.Millisecond)
	sc.mu.Unlock()
	sc.room.Broadcast()
	cw, ok := sc.c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		sc.shutdown()
	}
}

// shutdown closes the socket; the reader then finishes the connection.
func (sc *serverConn) shutdown() {
	sc.mu.Lock()
	sc.closed = true
	if sc.closeTimer != nil {
		sc.closeTimer.Stop()
	}
	sc.mu.Unlock()
	sc.room.Broadcast()
	sc.work.Broadcast()
	sc.c.Close()
}

// finish runs when the reader exits: the connection is closed and
// forgotten, and the node hears of it after every request it was given.
func (sc *serverConn) finish() {
	sc.shutdown()
	sc.auth.stopExpiry()
	sc.mu.Lock()
	var unwritten []func()
	for _, s := range sc.slots {
		if s.pieced.Release != nil {
			unwritten = append(unwritten, s.pieced.Release)
		}
	}
	sc.slots = nil
	sc.bufferedBytes = 0
	sc.mu.Unlock()
	// Posted without mu: a post may run the loop here, and the core's
	// answers to this connection take mu.
	for _, release := range unwritten {
		sc.net.loop.PostRelease(release)
	}
	sc.net.forget(sc.id)
	handler, id := sc.net.handler, sc.id
	sc.net.loop.Post(func() { handler.HandleClosed(id) })
}
