// Package env defines the three doors through which the deterministic core
// reaches the outside world: a Clock, a Network and a Disk; and a fourth,
// out only, for its operator log lines: a Logger, which nothing flows back
// through (SPEC.md §2.4).
//
// Everything under core/ sees time, messages and storage only through these
// interfaces. Two environments implement them: sim/ (a seeded, single-threaded
// discrete-event simulator) and realnet/ + diskio/ (real TCP, real files).
//
// # The event-loop contract
//
// A core node is driven by exactly one goroutine at a time, its event loop.
// Every callback the environment hands back to the core (a timer firing, a
// Sync completing, a message arriving) runs on that event loop, never
// concurrently with another call into the same node. The simulator satisfies
// this trivially; the real build funnels completions through one channel per
// node. This is what lets core/ use no locks, no goroutines and no select.
//
// This package must not import anything that reaches the outside world.
package env
