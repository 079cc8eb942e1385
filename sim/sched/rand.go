package sched

import (
	"fmt"
	"math/rand/v2"
)

// Streams derives independent PRNG streams from one seed, one per named
// subsystem ("net", "clock", "disk/1", "workload"). A stream depends only on
// the seed and its name, so adding a draw in one subsystem does not reshuffle
// the faults of any other (CLARIFICATIONS.md, "Give each subsystem its own
// PRNG stream"). Callers draw integers only: float arithmetic is where
// platform differences creep in.
type Streams struct {
	seed uint64
	// byName caches streams; it is only looked up, never iterated.
	byName map[string]*rand.Rand
}

// NewStreams returns the streams of seed.
func NewStreams(seed uint64) *Streams {
	return &Streams{seed: seed, byName: make(map[string]*rand.Rand)}
}

// Seed returns the seed the streams derive from.
func (s *Streams) Seed() uint64 { return s.seed }

// Get returns the stream called name, creating it on first use. Every call
// with the same name returns the same stream, which continues where the last
// draw left off.
func (s *Streams) Get(name string) *rand.Rand {
	if r, ok := s.byName[name]; ok {
		return r
	}
	r := rand.New(rand.NewPCG(splitMix64(s.seed^fnv64(name)), splitMix64(fnv64(name)+s.seed)))
	s.byName[name] = r
	return r
}

// Getf is Get with a formatted name, for per-node streams ("clock/%d").
func (s *Streams) Getf(format string, args ...any) *rand.Rand {
	return s.Get(fmt.Sprintf(format, args...))
}

// fnv64 is FNV-1a of name.
func fnv64(name string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime64
	}
	return h
}

// splitMix64 scrambles x so that nearby seeds give unrelated PCG states.
func splitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// PerMille is a probability in thousandths: 0 never, 1000 always.
type PerMille int

// PerMilleMax is certainty.
const PerMilleMax PerMille = 1000

// Chance draws true with probability p.
func Chance(r *rand.Rand, p PerMille) bool {
	if p <= 0 {
		return false
	}
	return PerMille(r.IntN(int(PerMilleMax))) < p
}

// SwarmPerMille draws one fault probability for a run, swarm-testing style
// (as TigerBeetle's VOPR does): with probability off the fault class is
// switched off for the whole run, otherwise its probability is uniform in
// [1, most]. Runs then differ in which faults they stress, not only in where
// the faults land.
func SwarmPerMille(r *rand.Rand, off, most PerMille) PerMille {
	if most < 1 || most > PerMilleMax {
		panic(fmt.Sprintf("sched: swarm probability bound %d outside [1, %d]", most, PerMilleMax))
	}
	if Chance(r, off) {
		return 0
	}
	return 1 + PerMille(r.IntN(int(most)))
}

// Int64Between draws uniformly from [lo, hi].
func Int64Between(r *rand.Rand, lo, hi int64) int64 {
	if hi < lo {
		panic(fmt.Sprintf("sched: empty range [%d, %d]", lo, hi))
	}
	return lo + r.Int64N(hi-lo+1)
}
