// Package sched is the simulator's discrete-event scheduler: a virtual clock,
// a queue of events ordered by (time, sequence number), the processes
// ("nodes") those events are delivered to, the run's trace and its hash, and
// the seeded PRNG streams every random choice is drawn from.
//
// Everything runs on the caller's goroutine: Run and Step pop one event at a
// time and call it. Ties between events due at the same instant are broken by
// the order they were scheduled in, never by a map or a pointer, so a seed
// replays byte for byte (CLARIFICATIONS.md, "Checker and simulator traps").
//
// A Node models a process. Events scheduled for a node are deferred while it
// is paused (a GC-like stall) and discarded once it has crashed: each crash
// starts a new incarnation, and callbacks of an older incarnation never run.
//
// This package must not start goroutines, read the real clock, or draw
// randomness from anything but its Streams.
package sched
