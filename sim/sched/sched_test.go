package sched

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestOrderByTimeThenScheduleOrder schedules events out of order, many at
// the same instant, and checks they run by time and, within an instant, in
// the order they were scheduled.
func TestOrderByTimeThenScheduleOrder(t *testing.T) {
	s := New(Options{})
	var got []int
	add := func(atNs int64, label int) { s.Schedule(atNs, func() { got = append(got, label) }) }
	add(30, 30)
	add(10, 10)
	add(20, 20)
	add(10, 11)
	add(10, 12)
	add(20, 21)
	s.Run(100)
	want := []int{10, 11, 12, 20, 21, 30}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if s.NowNs() != 100 {
		t.Fatalf("time after Run(100) is %d", s.NowNs())
	}
}

// TestRandomScheduleMatchesSortedModel schedules and cancels random events,
// some from inside callbacks, and checks that what runs is exactly the
// uncancelled events sorted by (time, schedule order).
func TestRandomScheduleMatchesSortedModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		s := New(Options{})
		type planned struct {
			atNs  int64
			order int
		}
		var want []planned
		var got []int
		var handles []Handle
		var handleOrders []int
		order := 0
		var add func(atNs int64)
		add = func(atNs int64) {
			myOrder := order
			order++
			respawn := r.IntN(4) == 0
			h := s.Schedule(atNs, func() {
				got = append(got, myOrder)
				if respawn && order < 2000 {
					add(s.NowNs() + r.Int64N(50))
				}
			})
			want = append(want, planned{atNs: max(atNs, s.NowNs()), order: myOrder})
			handles = append(handles, h)
			handleOrders = append(handleOrders, myOrder)
		}
		for i := 0; i < 300; i++ {
			add(r.Int64N(100))
		}
		cancelled := map[int]bool{}
		for i := 0; i < 60; i++ {
			k := r.IntN(len(handles))
			if handles[k].Cancel() {
				cancelled[handleOrders[k]] = true
			} else if !cancelled[handleOrders[k]] {
				t.Fatalf("seed %d: Cancel of pending event %d returned false", seed, handleOrders[k])
			}
		}
		s.Run(1 << 40)
		var wantOrders []int
		live := want[:0:0]
		for _, p := range want {
			if !cancelled[p.order] {
				live = append(live, p)
			}
		}
		slices.SortStableFunc(live, func(a, b planned) int {
			if a.atNs != b.atNs {
				return int(a.atNs - b.atNs)
			}
			return a.order - b.order
		})
		for _, p := range live {
			wantOrders = append(wantOrders, p.order)
		}
		if !slices.Equal(got, wantOrders) {
			t.Fatalf("seed %d: ran %d events in an order that differs from the model (first 10: %v vs %v)",
				seed, len(got), got[:min(10, len(got))], wantOrders[:min(10, len(wantOrders))])
		}
		if s.Pending() != 0 {
			t.Fatalf("seed %d: %d events still pending", seed, s.Pending())
		}
	}
}

func TestCancel(t *testing.T) {
	s := New(Options{})
	ran := false
	h := s.After(10, func() { ran = true })
	if !h.Pending() {
		t.Fatal("fresh handle not pending")
	}
	if !h.Cancel() {
		t.Fatal("Cancel of a pending event returned false")
	}
	if h.Cancel() {
		t.Fatal("second Cancel returned true")
	}
	// The freed slot is reused; the old handle must not reach the new event.
	ran2 := false
	h2 := s.After(10, func() { ran2 = true })
	if h.Cancel() {
		t.Fatal("stale handle cancelled a recycled slot's event")
	}
	s.RunFor(20)
	if ran || !ran2 {
		t.Fatalf("ran=%v ran2=%v, want false true", ran, ran2)
	}
	if h2.Cancel() {
		t.Fatal("Cancel after the event ran returned true")
	}
	var zero Handle
	if zero.Cancel() || zero.Pending() {
		t.Fatal("zero handle claims an event")
	}
}

func TestPendingLimitPanics(t *testing.T) {
	s := New(Options{EventsPendingMax: 3})
	for i := 0; i < 3; i++ {
		s.After(1, func() {})
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a fourth pending event did not panic")
		}
	}()
	s.After(1, func() {})
}

// TestPausedNodeDefersEvents pauses a node: its events wait until the
// resume and then run in their original order, while global events and
// other nodes carry on; an event cancelled while deferred never runs.
func TestPausedNodeDefersEvents(t *testing.T) {
	s := New(Options{})
	a, b := s.NewNode(1), s.NewNode(2)
	var log []string
	note := func(what string) func() {
		return func() { log = append(log, what+"@"+itoa(s.NowNs())) }
	}
	a.After(10, note("a1"))
	a.After(20, note("a2"))
	cancelled := a.After(25, note("a-cancelled"))
	a.After(30, note("a3"))
	b.After(15, note("b1"))
	s.After(40, note("global"))
	a.After(200, note("a-late"))
	s.Schedule(5, func() { a.PauseFor(95) }) // resumes at 100
	s.Schedule(50, func() {
		if !cancelled.Cancel() {
			t.Error("Cancel of a deferred event returned false")
		}
	})
	s.Run(300)
	want := []string{"b1@15", "global@40", "a1@100", "a2@100", "a3@100", "a-late@200"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %v, want %v", log, want)
	}
	if s.Pending() != 0 {
		t.Fatalf("%d events pending after the run", s.Pending())
	}
}

// TestCrashedNodeStaleEventsNeverRun crashes a node with timers pending,
// some of them deferred by a pause, and checks none of them ever runs, that
// nothing can be scheduled while it is down, and that the new incarnation's
// events run normally.
func TestCrashedNodeStaleEventsNeverRun(t *testing.T) {
	s := New(Options{})
	n := s.NewNode(7)
	hooks := 0
	n.OnCrash(func() { hooks++ })
	var ran []string
	n.After(10, func() { ran = append(ran, "before-crash-early") })
	n.After(50, func() { ran = append(ran, "stale-1") })
	n.After(500, func() { ran = append(ran, "stale-2") })
	s.Schedule(20, func() { n.Pause() })
	n.After(30, func() { ran = append(ran, "stale-deferred") })
	s.Schedule(60, func() { n.Crash() })
	s.Schedule(70, func() {
		if h := n.After(1, func() { ran = append(ran, "while-down") }); h.Pending() {
			t.Error("scheduling on a crashed node returned a pending handle")
		}
	})
	s.Schedule(100, func() {
		n.Restart()
		n.After(10, func() { ran = append(ran, "new-incarnation") })
	})
	s.Run(1000)
	want := []string{"before-crash-early", "new-incarnation"}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if hooks != 1 || n.Incarnation() != 1 || !n.Up() || n.Paused() {
		t.Fatalf("hooks=%d incarnation=%d up=%v paused=%v", hooks, n.Incarnation(), n.Up(), n.Paused())
	}
	// stale-1, stale-2, stale-deferred and while-down.
	if s.EventsDropped() != 4 {
		t.Fatalf("dropped %d events, want 4", s.EventsDropped())
	}
}

func TestTraceHash(t *testing.T) {
	run := func(w io.Writer, lastA int64) *Scheduler {
		s := New(Options{TraceWriter: w})
		s.After(5, func() { s.Trace(Record{Kind: "x", Node: 1, A: 2, Text: "hello"}) })
		s.After(7, func() { s.Trace(Record{Kind: "y", Node: -1, A: lastA}) })
		s.RunFor(10)
		return s
	}
	var w1, w2 bytes.Buffer
	h1, h2, h3 := run(&w1, 3).TraceHash(), run(&w2, 3).TraceHash(), run(nil, 4).TraceHash()
	if h1 != h2 {
		t.Fatalf("same trace hashed to %x and %x", h1, h2)
	}
	if h1 == h3 {
		t.Fatal("different traces hashed alike")
	}
	if run(nil, 3).TraceHash() != h1 {
		t.Fatal("the hash depends on whether a TraceWriter is set")
	}
	if w1.String() != w2.String() || !strings.Contains(w1.String(), "0.000000005 x node=1 a=2 b=0 c=0 hello\n") {
		t.Fatalf("verbose trace:\n%s", w1.String())
	}
	if New(Options{}).TraceHash() == h1 {
		t.Fatal("empty trace hashes like a full one")
	}
}

func TestStreamsIndependent(t *testing.T) {
	draw := func(r *rand.Rand) []uint64 {
		out := make([]uint64, 8)
		for i := range out {
			out[i] = r.Uint64()
		}
		return out
	}
	a := NewStreams(42)
	netFirst := draw(a.Get("net"))
	b := NewStreams(42)
	draw(b.Get("disk")) // another subsystem draws first and more
	draw(b.Get("disk"))
	if got := draw(b.Get("net")); !slices.Equal(got, netFirst) {
		t.Fatal("drawing from disk changed the net stream")
	}
	if slices.Equal(draw(NewStreams(43).Get("net")), netFirst) {
		t.Fatal("seeds 42 and 43 give the same net stream")
	}
	if slices.Equal(draw(NewStreams(42).Get("clock")), netFirst) {
		t.Fatal("net and clock streams are equal")
	}
	if a.Getf("clock/%d", 1) != a.Get("clock/1") {
		t.Fatal("Getf and Get disagree")
	}
}

func TestSwarmPerMille(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	off, on := 0, 0
	for i := 0; i < 2000; i++ {
		p := SwarmPerMille(r, 300, 50)
		if p < 0 || p > 50 {
			t.Fatalf("drew %d outside [0, 50]", p)
		}
		if p == 0 {
			off++
		} else {
			on++
		}
	}
	// About 30% off; allow a wide margin.
	if off < 450 || off > 750 {
		t.Fatalf("fault class off in %d of 2000 runs, want about 600", off)
	}
	if Chance(r, 0) || !Chance(r, PerMilleMax) {
		t.Fatal("Chance ignores its bounds")
	}
}

func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

// BenchmarkScheduler measures the bare scheduler: each event schedules the
// next at a pseudo-random delay, with 1,000 events in the queue, as a busy
// simulation keeps them. It reports events per second.
func BenchmarkScheduler(b *testing.B) {
	s := New(Options{})
	x := uint64(88172645463325252)
	next := func() int64 { // xorshift: cheaper than the PRNG, enough to spread times
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int64(x % 1_000_000)
	}
	var fn func()
	fn = func() { s.After(next(), fn) }
	for i := 0; i < 1000; i++ {
		s.After(next(), fn)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkNodeTimers is BenchmarkScheduler through a Node with a timer set
// and cancelled per event, as a core sets and stops request timeouts.
func BenchmarkNodeTimers(b *testing.B) {
	s := New(Options{})
	n := s.NewNode(1)
	var fn func()
	fn = func() {
		n.After(1_000_000, fn).Cancel()
		n.After(1000, fn)
	}
	for i := 0; i < 100; i++ {
		n.After(int64(i), fn)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestPauseForDoesNotEndALaterPause: a PauseFor whose node was resumed early
// and paused again must not resume the second pause.
func TestPauseForDoesNotEndALaterPause(t *testing.T) {
	s := New(Options{})
	n := s.NewNode(1)
	n.PauseFor(100)
	s.RunFor(10)
	n.Resume()
	n.Pause()
	s.RunFor(200)
	if !n.Paused() {
		t.Fatal("the first PauseFor's timer ended the second pause")
	}
}

// TestProcessChaos runs crash and pause faults over three nodes: crashes
// respect MayCrash, every crashed node is restarted by the hook, and Heal
// leaves every node up and running with no fault pending.
func TestProcessChaos(t *testing.T) {
	s := New(Options{})
	nodes := []*Node{s.NewNode(0), s.NewNode(1), s.NewNode(2)}
	crashes, pauses := 0, 0
	for _, n := range nodes {
		n.OnCrash(func() { crashes++ })
	}
	restarts := 0
	f := ProcessFaults{TickNs: 1e6, PausePerMille: 200, PauseNsMax: 50e6, CrashPerMille: 200, DownNsMin: 1e6, DownNsMax: 100e6}
	pc := StartProcessChaos(s, rand.New(rand.NewPCG(3, 3)), nodes, f, ProcessHooks{
		MayCrash: func(i int) bool { return i != 2 },
		Restart: func(i int) {
			restarts++
			nodes[i].Restart()
		},
	})
	for s.NowNs() < 1e9 {
		s.RunFor(1e6)
		for _, n := range nodes {
			if n.Paused() {
				pauses++
			}
		}
	}
	if crashes == 0 || pauses == 0 {
		t.Fatalf("1000 ticks at 200‰ gave %d crashes, %d paused samples", crashes, pauses)
	}
	if nodes[2].Incarnation() != 0 {
		t.Fatal("node 2 crashed although MayCrash forbade it")
	}
	pc.Heal()
	for i, n := range nodes {
		if !n.Up() || n.Paused() {
			t.Fatalf("after Heal node %d up=%v paused=%v", i, n.Up(), n.Paused())
		}
	}
	if restarts != crashes {
		t.Fatalf("%d crashes but %d restarts", crashes, restarts)
	}
	before := crashes
	s.RunFor(1e9)
	if crashes != before {
		t.Fatal("crashes after Heal")
	}
	if s.Pending() != 0 {
		t.Fatalf("%d events pending after Heal", s.Pending())
	}
}

// TestProcessChaosReachesAnAddedNode: a node added to a running chaos is
// paused and crashed, and restarted through the hooks with its index.
func TestProcessChaosReachesAnAddedNode(t *testing.T) {
	s := New(Options{})
	nodes := []*Node{s.NewNode(0)}
	f := ProcessFaults{TickNs: 1e6, PausePerMille: 200, PauseNsMax: 50e6, CrashPerMille: 200, DownNsMin: 1e6, DownNsMax: 100e6}
	restarted := map[int]int{}
	pc := StartProcessChaos(s, rand.New(rand.NewPCG(4, 4)), nodes, f, ProcessHooks{
		MayCrash: func(i int) bool { return i != 0 },
		Restart: func(i int) {
			restarted[i]++
			nodes[i].Restart()
		},
	})
	s.RunFor(100e6)
	added := s.NewNode(1)
	nodes = append(nodes, added)
	if i := pc.Add(added); i != 1 {
		t.Fatalf("Add returned %d, want 1", i)
	}
	s.RunFor(1e9)
	if added.Incarnation() == 0 || restarted[1] == 0 {
		t.Fatalf("the added node: incarnation %d, %d restarts; want crashes and restarts", added.Incarnation(), restarted[1])
	}
	if nodes[0].Incarnation() != 0 {
		t.Fatal("node 0 crashed although MayCrash forbade it")
	}
	pc.Heal()
	if !added.Up() {
		t.Fatal("the added node is down after Heal")
	}
}

// TestHalt stops a run from inside an event: nothing after it runs, time
// stays at the halt, and later Run calls do nothing.
func TestHalt(t *testing.T) {
	s := New(Options{})
	var ran []int64
	for _, at := range []int64{10, 20, 30} {
		s.Schedule(at, func() {
			ran = append(ran, s.NowNs())
			if s.NowNs() == 20 {
				s.Halt("violation at 20")
				s.Halt("second reason")
			}
		})
	}
	s.Run(100)
	s.Run(200)
	if !slices.Equal(ran, []int64{10, 20}) || s.NowNs() != 20 || s.Halted() != "violation at 20" || s.Step() {
		t.Fatalf("ran %v, now %d, halted %q", ran, s.NowNs(), s.Halted())
	}
}
