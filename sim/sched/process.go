package sched

import (
	"fmt"
	"math/rand/v2"
)

// ProcessFaults are one run's process-fault settings: GC-like pauses and
// crashes followed by restarts (simulator issue §2, "Process").
type ProcessFaults struct {
	// TickNs is how often a fault is considered, for one node drawn at
	// random.
	TickNs int64
	// PausePerMille is the chance per tick of a pause of up to PauseNsMax.
	PausePerMille PerMille
	PauseNsMax    int64
	// CrashPerMille is the chance per tick of a crash; the node stays down
	// for [DownNsMin, DownNsMax].
	CrashPerMille        PerMille
	DownNsMin, DownNsMax int64
}

// String prints the settings for the run's header line.
func (f ProcessFaults) String() string {
	return fmt.Sprintf("process{tick_ms=%d pause=%d‰≤%dms crash=%d‰ down_ms=%d..%d}",
		f.TickNs/1e6, f.PausePerMille, f.PauseNsMax/1e6, f.CrashPerMille, f.DownNsMin/1e6, f.DownNsMax/1e6)
}

// DrawProcessFaults draws a run's process faults, swarm style.
func DrawProcessFaults(r *rand.Rand) ProcessFaults {
	f := ProcessFaults{TickNs: 100e6}
	f.PausePerMille = SwarmPerMille(r, 300, 50)
	f.PauseNsMax = Int64Between(r, 1e6, 2e9)
	f.CrashPerMille = SwarmPerMille(r, 300, 30)
	f.DownNsMin = Int64Between(r, 1e6, 500e6)
	f.DownNsMax = f.DownNsMin + Int64Between(r, 0, 5e9)
	return f
}

// ProcessHooks are the harness's part in process faults.
type ProcessHooks struct {
	// MayCrash reports whether node i may crash now; the harness uses it to
	// keep a run within its fault budget. Nil allows every crash.
	MayCrash func(i int) bool
	// Restart brings the crashed node i back: it calls Node.Restart and
	// builds the new incarnation's volatile state. Required.
	Restart func(i int)
}

// ProcessChaos pauses and crashes nodes at random until Heal.
type ProcessChaos struct {
	s     *Scheduler
	r     *rand.Rand
	nodes []*Node
	f     ProcessFaults
	hooks ProcessHooks
	tick  Handle
	// restarts holds each down node's pending restart.
	restarts []Handle
}

// StartProcessChaos starts process faults over nodes, drawing from r.
func StartProcessChaos(s *Scheduler, r *rand.Rand, nodes []*Node, f ProcessFaults, hooks ProcessHooks) *ProcessChaos {
	if hooks.Restart == nil {
		panic("sched: process chaos needs a Restart hook")
	}
	if f.TickNs <= 0 || f.DownNsMin < 0 || f.DownNsMax < f.DownNsMin || f.PauseNsMax < 1 {
		panic(fmt.Sprintf("sched: unusable %v", f))
	}
	pc := &ProcessChaos{s: s, r: r, nodes: nodes, f: f, hooks: hooks, restarts: make([]Handle, len(nodes))}
	if len(nodes) > 0 && (f.PausePerMille > 0 || f.CrashPerMille > 0) {
		pc.tick = s.After(f.TickNs, pc.step)
	}
	return pc
}

// Add puts node under the chaos too, as the cluster's node index it
// returns (hooks get it): a node that joins the run later. It draws
// nothing, so the draws before it are unchanged.
func (pc *ProcessChaos) Add(node *Node) int {
	pc.nodes = append(pc.nodes, node)
	pc.restarts = append(pc.restarts, Handle{})
	if len(pc.nodes) == 1 && (pc.f.PausePerMille > 0 || pc.f.CrashPerMille > 0) {
		pc.tick = pc.s.After(pc.f.TickNs, pc.step)
	}
	return len(pc.nodes) - 1
}

func (pc *ProcessChaos) step() {
	i := pc.r.IntN(len(pc.nodes))
	node := pc.nodes[i]
	if node.Up() && !node.Paused() {
		switch {
		case Chance(pc.r, pc.f.CrashPerMille) && (pc.hooks.MayCrash == nil || pc.hooks.MayCrash(i)):
			node.Crash()
			pc.restarts[i] = pc.s.After(Int64Between(pc.r, pc.f.DownNsMin, pc.f.DownNsMax), func() {
				pc.hooks.Restart(i)
			})
		case Chance(pc.r, pc.f.PausePerMille):
			node.PauseFor(Int64Between(pc.r, 1, pc.f.PauseNsMax))
		}
	}
	pc.tick = pc.s.After(pc.f.TickNs, pc.step)
}

// Heal ends process faults for the liveness phase: no more pauses or
// crashes, paused nodes resume and crashed nodes restart now.
func (pc *ProcessChaos) Heal() {
	pc.tick.Cancel()
	for i, node := range pc.nodes {
		switch {
		case !node.Up():
			pc.restarts[i].Cancel()
			pc.hooks.Restart(i)
		case node.Paused():
			node.Resume()
		}
	}
}
