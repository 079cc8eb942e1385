// Package models holds the simulator's checkers: pure functions that take a
// run's history (every client operation with its call and return times) and
// the cluster's final state, and report violations of Strand's replication
// guarantees (simulator issue §4, CLARIFICATIONS.md "Checker and simulator
// traps").
//
//   - CheckRegisters: linearizability per (topic, partition, offset). Each
//     offset is a write-once register: an acknowledged acks=all produce
//     writes its records at the offsets it was told, a fetch reads the
//     records at the offsets it returned. Each register is decided exactly
//     in one pass; Porcupine confirms and draws every rejected partition,
//     and checks every partition when asked (a seeded fraction of runs).
//   - CheckHighWatermarkOrder (hw.go): the HW clients saw (every Fetch and
//     ListOffsets answer, every acks=all acknowledgement) is linearizable
//     per (partition, leader epoch) under the order Kafka guarantees
//     (SPEC.md §4.2): decided exactly in one pass, Porcupine confirming and
//     drawing every rejected history.
//   - CheckFetchContiguity, CheckHighWatermarks, CheckLeaders: direct
//     invariants on the history and on sampled node state: fetched offsets
//     contiguous, one follower's HW monotonic per (client, follower, leader
//     epoch) across no restart of the follower, one leader per epoch.
//   - CheckFinal: after healing, every partition has a leader, replicas are
//     identical byte for byte from the leader's log start, and every
//     acks=all-acknowledged record, and every record a fetch read below its
//     HW, sits at its offset, or below the log start was held there by a
//     replica up to its deletion (HeldRecords); no fetch or ListOffsets saw
//     an HW above the final one; the log start is one DeleteRecords asked
//     for, and not below one that completed. CheckDeleteRecords: a
//     completed DeleteRecords answered a low watermark at or above its
//     offset.
//
// Violations that are losses (Violation.Loss) are what the fault budget
// excuses on a partition over it; the harness decides which partitions
// those are.
//   - CheckAssignments, CheckCommitGenerations, CheckOffsets (groups.go):
//     consumer groups; CheckIdempotence: idempotent producers' records once
//     each and in sequence order; CheckTopicChurn: deleted and re-created
//     topics.
//   - CheckMetadataRegisters (metadata.go): Porcupine registers for the
//     controller's answers: per topic name whether it exists, per
//     partition the partition epoch moved by accepted AlterPartitions.
//
// The package knows nothing of the simulator's internals: the harness
// translates what it saw into these types. It must not import sim/ or core/
// packages, start goroutines of its own beyond Porcupine's, or depend on map
// iteration order in what it reports.
package models
