package simclock

import (
	"math/rand/v2"
	"slices"
	"testing"

	"strand/sim/sched"
)

func TestMonotonicAndWall(t *testing.T) {
	s := sched.New(sched.Options{})
	n := s.NewNode(1)
	c := New(s, n, Options{MonotonicOffsetNs: 5e9, SkewMs: -1500, DriftPpm: 100})
	if c.MonotonicNs() != 5e9 {
		t.Fatalf("monotonic at zero is %d", c.MonotonicNs())
	}
	if got, want := c.WallMs(), int64(WallEpochMsDefault-1500); got != want {
		t.Fatalf("wall at zero is %d, want %d", got, want)
	}
	s.RunFor(10e9) // 10 s: drift 100 ppm adds 1 ms
	if c.MonotonicNs() != 15e9 {
		t.Fatalf("monotonic after 10 s is %d", c.MonotonicNs())
	}
	if got, want := c.WallMs(), int64(WallEpochMsDefault-1500+10_000+1); got != want {
		t.Fatalf("wall after 10 s is %d, want %d", got, want)
	}
	before := c.MonotonicNs()
	c.Jump(-60_000)
	if got, want := c.WallMs(), int64(WallEpochMsDefault-1500+10_000+1-60_000); got != want {
		t.Fatalf("wall after a -60 s jump is %d, want %d", got, want)
	}
	if c.MonotonicNs() != before {
		t.Fatal("a wall-clock jump moved monotonic time")
	}
}

// TestTimersFollowNodeLifecycle: a timer fires after its delay, Stop
// cancels, a paused node's timer fires late at resume, and a crashed node's
// timer never fires.
func TestTimersFollowNodeLifecycle(t *testing.T) {
	s := sched.New(sched.Options{})
	n := s.NewNode(1)
	c := New(s, n, Options{})
	var firedAt []int64
	fire := func() { firedAt = append(firedAt, s.NowNs()) }
	c.SetTimer(100, fire)
	stopped := c.SetTimer(150, fire)
	c.SetTimer(-5, fire) // negative counts as zero
	c.SetTimer(300, fire)
	s.Schedule(120, func() {
		if !stopped.Stop() {
			t.Error("Stop of a pending timer returned false")
		}
	})
	s.Schedule(200, func() { n.PauseFor(400) }) // the 300 timer fires at 600
	s.Run(1000)
	if want := []int64{0, 100, 600}; !slices.Equal(firedAt, want) {
		t.Fatalf("timers fired at %v, want %v", firedAt, want)
	}
	if stopped.Stop() {
		t.Fatal("second Stop returned true")
	}

	firedAt = nil
	c.SetTimer(100, fire)
	s.RunFor(50)
	n.Crash()
	s.RunFor(50)
	n.Restart()
	s.RunFor(1000)
	if len(firedAt) != 0 {
		t.Fatalf("a timer from before the crash fired at %v", firedAt)
	}
}

func TestChaosJumpsUntilHealed(t *testing.T) {
	s := sched.New(sched.Options{})
	r := rand.New(rand.NewPCG(1, 1))
	var clocks []*Clock
	for i := int32(0); i < 3; i++ {
		clocks = append(clocks, New(s, s.NewNode(i), Options{}))
	}
	f := Faults{SkewMsMax: 1000, JumpPerMille: 1000, JumpMsMax: 5000, JumpCheckNs: 1e6}
	chaos := StartChaos(s, r, clocks, f)
	skews := func() [3]int64 { return [3]int64{clocks[0].SkewMs(), clocks[1].SkewMs(), clocks[2].SkewMs()} }
	start := skews()
	s.RunFor(100e6)
	moved := skews()
	if moved == start {
		t.Fatal("100 jump checks at 1000‰ moved no clock")
	}
	chaos.Heal()
	s.RunFor(100e6)
	if skews() != moved {
		t.Fatal("clocks jumped after Heal")
	}
	if s.Pending() != 0 {
		t.Fatalf("%d events pending after Heal", s.Pending())
	}
}

func TestDrawFaultsVaries(t *testing.T) {
	jumpsOff, skewOff := 0, 0
	for seed := uint64(0); seed < 200; seed++ {
		f := DrawFaults(sched.NewStreams(seed).Get("clock"))
		if f.JumpPerMille == 0 {
			jumpsOff++
		}
		if f.SkewMsMax == 0 {
			skewOff++
		}
		if f.DriftPpmMax > driftPpmMax || f.SkewMsMax < 0 {
			t.Fatalf("seed %d drew %v", seed, f)
		}
	}
	if jumpsOff == 0 || jumpsOff == 200 || skewOff == 0 || skewOff == 200 {
		t.Fatalf("swarm draws never vary: jumps off in %d, skew off in %d of 200", jumpsOff, skewOff)
	}
}
