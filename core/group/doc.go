// Package group is the group coordinator for the groups of one
// __consumer_offsets partition: Kafka's classic consumer-group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete), with DescribeGroups,
// ListGroups and DeleteGroups, as a deterministic state machine.
//
// A broker hosts one Coordinator per __consumer_offsets partition it leads.
// PartitionFor says which partition, and so which coordinator, holds a
// group; it is Kafka's exact hash, so the placement matches Kafka's.
//
// # Inputs and outputs
//
// Requests come in through Handle, already decoded, with a reply callback
// that is called exactly once, possibly later: a JoinGroup waits for the
// join phase to end, a SyncGroup for the leader's assignment to be
// persisted, an OffsetCommit for its records. Time comes from env.Clock
// timers: each member's session timeout, the rebalance timeout, the
// initial rebalance delay, KIP-394's pending member ids.
//
// Everything that must survive a failover is a record in Kafka's own
// __consumer_offsets schemas (records.go), built into a batch with
// core/batch.Build and handed to the Store. Persist before answer: a
// commit or an assignment is acknowledged only after the Store reports the
// batch committed as acks=all would, and OffsetFetch shows only committed
// offsets, which makes OffsetFetch linearizable per partition.
//
// # Failover
//
// BeginLoad, Load (the partition's records, in log order) and FinishLoad
// rebuild the groups and offsets when this node becomes the partition's
// leader; meanwhile every request gets COORDINATOR_LOAD_IN_PROGRESS.
// Unload answers everything still parked with NOT_COORDINATOR and drops the
// state; an unloaded coordinator answers NOT_COORDINATOR.
//
// # Wiring it into a broker
//
// The broker answers FindCoordinator itself (the leader of PartitionFor's
// partition), advertises Versions, and passes each group request to the
// coordinator of the group's partition; requests naming several groups go
// to each coordinator and each group's answer is taken from its own. It
// calls BeginLoad/Load/FinishLoad when it becomes a __consumer_offsets
// leader, giving Load the records of the log (DecodeBatch decodes the
// batches the coordinator wrote), and Unload when it stops being one. Its
// Store appends to the partition with acks=all semantics. It calls
// ExpireOffsets every offsets.retention.check.interval.ms (expiry.go:
// KIP-211's committed-offset expiry, written as tombstones).
//
// # Invariants
//
// Asserted in code (a panic is a coordinator bug): within one generation no
// two members share an id; generations strictly increase; states change
// only along Kafka's edges (state.go); every request is answered once.
//
// # What it must not do
//
// It is part of core/ (SPEC.md, the hard rule): no goroutines, no select,
// no real clock, no randomness (member ids come from an injected
// IDSource), no map order in output. It never interprets protocol metadata
// or assignments: range, roundrobin, sticky and cooperative-sticky are the
// clients' business, carried through byte for byte. It answers bad input
// with Kafka error codes and panics only on its own broken invariants.
package group
