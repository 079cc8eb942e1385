package realnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"golang.org/x/sys/unix"

	"strand/core/admission"
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
	// countedBytes are the response's bytes counted in the node's
	// response budget (strand.response.buffered.bytes.max) until written:
	// its responseBytes on a client-plane connection, 0 otherwise.
	countedBytes int64
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
	// gather is beneath c on a TLS listener (tlsgather.go), nil otherwise.
	gather *recordGatherer
	// auth is the connection's authentication (authconn.go): TLS, SASL,
	// and the principal its requests carry.
	auth *connAuth
	// admitted is the gate's record of the connection, given back when it
	// finishes.
	admitted admission.Admitted
	// planeNow is the traffic class (an admission.Plane) the connection's
	// requests are read and run under: the control plane on a controller
	// listener, or once the connection has sent a follower's Fetch on the
	// inter-broker listener (markReplication); the client plane otherwise.
	// Only the reader changes it; the reaper reads it.
	planeNow atomic.Uint32
	// down is set once the connection is shut down, for readers waiting on
	// a plane budget.
	down atomic.Bool
	// responsesCounted are the bytes of the connection's answers counted
	// in the node's response budget and not yet written (the slots'
	// countedBytes). Changed with mu held; read without it by the
	// response budget.
	responsesCounted atomic.Int64
	// parked counts the connection's requests the loop holds back
	// (responseBudget.park); changed on the loop only.
	parked atomic.Int32
	// sendBlocked is set when the socket refused part of an answer and
	// cleared when the writer has written everything it took: while it is
	// set, the client is not taking its answers, and the connection's
	// requests wait before the core (responseBudget.park) and its reader
	// stops, as Kafka mutes a channel until its response is sent.
	sendBlocked atomic.Bool

	mu sync.Mutex
	// queuedForCore counts the connection's client-plane requests posted
	// to the loop and not yet taken (clientRequestsQueuedMax).
	queuedForCore int
	// room is broadcast when requests or buffered bytes go (the reader
	// waits on it); work is signalled when the writer has something to
	// write.
	room sync.Cond
	work sync.Cond
	// slots are the requests read and not yet written, in arrival order.
	slots []slot
	// acct counts request frames from their first bytes until written
	// back and response frames until written
	// (strand.connection.buffered.bytes.max), and keeps the times the
	// connection's deadlines run from (the Network's reaper checks them).
	acct   admission.ConnAccount
	closed bool
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
	// unwrittenFreed buffered bytes, unwrittenCounted of them counted in the
	// response budget.
	unwritten        net.Buffers
	unwrittenFreed   int64
	unwrittenCounted int64
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

func newServerConn(n *Network, id env.ConnID, listener string, c net.Conn, admitted admission.Admitted) *serverConn {
	sc := &serverConn{net: n, id: id, listener: listener, c: c, clientHost: clientHostOf(c.RemoteAddr()), admitted: admitted, auth: newConnAuth(nil),
		acct: admission.NewConnAccount(n.limits.ConnectionBufferedBytesMax, n.nowMs())}
	if slices.Contains(n.controllerListeners, listener) {
		sc.planeNow.Store(uint32(admission.PlaneControl))
	}
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
//
// Nothing is reserved or allocated from the size prefix alone: the
// frame's request is counted in its plane's budget, and its bytes are
// reserved as they arrive (readBody). From its first byte the frame must
// arrive whole within strand.request.read.timeout.ms, which the Network's
// reaper enforces by shutting the connection down.
func (sc *serverConn) readOne(r *bufio.Reader) error {
	if _, err := r.Peek(1); err != nil {
		return err // idle until here: connections.max.idle.ms applies
	}
	sc.readStarted() // until the body is read; an error ends the connection anyway
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return err
	}
	length, err := wire.FrameLength(prefix, sc.frameBytesMax())
	if err != nil {
		return sc.refuseFrameLength(err) // before anything is allocated for the frame
	}
	arrived := sc.arrivedBytes(r, int64(length), 0)
	hold := sc.beginFrame(arrived >= int64(length))
	if hold == nil {
		return net.ErrClosed
	}
	defer hold.release() // whatever the hold still owns when the reader gives up
	fb, err := sc.readBody(r, int64(length), arrived, hold)
	if err != nil {
		return err
	}
	frame := fb.buf
	if sc.intercepts(frame) {
		sc.readDone() // what follows is the node's time, not the client's
		// SASL authentication, before (or instead of) the core.
		err := sc.authenticateFrame(frame, hold)
		if fb.pooled {
			produceFrames.release(fb)
		}
		return err
	}
	scanned, err := wire.ScanRequest(frame, sc.net.supported, sc.net.checks.limits)
	// The structures kmsg decodes the request into are reserved beside its
	// frame, before decoding: they count in the connection's buffered
	// bytes until the answer is written, and in the plane's budget until
	// the core takes the request, as the frame does. A wait for room
	// pauses the read deadline, as the frame's reservations do.
	if err == nil && !hold.reserve(scanned.DecodedBytesBound) {
		return net.ErrClosed
	}
	sc.readDone() // what follows (decoding, the pre-check's waits) is the node's time, not the client's
	hdr, req := scanned.Header, kmsg.Request(nil)
	if err == nil {
		req, err = scanned.Decode()
	}
	if err != nil {
		var reqErr *wire.RequestError
		if errors.As(err, &reqErr) && reqErr.Kind == wire.KindUnsupportedVersion && hdr.APIKey == kmsg.ApiVersions.Int16() {
			// KIP-511: answer with v0 and our table so the client retries.
			resp := wire.AppendResponse(nil, hdr.CorrelationID, wire.APIVersionsUnsupported(sc.net.advertised(sc.listener)))
			if _, ok := sc.push(slot{correlationID: hdr.CorrelationID, requestBytes: hold.takeConnBytes(), answered: true, frame: resp}, int64(len(resp))); !ok {
				return net.ErrClosed
			}
			return nil
		}
		return &badRequestError{err}
	}
	return sc.deliver(hdr, req, hold, fb)
}

// deliver hands a decoded request to the node, on the loop, with the
// connection's identity; hold is what its reading reserved, which moves to
// the slot (the connection's bytes) and to the loop event (the plane's
// budget, given back when the core takes the request).
func (sc *serverConn) deliver(hdr env.RequestHeader, req kmsg.Request, hold *frameHold, fb *frameBuf) error {
	hdr.ClientHost, hdr.Listener, hdr.Principal = sc.clientHost, sc.listener, sc.auth.principal
	handler := sc.net.handler
	req = sc.net.checks.precheck(hdr, req) // here, not on the loop: decompression, CRCs, recompression
	sc.markReplication(req)
	seq, ok := sc.push(slot{correlationID: hdr.CorrelationID, requestBytes: hold.takeConnBytes()}, 0)
	if !ok {
		if fb.pooled {
			produceFrames.release(fb)
		}
		return net.ErrClosed
	}
	queued := hold.pass()
	id := sc.id
	run := func(handle bool) {
		queued.release() // the core takes the request (or it is dropped): it leaves the queue's budget
		if closeSeq := sc.closeSeq.Load(); handle && (closeSeq == 0 || seq < closeSeq) {
			// Not behind a request the connection closes on (closeAt),
			// which the core would not have read yet in Kafka.
			handler.HandleRequest(id, hdr, req)
		}
		if fb.pooled {
			produceFrames.release(fb)
		}
	}
	plane := sc.plane()
	if plane == admission.PlaneClient {
		sc.queueForCore(1)
	}
	if !sc.net.loop.PostFrom(plane, func() {
		if plane == admission.PlaneClient {
			sc.queueForCore(-1)
			// A client request waits, in its plane's budget, while
			// the response budget does not admit it
			// (responseBudget.park).
			if sc.net.responses.park(sc, run) {
				return
			}
		}
		run(true)
	}) {
		if plane == admission.PlaneClient {
			sc.queueForCore(-1)
		}
		queued.release()
		return net.ErrClosed
	}
	return nil
}

// clientRequestsQueuedMax is how many requests of one client-plane
// connection may wait on the loop for the core at once: its reader reads
// the next one once the loop has taken the last (waitForConnRoom). The
// loop takes a plane's events first come first served, so without it a
// client that pipelines expensive requests (Metadata of every topic)
// would queue all of them ahead of every other client's; with it, each
// connection has at most one in the queue, and a request waits behind at
// most one of each other connection's, as in Kafka, which reads a
// connection's next request only once the last is answered. Requests the
// core holds (a Produce waiting for acks, a long-polling Fetch) are not
// queued: strand.connection.requests.in.flight.max bounds those.
const clientRequestsQueuedMax = 1

// queueForCore counts n more (or fewer) of the connection's requests
// waiting on the loop for the core, waking its reader when one leaves.
func (sc *serverConn) queueForCore(n int) {
	sc.mu.Lock()
	sc.queuedForCore += n
	if sc.queuedForCore < 0 {
		panic(fmt.Sprintf("realnet: connection %d has %d requests queued for the core", sc.id, sc.queuedForCore))
	}
	sc.mu.Unlock()
	if n < 0 {
		sc.room.Broadcast()
	}
}

// readBody reads a frame's body of length bytes, arrived of which had
// arrived when its size prefix was read, into a buffer that grows only as
// its bytes arrive (admission.FrameBytes): at most twice what has arrived,
// read or waiting in the socket, and at least
// admission.FrameSmallBytes; the buffer doubles each time its bytes fill
// it, and each growth is reserved before it is read into. So a client that
// claims a large frame and stalls holds at most twice what it sent, while
// a frame that is half there when its prefix is read (the usual case under
// load) gets its whole buffer at once and is read without copying.
//
// The decoded request aliases the frame (kmsg). A Produce frame comes from
// the pool and is recycled once the core has handled the request and
// diskio has written its batches (framepool.go); any other gets a fresh
// buffer, as the core may keep referring to it.
func (sc *serverConn) readBody(r *bufio.Reader, length, arrived int64, hold *frameHold) (*frameBuf, error) {
	capacity := admission.FrameBytes(length, arrived)
	if !hold.reserve(capacity) {
		return nil, net.ErrClosed
	}
	pooled := false
	if length >= 2 {
		key, err := r.Peek(2)
		if err != nil {
			return nil, err
		}
		pooled = int16(binary.BigEndian.Uint16(key)) == kmsg.Produce.Int16()
	}
	fb := newFrameBuf(pooled, capacity)
	have := int64(0)
	for {
		n, err := io.ReadFull(r, fb.buf[have:capacity])
		have += int64(n)
		if err != nil {
			recycleFrameBuf(fb)
			return nil, err
		}
		if capacity == length {
			return fb, nil
		}
		next := admission.FrameBytes(length, sc.arrivedBytes(r, length, have))
		if !hold.reserve(next - capacity) {
			recycleFrameBuf(fb)
			return nil, net.ErrClosed
		}
		grown := newFrameBuf(pooled, next)
		copy(grown.buf, fb.buf[:have])
		recycleFrameBuf(fb)
		fb, capacity = grown, next
	}
}

// arrivedBytes is how much of a frame of length bytes has arrived, read
// already in the frame (have) or waiting: in r's buffer, and in the
// socket's receive queue (SIOCINQ, asked only when what r holds leaves the
// frame beyond admission.FrameSmallBytes: one ioctl per large frame). A
// connection without a descriptor (not TCP) counts only what r holds.
func (sc *serverConn) arrivedBytes(r *bufio.Reader, length, have int64) int64 {
	arrived := have + int64(r.Buffered())
	if sc.raw == nil || arrived >= length || length <= admission.FrameSmallBytes {
		return arrived
	}
	var queued int
	var ioctlErr error
	if err := sc.raw.Control(func(fd uintptr) { queued, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ioctlErr != nil {
		return arrived // the read that follows reports a broken socket
	}
	return arrived + int64(queued)
}

// newFrameBuf returns a buffer of n bytes for a frame: from the pool for a
// Produce frame, fresh otherwise.
func newFrameBuf(pooled bool, n int64) *frameBuf {
	if pooled {
		return produceFrames.get(int(n))
	}
	return &frameBuf{buf: make([]byte, n)}
}

// recycleFrameBuf puts back a pooled frame buffer nothing refers to: one
// outgrown, or whose frame never arrived whole.
func recycleFrameBuf(fb *frameBuf) {
	if fb.pooled {
		produceFrames.put(fb)
	}
}

// markReplication moves a connection on the inter-broker listener to the
// control plane once it sends a follower's Fetch (a replica id ≥ 0, in the
// body before v15 and in ReplicaState from v15): it is a follower's
// replication connection, which shares the listener with clients when the
// inter-broker listener is also a client listener (the three-node example),
// and its requests from then on have the control plane's budget and share
// of the loop. The claim is the request's own: authorizing it is the
// closed control plane's job (SPEC.md §7.2, §10.3).
func (sc *serverConn) markReplication(req kmsg.Request) {
	if sc.plane() == admission.PlaneControl || sc.listener != sc.net.interBrokerListener {
		return
	}
	if f, ok := req.(*kmsg.FetchRequest); ok && (f.ReplicaID >= 0 || f.ReplicaState.ID >= 0) {
		sc.planeNow.Store(uint32(admission.PlaneControl))
	}
}

// plane is the connection's traffic class now (planeNow).
func (sc *serverConn) plane() admission.Plane { return admission.Plane(sc.planeNow.Load()) }

// readStarted records a request's first byte, for the read deadline.
func (sc *serverConn) readStarted() {
	sc.mu.Lock()
	sc.acct.ReadStarted(sc.net.nowMs())
	sc.mu.Unlock()
}

// readPaused and readResumed bracket a wait of the node's for room while
// a request is read: the read deadline stops meanwhile.
func (sc *serverConn) readPaused() {
	sc.mu.Lock()
	sc.acct.ReadPaused()
	sc.mu.Unlock()
}

func (sc *serverConn) readResumed() {
	sc.mu.Lock()
	sc.acct.ReadResumed(sc.net.nowMs())
	sc.mu.Unlock()
}

// readDone records that the request's read ended, whole or not.
func (sc *serverConn) readDone() {
	sc.mu.Lock()
	sc.acct.ReadDone(sc.net.nowMs())
	sc.mu.Unlock()
}

// waitForRoom blocks while the connection has as many requests in flight
// or bytes buffered as it may (backpressure: the socket is not read, so the
// client's sends eventually block), and, on the client plane, while the
// node's response budget is full and the connection holds answers counted
// in it (responseBudget.waitRoom). False once the connection closed or is
// closing in request order.
func (sc *serverConn) waitForRoom() bool {
	if !sc.waitForConnRoom() {
		return false
	}
	if sc.plane() == admission.PlaneClient && !sc.net.responses.waitRoom(sc) {
		return false
	}
	return !sc.down.Load()
}

// waitForConnRoom is waitForRoom's wait on the connection's own limits.
func (sc *serverConn) waitForConnRoom() bool {
	limits := sc.net.limits
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for !sc.closed && !sc.closing && (int64(len(sc.slots)) >= int64(limits.ConnectionRequestsInFlightMax) || !sc.acct.HasRoom() ||
		sc.queuedForCore >= clientRequestsQueuedMax) {
		sc.room.Wait()
	}
	return !sc.closed && !sc.closing
}

// countResponseLocked counts n bytes of slot s's answer, just filled, in
// the connection's account and, on the client plane, in the node's response
// budget. With mu held.
func (sc *serverConn) countResponseLocked(s *slot, n int64) {
	sc.acct.Hold(n)
	if n > 0 && sc.plane() == admission.PlaneClient {
		s.countedBytes = n
		sc.responsesCounted.Add(n)
		sc.net.responses.hold(n)
	}
}

// freeLocked gives back the bytes of written (or dropped) slots: freed of
// the connection's account, counted of them of the response budget. A
// closed connection's were given back at once (finish). With mu held.
func (sc *serverConn) freeLocked(freed, counted int64) {
	if sc.closed {
		return
	}
	sc.acct.Free(freed)
	sc.responsesCounted.Add(-counted)
	sc.net.responses.free(counted)
}

// holdBytes counts n more bytes of a request holding ownBytes in the
// connection's account, waiting while they do not fit beside what it holds;
// they always fit when nothing else is held (admission.ConnAccount.Fits).
// False if the connection closed or is closing first.
func (sc *serverConn) holdBytes(n, ownBytes int64) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.acct.Fits(n, ownBytes) {
		// The node waits for the connection's answers to be written: the
		// read deadline stops meanwhile.
		sc.acct.ReadPaused()
		for !sc.closed && !sc.closing && !sc.acct.Fits(n, ownBytes) {
			sc.room.Wait()
		}
		sc.acct.ReadResumed(sc.net.nowMs())
	}
	if sc.closed || sc.closing {
		return false
	}
	sc.acct.Hold(n)
	return true
}

// freeBytes gives back n bytes holdBytes counted.
func (sc *serverConn) freeBytes(n int64) {
	sc.mu.Lock()
	if !sc.closed { // a finished connection's account was emptied at once
		sc.acct.Free(n)
	}
	sc.mu.Unlock()
	sc.room.Broadcast()
}

// push appends a slot whose request bytes are already reserved, plus
// responseBytes of answer (an answered slot's frame), and returns its seq.
// On a connection closing in request order (or closed) it appends nothing,
// gives the reservation back and reports false: the request is not to be
// delivered.
func (sc *serverConn) push(s slot, responseBytes int64) (uint64, bool) {
	sc.mu.Lock()
	if sc.closing || sc.closed {
		if !sc.closed {
			sc.acct.Free(s.requestBytes)
		}
		sc.mu.Unlock()
		sc.room.Broadcast()
		return 0, false
	}
	sc.seqLast++
	s.seq = sc.seqLast
	sc.countResponseLocked(&s, responseBytes)
	sc.slots = append(sc.slots, s)
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
	sc.countResponseLocked(&sc.slots[i], sc.slots[i].responseBytes())
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
		sc.freeLocked(s.requestBytes+s.responseBytes(), s.countedBytes)
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
	var freed, counted int64
	for len(sc.slots) > 0 && sc.slots[0].answered && !sc.slots[0].closes {
		s := sc.slots[0]
		sc.slots[0] = slot{}
		sc.slots = sc.slots[1:]
		freed += s.requestBytes + s.responseBytes()
		counted += s.countedBytes
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
		sc.sendBlocked.Store(true)
		sc.unwritten = append(sc.unwritten[:0], rest...)
		sc.unwrittenFreed, sc.unwrittenCounted = freed, counted
		sc.unwrittenRecycle = append(sc.unwrittenRecycle[:0], recycle...)
	} else {
		sc.freeLocked(freed, counted)
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
	out.gather = sc.gather
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
		freed, counted := sc.unwrittenFreed, sc.unwrittenCounted
		for _, b := range sc.unwritten {
			out.add(slot{frame: b})
		}
		clear(sc.unwritten)
		sc.unwritten, sc.unwrittenFreed, sc.unwrittenCounted = sc.unwritten[:0], 0, 0
		recycle = append(recycle[:0], sc.unwrittenRecycle...)
		clear(sc.unwrittenRecycle)
		sc.unwrittenRecycle = sc.unwrittenRecycle[:0]
		for len(sc.slots) > 0 && sc.slots[0].answered && !sc.slots[0].closes {
			s := sc.slots[0]
			sc.slots[0] = slot{}
			sc.slots = sc.slots[1:]
			freed += s.requestBytes + s.responseBytes()
			counted += s.countedBytes
			out.add(s)
			if s.recycle != nil {
				recycle = append(recycle, s.recycle)
			}
		}
		sc.writing = true
		sc.acct.WriteStarted(sc.net.nowMs()) // the client may not read: strand.response.write.timeout.ms
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
		sc.acct.WriteDone(sc.net.nowMs())
		sc.freeLocked(freed, counted)
		unblocked := len(sc.unwritten) == 0 && sc.sendBlocked.Swap(false)
		sc.mu.Unlock()
		sc.room.Broadcast()
		if unblocked {
			sc.net.responses.retryParked()
		}
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
// A reader or writer blocked on the socket returns at once, and one
// waiting for a plane budget is woken to see the connection gone.
func (sc *serverConn) shutdown() {
	sc.mu.Lock()
	sc.closed = true
	if sc.closeTimer != nil {
		sc.closeTimer.Stop()
	}
	sc.mu.Unlock()
	sc.down.Store(true)
	sc.room.Broadcast()
	sc.work.Broadcast()
	sc.net.budgets.wake()
	sc.net.responses.room.Broadcast()
	sc.c.Close()
}

// expired says which deadline the connection has overstayed at nowMs, if
// any (the Network's reaper asks); pressured says other requests wait for
// room in its plane's budget, responsesFull that the response budget is
// full: either way a client-plane write has
// admission.Deadlines.PressuredWriteMs, so that clients that do not take
// their answers give their room to those that wait.
// A connection closing in request order has its own timer (closeAt).
func (sc *serverConn) expired(nowMs int64, pressured, responsesFull bool) admission.Expiry {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed || sc.closing {
		return admission.NotExpired
	}
	if (pressured || responsesFull) && sc.plane() == admission.PlaneClient && sc.acct.WriteOverdue(nowMs, sc.net.deadlines.PressuredWriteMs()) {
		return admission.ExpiredWrite
	}
	busy := len(sc.slots) > 0 || len(sc.unwritten) > 0
	return sc.acct.Expired(nowMs, busy, pressured, sc.net.deadlines)
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
	sc.acct.FreeAll()
	sc.net.responses.free(sc.responsesCounted.Swap(0))
	sc.mu.Unlock()
	// Posted without mu: a post may run the loop here, and the core's
	// answers to this connection take mu.
	for _, release := range unwritten {
		sc.net.loop.PostRelease(release)
	}
	sc.net.forget(sc)
	handler, id := sc.net.handler, sc.id
	sc.net.loop.PostFrom(sc.plane(), func() { handler.HandleClosed(id) })
}
