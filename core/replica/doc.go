// Package replica is the replication logic of one partition (SPEC.md §4,
// Replication) written as a pure state machine in the style of etcd-raft's
// RawNode: inputs go in as method calls carrying the current time, decisions
// come out as return values, and the caller performs every effect.
//
// It covers:
//   - the partition state the controller pushes (ApplyState), with stale
//     epochs rejected;
//   - the leader's view of each follower, built from follower fetches
//     (OnFollowerFetch): log end offset, last caught-up time, divergence
//     detection from the leader epoch cache, the high watermark;
//   - ISR changes as AlterPartition proposals to the controller, one in
//     flight at a time (PendingAlterPartition, OnAlterPartitionResponse);
//   - acks=all waiters, completed when the high watermark passes them
//     (AdmitProduce, OnLeaderAppend, TakeAckResults, ExpireAcks);
//   - the follower's fetch requests and what to do with each answer
//     (NextFetch, OnFetchResponse);
//   - pure controller-side functions, shared by every controller
//     implementation: ISR/ELR bookkeeping and leader election (elr.go,
//     KIP-966) and AlterPartition validation (controller.go).
//
// One role per file: state.go (pushed state, roles), leader.go (serving
// fetches), isr.go (follower progress, ISR proposals), hw.go (the high
// watermark), acks.go (acks=all waiters), follower.go (fetching and
// truncating), elr.go and controller.go (the controller's side).
//
// The caller's loop, per partition: ApplyState on every pushed state, and
// SetIneligibleReplicas whenever the image's fenced or shutting-down brokers
// change (a leader neither adds them to the ISR nor waits for them); on the
// leader, AdmitProduce → append → OnLeaderAppend, OnFollowerFetch and
// OnConsumerFetch for fetches, MaybeShrinkISR and ExpireAcks on timers,
// PendingAlterPartition → controller → OnAlterPartitionResponse, and
// TakeAckResults to answer producers; on a follower, NextFetch → leader →
// OnFetchResponse → perform the action (→ OnFollowerAppend after appends).
//
// What it must not do: any I/O. It reads the local log only through the
// narrow Log interface and never mutates it: appends, truncations and log
// start changes are handed back to the caller as decisions. It does not
// import core/log, read a clock (time arrives as nowMs arguments), start
// goroutines, or let map iteration order reach its output. Planted bugs
// travel in Config.Bugs, never in globals.
//
// Ownership: no method retains a slice passed in; PartitionState and the
// requests it returns are copies the caller may keep.
package replica
