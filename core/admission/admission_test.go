package admission

import (
	"slices"
	"testing"

	"strand/core/config"
)

// brokerConfig is a combined node with a client listener, a controller
// listener and, with replication set, a dedicated inter-broker listener.
func brokerConfig(t *testing.T, replication bool, extra map[string]string) config.Broker {
	t.Helper()
	props := map[string]string{
		"node.id": "1", "process.roles": "broker,controller",
		"listeners":                      "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names":      "CONTROLLER",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,REPLICATION:PLAINTEXT",
		"controller.quorum.voters":       "1@127.0.0.1:9093",
		"log.dirs":                       "/tmp/x",
	}
	if replication {
		props["listeners"] += ",REPLICATION://127.0.0.1:9094"
		props["inter.broker.listener.name"] = "REPLICATION"
	}
	for k, v := range extra {
		props[k] = v
	}
	cfg, _, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openN opens n connections and returns how many were admitted and the
// last verdict.
func openN(g *Gate, n int, listener, ip string, nowMs int64) (admitted []Admitted, last Verdict) {
	for range n {
		a, v := g.Open(listener, ip, nowMs)
		last = v
		if v.Admitted() {
			admitted = append(admitted, a)
		}
	}
	return admitted, last
}

func TestGateCountsTheControllerListenersApart(t *testing.T) {
	g := NewGate(brokerConfig(t, false, map[string]string{"max.connections": "3"}), nil, 0)
	clients, last := openN(g, 5, "PLAINTEXT", "10.0.0.1", 0)
	if len(clients) != 3 || last.Refused != RefusedBroker {
		t.Fatalf("client listener admitted %d of 5 at max.connections=3, last %+v", len(clients), last)
	}
	if controllers, _ := openN(g, 3, "CONTROLLER", "10.0.0.1", 0); len(controllers) != 3 {
		t.Fatalf("controller listener admitted %d of 3 while clients filled max.connections: it must be counted apart", len(controllers))
	}
	if _, v := g.Open("CONTROLLER", "10.0.0.2", 0); v.Refused != RefusedBroker {
		t.Fatalf("a fourth controller connection: %+v, want max.connections of the controller pool", v)
	}
	g.Close(clients[0])
	if _, v := g.Open("PLAINTEXT", "10.0.0.9", 0); !v.Admitted() {
		t.Fatalf("after a close the client listener refused: %+v", v)
	}
}

func TestGateProtectsADedicatedInterBrokerListener(t *testing.T) {
	g := NewGate(brokerConfig(t, true, map[string]string{"max.connections": "2", "listener.name.replication.max.connections": "3"}), nil, 0)
	if clients, _ := openN(g, 4, "PLAINTEXT", "10.0.0.1", 0); len(clients) != 2 {
		t.Fatalf("client listener admitted %d of 4 at max.connections=2", len(clients))
	}
	replicas, last := openN(g, 4, "REPLICATION", "10.0.0.2", 0)
	if len(replicas) != 3 || last.Refused != RefusedListener {
		t.Fatalf("dedicated inter-broker listener admitted %d of 4 (its own limit 3, max.connections full), last %+v", len(replicas), last)
	}
	// Shared with clients, the inter-broker listener is not protected, as
	// Kafka's protectedListener requires more than one broker listener.
	shared := NewGate(brokerConfig(t, false, map[string]string{"max.connections": "1"}), nil, 0)
	if admitted, last := openN(shared, 2, "PLAINTEXT", "10.0.0.2", 0); len(admitted) != 1 || last.Refused != RefusedBroker {
		t.Fatalf("shared inter-broker listener admitted %d of 2 at max.connections=1", len(admitted))
	}
}

func TestGateLimitsEachAddress(t *testing.T) {
	g := NewGate(brokerConfig(t, false, map[string]string{"max.connections.per.ip": "2"}), map[string]int32{"10.0.0.9": 4, "10.0.0.8": 0}, 0)
	a, last := openN(g, 3, "PLAINTEXT", "10.0.0.1", 0)
	if len(a) != 2 || last.Refused != RefusedIP {
		t.Fatalf("address admitted %d of 3 at max.connections.per.ip=2, last %+v", len(a), last)
	}
	if b, _ := openN(g, 5, "PLAINTEXT", "10.0.0.9", 0); len(b) != 4 {
		t.Fatalf("overridden address admitted %d of 5, want its override 4", len(b))
	}
	if _, v := g.Open("PLAINTEXT", "10.0.0.8", 0); v.Refused != RefusedIP {
		t.Fatalf("an address overridden to 0 was not refused: %+v", v)
	}
	if _, v := g.Open("PLAINTEXT", "10.0.0.2", 0); !v.Admitted() {
		t.Fatalf("another address refused: %+v", v)
	}
	g.Close(a[0])
	if _, v := g.Open("PLAINTEXT", "10.0.0.1", 0); !v.Admitted() {
		t.Fatalf("after a close the address was refused: %+v", v)
	}
}

func TestGateThrottlesTheCreationRate(t *testing.T) {
	g := NewGate(brokerConfig(t, true, map[string]string{"max.connection.creation.rate": "10"}), nil, 0)
	if a, _ := openN(g, 10, "PLAINTEXT", "10.0.0.1", 0); len(a) != 10 {
		t.Fatalf("a second's worth admitted %d of 10", len(a))
	}
	_, v := g.Open("PLAINTEXT", "10.0.0.1", 0)
	if v.ThrottleMs != 100 || v.Refused != RefusedNone {
		t.Fatalf("the 11th connection at 10/s: %+v, want throttled 100 ms", v)
	}
	if _, v := g.Open("PLAINTEXT", "10.0.0.1", 99); v.ThrottleMs != 1 {
		t.Fatalf("99 ms later: %+v, want 1 ms more", v)
	}
	if _, v := g.Open("PLAINTEXT", "10.0.0.1", 100); !v.Admitted() {
		t.Fatalf("100 ms later: %+v, want admitted", v)
	}
	// The controller pool and the protected listener have their own.
	if _, v := g.Open("CONTROLLER", "10.0.0.1", 100); !v.Admitted() {
		t.Fatalf("controller listener throttled by the client pool's rate: %+v", v)
	}
	if a, _ := openN(g, 20, "REPLICATION", "10.0.0.2", 100); len(a) != 20 {
		t.Fatalf("the protected listener admitted %d of 20: it is exempt from the broker-wide rate", len(a))
	}
	listener := NewGate(brokerConfig(t, true, map[string]string{"listener.name.replication.max.connection.creation.rate": "1"}), nil, 0)
	openN(listener, 1, "REPLICATION", "10.0.0.2", 0)
	if _, v := listener.Open("REPLICATION", "10.0.0.2", 0); v.ThrottleMs != 1000 {
		t.Fatalf("listener rate 1/s, second connection: %+v, want throttled 1000 ms", v)
	}
}

func TestGateReportsRefusalsOncePerInterval(t *testing.T) {
	g := NewGate(brokerConfig(t, false, map[string]string{"max.connections": "1"}), nil, 0)
	if _, due := g.RefusalsDue(0, RefusalReportIntervalMs); due {
		t.Fatal("a report due with no refusal")
	}
	openN(g, 1, "PLAINTEXT", "10.0.0.1", 0)
	openN(g, 3, "PLAINTEXT", "10.0.0.1", 5)
	r, due := g.RefusalsDue(5, RefusalReportIntervalMs)
	if !due || r.Counts[RefusedBroker] != 3 || r.LastIP != "10.0.0.1" || r.LastListener != "PLAINTEXT" {
		t.Fatalf("first report: due %v %+v, want 3 by max.connections at once", due, r)
	}
	openN(g, 1000, "PLAINTEXT", "10.0.0.2", 6)
	if _, due := g.RefusalsDue(5+RefusalReportIntervalMs-1, RefusalReportIntervalMs); due {
		t.Fatal("a second report within the interval")
	}
	r, due = g.RefusalsDue(5+RefusalReportIntervalMs, RefusalReportIntervalMs)
	if !due || r.Total() != 1000 || r.SinceMs != 5 || r.String() != "1000 by max.connections" {
		t.Fatalf("second report: due %v %+v %q", due, r, r.String())
	}
	if total := g.RefusedTotal(); total[RefusedBroker] != 1003 {
		t.Fatalf("refused total %v", total)
	}
}

func TestBudgetReservesWithinItsLimits(t *testing.T) {
	b := NewBudget(2, 100)
	if got := []bool{b.TryBeginRequest(true), b.TryBeginRequest(true), b.TryBeginRequest(true)}; !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("queued.max.requests=2 admitted %v, want two requests", got)
	}
	if !b.TryReserve(60, true, 0) || !b.TryReserve(40, true, 0) || b.TryReserve(1, true, 0) || b.TryReserve(1, true, 60) {
		t.Fatal("reservation beyond queued.max.request.bytes")
	}
	b.Release(40, true)
	if !b.TryReserve(50, true, 60) {
		t.Fatal("a request holding every reserved byte could not grow: alone, it always fits")
	}
	b.Release(110, true)
	b.EndRequest(true)
	if b.Bytes() != 0 || b.Requests() != 1 {
		t.Fatalf("budget holds %d bytes, %d requests", b.Bytes(), b.Requests())
	}
	unbounded := NewBudget(1, -1)
	if got := []bool{unbounded.TryReserve(1<<40, false, 0), unbounded.TryReserve(1<<40, false, 0)}; !slices.Equal(got, []bool{true, true}) {
		t.Fatal("queued.max.request.bytes=-1 is unbounded")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("releasing more than reserved did not panic")
		}
	}()
	b.Release(1, true)
}

// TestBudgetKeepsHalfForWholeRequests: partial requests, which may stall,
// get at most half of each limit; whole ones the rest.
func TestBudgetKeepsHalfForWholeRequests(t *testing.T) {
	b := NewBudget(5, 100)
	for i := range 3 {
		if !b.TryBeginRequest(false) {
			t.Fatalf("partial request %d of a half of 5 (rounded up: 3) refused", i)
		}
	}
	if b.TryBeginRequest(false) {
		t.Fatal("a fourth partial request of 5")
	}
	if got := []bool{b.TryBeginRequest(true), b.TryBeginRequest(true), b.TryBeginRequest(true)}; !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("whole requests got %v of the rest of the 5, want two", got)
	}
	if !b.TryReserve(30, false, 0) || !b.TryReserve(20, false, 0) || b.TryReserve(1, false, 0) {
		t.Fatal("partial bytes beyond half of 100")
	}
	if !b.TryReserve(50, true, 0) || b.TryReserve(1, true, 0) {
		t.Fatal("whole bytes did not get the other half")
	}
	b.Release(50, false)
	b.Release(50, true)
	if !b.TryReserve(60, false, 0) || !b.TryReserve(30, false, 60) {
		t.Fatal("a partial request alone may take more than half, and grow")
	}
	if b.TryReserve(1, false, 0) {
		t.Fatal("another partial request past half")
	}
}

func TestFrameBuffersGrowWithTheBytesThatArrived(t *testing.T) {
	for _, c := range []struct{ length, arrived, want int64 }{
		{100, 0, 100},
		{64 << 20, 8, FrameSmallBytes},
		{64 << 20, 1 << 20, 2 << 20},
		{64 << 20, 32 << 20, 64 << 20},
		{64 << 20, 64 << 20, 64 << 20},
	} {
		if got := FrameBytes(c.length, c.arrived); got != c.want {
			t.Errorf("FrameBytes(%d, %d) = %d, want %d", c.length, c.arrived, got, c.want)
		}
	}
	// Read as it trickles in: each buffer filled doubles it, never holding
	// more than twice what arrived, and copying at most twice the frame.
	length := int64(64<<20 + 3)
	capacity := FrameBytes(length, 0)
	copied := int64(0)
	for capacity < length {
		next := FrameBytes(length, capacity)
		if next > max(2*capacity, FrameSmallBytes) {
			t.Fatalf("grew %d → %d: more than twice what arrived", capacity, next)
		}
		copied += capacity
		capacity = next
	}
	if capacity != length || copied > 2*length {
		t.Fatalf("ended at %d for %d, copying %d", capacity, length, copied)
	}
}

func TestConnAccountDeadlines(t *testing.T) {
	d := Deadlines{IdleMs: 1000, ReadMs: 200, WriteMs: 300}
	if d.CheckEveryMs() != 20 {
		t.Fatalf("check every %d ms", d.CheckEveryMs())
	}
	a := NewConnAccount(10, 0)
	if e := a.Expired(999, false, false, d); e != NotExpired {
		t.Fatalf("idle for 999 ms: %v", e)
	}
	if e := a.Expired(1000, false, false, d); e != ExpiredIdle {
		t.Fatalf("idle for 1000 ms: %v", e)
	}
	if e := a.Expired(5000, true, false, d); e != NotExpired {
		t.Fatalf("a busy connection expired idle: %v", e)
	}
	a.ReadStarted(1000)
	if e := a.Expired(1199, false, false, d); e != NotExpired {
		t.Fatalf("reading for 199 ms: %v", e)
	}
	if e := a.Expired(1200, false, false, d); e != ExpiredRead || e.Key() != "strand.request.read.timeout.ms" {
		t.Fatalf("reading for 200 ms: %v", e)
	}
	a.ReadPaused()
	if e := a.Expired(9000, false, true, d); e != NotExpired {
		t.Fatalf("a read paused while the node waits for room: %v", e)
	}
	a.ReadResumed(9000)
	if e := a.Expired(9199, false, false, d); e != NotExpired {
		t.Fatalf("199 ms after the read resumed: %v", e)
	}
	if e := a.Expired(9200, false, false, d); e != ExpiredRead {
		t.Fatalf("200 ms after the read resumed: %v", e)
	}
	if e := a.Expired(9019, false, true, d); e != NotExpired {
		t.Fatalf("19 ms after the read resumed, under pressure: %v", e)
	}
	if e := a.Expired(9020, false, true, d); e != ExpiredRead || d.PressuredReadMs() != 20 {
		t.Fatalf("20 ms after the read resumed, under pressure (a tenth of the deadline): %v", e)
	}
	a.ReadDone(1100)
	a.WriteStarted(1100)
	if e := a.Expired(1400, true, false, d); e != ExpiredWrite {
		t.Fatalf("writing for 300 ms: %v", e)
	}
	a.WriteDone(1150)
	if e := a.Expired(2149, false, false, d); e != NotExpired {
		t.Fatalf("idle 999 ms after the write: %v", e)
	}
	if !a.Fits(100, 0) || !a.HasRoom() {
		t.Fatal("an empty connection fits anything")
	}
	a.Hold(8)
	if a.Fits(3, 0) || !a.Fits(2, 0) || !a.HasRoom() {
		t.Fatal("8 of 10 held")
	}
	if !a.Fits(100, 8) || a.Fits(3, 7) {
		t.Fatal("8 of 10 held, all by one request: it may grow alone, and only alone")
	}
	a.Hold(2)
	if a.HasRoom() {
		t.Fatal("10 of 10 held, still room")
	}
	a.Free(10)
	defer func() {
		if recover() == nil {
			t.Fatal("freeing more than held did not panic")
		}
	}()
	a.Free(1)
}

// TestResponseBudgetKeepsHalfForClientsThatRead: a connection holding
// answers is admitted below the limit, one holding none below twice it; so
// clients that do not read fill at most the first half, and the bytes held
// never pass twice the limit by more than the answer admitted last.
func TestResponseBudgetKeepsHalfForClientsThatRead(t *testing.T) {
	const limit, answer = 100, 30
	b := NewResponseBudget(limit)
	held := 0
	for b.Admits(true) { // a client that does not read
		b.Hold(answer)
		held += answer
	}
	if held != 120 || !b.Full() || b.Admits(true) || !b.Admits(false) {
		t.Fatalf("after the holder: %d held, full %v, admits holders %v, admits readers %v; want 120, true, false, true",
			held, b.Full(), b.Admits(true), b.Admits(false))
	}
	for b.Admits(false) { // fresh connections, one answer each
		b.Hold(answer)
		held += answer
	}
	if b.Bytes() != int64(held) || held >= 2*limit+answer {
		t.Fatalf("held %d (budget says %d), want under %d", held, b.Bytes(), 2*limit+answer)
	}
	b.Free(int64(held) - 150)
	if b.Admits(true) || !b.Admits(false) {
		t.Fatalf("at 150 of 100: admits holders %v, readers %v; want false, true", b.Admits(true), b.Admits(false))
	}
	b.Free(60)
	if !b.Admits(true) || b.Full() {
		t.Fatalf("at 90 of 100: admits holders %v, full %v; want true, false", b.Admits(true), b.Full())
	}
	mustPanic(t, "freeing more than held", func() { b.Free(91) })
	mustPanic(t, "holding a negative size", func() { b.Hold(-1) })
	mustPanic(t, "an empty budget", func() { NewResponseBudget(0) })
}

// TestPressuredWriteDeadline: while clients wait for room, a write that
// has run a tenth of strand.response.write.timeout.ms is overdue.
func TestPressuredWriteDeadline(t *testing.T) {
	d := Deadlines{WriteMs: 30000}
	if got := d.PressuredWriteMs(); got != 3000 {
		t.Fatalf("PressuredWriteMs = %d, want 3000", got)
	}
	a := NewConnAccount(1<<20, 0)
	if a.WriteOverdue(100000, d.PressuredWriteMs()) {
		t.Fatal("a connection that never wrote is overdue")
	}
	a.WriteStarted(1000)
	if a.WriteOverdue(3999, d.PressuredWriteMs()) || !a.WriteOverdue(4000, d.PressuredWriteMs()) {
		t.Fatalf("a write started at 1000 ms: overdue at 3999 %v, at 4000 %v; want false, true",
			a.WriteOverdue(3999, d.PressuredWriteMs()), a.WriteOverdue(4000, d.PressuredWriteMs()))
	}
	a.WriteDone(4000)
	if a.WriteOverdue(100000, d.PressuredWriteMs()) {
		t.Fatal("a finished write is overdue")
	}
}

// mustPanic fails t unless fn panics: what is being done is a broken
// invariant.
func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	fn()
}
