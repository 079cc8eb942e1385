package simnet_test

import (
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
)

// silentNode stands in for a core node in this example.
type silentNode struct{}

func (silentNode) HandleRequest(env.ConnID, env.RequestHeader, kmsg.Request) {}
func (silentNode) HandleClosed(env.ConnID)                                   {}

// Example shows how a harness wires one seeded run: a scheduler, one PRNG
// stream per subsystem, swarm-drawn faults, nodes with their clock and
// network, a fault phase, then the heal that starts the liveness phase.
func Example() {
	const seed = 42
	verbose := false
	var opts sched.Options
	if verbose {
		opts.TraceWriter = os.Stdout
	}
	s := sched.New(opts)
	streams := sched.NewStreams(seed)

	netFaults := simnet.DrawFaults(streams.Get("net-faults"))
	clockFaults := simclock.DrawFaults(streams.Get("clock-faults"))
	processFaults := sched.DrawProcessFaults(streams.Get("process-faults"))
	network := simnet.New(s, streams.Get("net"), netFaults)

	var procs []*sched.Node
	var clocks []*simclock.Clock
	var nets []*simnet.NodeNet
	for id := 0; id < 3; id++ {
		proc := s.NewNode(int32(id))
		procs = append(procs, proc)
		clocks = append(clocks, simclock.New(s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12}))
		nets = append(nets, network.AddNode(env.NodeID(id), proc))
		// The core would be built here from clocks[id], nets[id] and a
		// memdisk.Disk whose Options.Post is proc.Post, and registered:
		nets[id].SetHandler(silentNode{})
		// proc.OnCrash(func() { disk.Crash(streams.Getf("disk/%d", id), mode) })
	}

	clockChaos := simclock.StartChaos(s, streams.Get("clock"), clocks, clockFaults)
	network.StartChaos(nil)
	processChaos := sched.StartProcessChaos(s, streams.Get("process"), procs, processFaults, sched.ProcessHooks{
		Restart: func(i int) {
			procs[i].Restart()
			nets[i].SetHandler(silentNode{}) // a fresh core, recovered from its disk
		},
	})

	s.Run(20e9) // the fault phase
	processChaos.Heal()
	network.Heal()
	clockChaos.Heal()
	s.Run(30e9) // the liveness phase: the cluster must converge by now

	// A real run prints s.Summary(), whose trace_hash two runs of the seed
	// must share. Here: after the heal every node is up and running.
	for _, proc := range procs {
		fmt.Print(proc.Up() && !proc.Paused(), " ")
	}
	fmt.Println()
	// Output: true true true
}
