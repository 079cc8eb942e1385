package simnet

import (
	"fmt"
	"math/rand/v2"

	"strand/sim/sched"
)

// Faults are one run's network settings, drawn from the seed by DrawFaults
// or written out by a scripted test. Zero values switch a fault off.
type Faults struct {
	// LatencyNsMin is the one-way latency every frame takes at least.
	LatencyNsMin int64
	// LatencyJitterNs adds a uniform [0, LatencyJitterNs] to each frame.
	LatencyJitterNs int64
	// TailPerMille frames take an extra uniform [0, TailNsMax]: the long
	// tail of a real network.
	TailPerMille sched.PerMille
	TailNsMax    int64

	// BreakOneIn breaks the connection under one frame in BreakOneIn, on
	// average (0: never). TCP does not lose frames silently; what a lossy
	// network shows it is a reset connection.
	BreakOneIn int
	// NotifyNsMax bounds how long an end takes to learn its connection
	// broke (RST, keepalive).
	NotifyNsMax int64

	// RetransmitNs is how often a frame blocked by a partition is retried.
	RetransmitNs int64
	// ConnTimeoutNs is how long a frame may stay blocked before its
	// connection breaks.
	ConnTimeoutNs int64
	// BlackholePerMille is the chance that a connection whose frame is
	// first blocked becomes a black hole in that direction instead.
	BlackholePerMille sched.PerMille

	// ChaosTickNs is how often Chaos considers starting or ending a
	// partition or a clog.
	ChaosTickNs int64
	// PartitionPerMille is the chance per tick that a partition starts
	// when there is none.
	PartitionPerMille sched.PerMille
	// PartitionNsMin and PartitionNsMax bound how long one lasts.
	PartitionNsMin, PartitionNsMax int64
	// AsymmetricPerMille is the chance a partition blocks one direction
	// only.
	AsymmetricPerMille sched.PerMille
	// IsolatePerMille is the chance a partition isolates a single node
	// rather than splitting the nodes in two.
	IsolatePerMille sched.PerMille
	// ClogPerMille is the chance per tick that a link is clogged.
	ClogPerMille sched.PerMille
	// ClogNsMax bounds how long a clog lasts; ClogDelayNsMax the extra
	// latency it adds to each frame.
	ClogNsMax, ClogDelayNsMax int64
	// BridgePerMille is the chance that a partition splitting the nodes
	// in two leaves one node of the larger side linked to both (a bridge:
	// the network is no longer transitive).
	BridgePerMille sched.PerMille
	// PartitionsMax is how many partitions may cut the network at once
	// (0 or 1: one at a time). While one is in force, another starts at
	// PartitionPerMille per tick, drawn and timed on its own.
	PartitionsMax int
}

// String prints the settings for the run's header line.
func (f Faults) String() string {
	return fmt.Sprintf("net{latency_us=%d+%d tail=%d‰≤%dms break=1/%d notify_ms≤%d "+
		"retransmit_ms=%d conn_timeout_ms=%d blackhole=%d‰ partition=%d‰/%dms %d..%dms asym=%d‰ isolate=%d‰ "+
		"clog=%d‰ ≤%dms +≤%dms bridge=%d‰ partitions_max=%d}",
		f.LatencyNsMin/1e3, f.LatencyJitterNs/1e3, f.TailPerMille, f.TailNsMax/1e6, f.BreakOneIn, f.NotifyNsMax/1e6,
		f.RetransmitNs/1e6, f.ConnTimeoutNs/1e6, f.BlackholePerMille,
		f.PartitionPerMille, f.ChaosTickNs/1e6, f.PartitionNsMin/1e6, f.PartitionNsMax/1e6,
		f.AsymmetricPerMille, f.IsolatePerMille, f.ClogPerMille, f.ClogNsMax/1e6, f.ClogDelayNsMax/1e6,
		f.BridgePerMille, f.PartitionsMax)
}

// check panics on settings no run can use: they come from code, not input.
func (f Faults) check() {
	for _, field := range []struct {
		name  string
		value int64
	}{
		{"LatencyNsMin", f.LatencyNsMin}, {"LatencyJitterNs", f.LatencyJitterNs}, {"TailNsMax", f.TailNsMax},
		{"NotifyNsMax", f.NotifyNsMax}, {"PartitionNsMin", f.PartitionNsMin}, {"ClogNsMax", f.ClogNsMax},
		{"ClogDelayNsMax", f.ClogDelayNsMax}, {"BreakOneIn", int64(f.BreakOneIn)},
		{"PartitionsMax", int64(f.PartitionsMax)},
	} {
		if field.value < 0 {
			panic(fmt.Sprintf("simnet: Faults.%s is %d, negative", field.name, field.value))
		}
	}
	if f.RetransmitNs <= 0 || f.ConnTimeoutNs <= 0 {
		panic(fmt.Sprintf("simnet: RetransmitNs %d and ConnTimeoutNs %d must be positive", f.RetransmitNs, f.ConnTimeoutNs))
	}
	if f.PartitionNsMax < f.PartitionNsMin {
		panic(fmt.Sprintf("simnet: PartitionNsMax %d below PartitionNsMin %d", f.PartitionNsMax, f.PartitionNsMin))
	}
	if (f.PartitionPerMille > 0 || f.ClogPerMille > 0) && f.ChaosTickNs <= 0 {
		panic(fmt.Sprintf("simnet: partitions and clogs need a positive ChaosTickNs, got %d", f.ChaosTickNs))
	}
}

// Calm is a network without faults: 50-150 µs of latency, as on one
// switch. Retransmission and timeout settings are there for when a test
// partitions the network by hand.
func Calm() Faults {
	return Faults{
		LatencyNsMin:    50_000,
		LatencyJitterNs: 100_000,
		NotifyNsMax:     1_000_000,
		RetransmitNs:    200_000_000,
		ConnTimeoutNs:   10_000_000_000,
	}
}

// DrawFaults draws a run's network faults from r, swarm style: every class
// is switched off in some runs, and its rate drawn in the others, so that
// seeds differ in which faults they stress.
func DrawFaults(r *rand.Rand) Faults {
	f := Calm()
	f.LatencyNsMin = sched.Int64Between(r, 10_000, 500_000)
	f.LatencyJitterNs = sched.Int64Between(r, 0, 2_000_000)
	f.TailPerMille = sched.SwarmPerMille(r, 300, 50)
	f.TailNsMax = sched.Int64Between(r, 1_000_000, 500_000_000)
	if !sched.Chance(r, 400) {
		f.BreakOneIn = int(sched.Int64Between(r, 200, 100_000))
	}
	f.NotifyNsMax = sched.Int64Between(r, 0, 100_000_000)
	f.RetransmitNs = sched.Int64Between(r, 50_000_000, 400_000_000)
	f.ConnTimeoutNs = sched.Int64Between(r, 500_000_000, 10_000_000_000)
	f.BlackholePerMille = sched.SwarmPerMille(r, 500, 100)
	f.ChaosTickNs = 100_000_000
	f.PartitionPerMille = sched.SwarmPerMille(r, 300, 100)
	f.PartitionNsMin = sched.Int64Between(r, 10_000_000, 1_000_000_000)
	f.PartitionNsMax = f.PartitionNsMin + sched.Int64Between(r, 0, 5_000_000_000)
	f.AsymmetricPerMille = sched.SwarmPerMille(r, 300, 1000)
	f.IsolatePerMille = sched.SwarmPerMille(r, 300, 1000)
	f.ClogPerMille = sched.SwarmPerMille(r, 300, 100)
	f.ClogNsMax = sched.Int64Between(r, 10_000_000, 3_000_000_000)
	f.ClogDelayNsMax = sched.Int64Between(r, 1_000_000, 1_000_000_000)
	f.check()
	return f
}

// partitionsMaxDrawn bounds PartitionsMax as DrawPartitionKinds draws it.
const partitionsMaxDrawn = 3

// DrawPartitionKinds draws, swarm style, the partition kinds beyond one
// split at a time: bridges and concurrent partitions. It takes a stream of
// its own, so that drawing them reshuffles none of DrawFaults' draws, and
// changes nothing when partitions are off.
func DrawPartitionKinds(r *rand.Rand, f *Faults) {
	f.BridgePerMille = sched.SwarmPerMille(r, 500, 1000)
	f.PartitionsMax = 1
	if !sched.Chance(r, 500) {
		f.PartitionsMax = int(sched.Int64Between(r, 2, partitionsMaxDrawn))
	}
	if f.PartitionPerMille == 0 {
		f.BridgePerMille, f.PartitionsMax = 0, 1
	}
	f.check()
}
