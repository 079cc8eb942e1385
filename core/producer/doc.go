// Package producer keeps the idempotent producer's state for one partition
// replica, as Kafka's ProducerStateManager does, and hands out producer ids
// for InitProducerId.
//
// # What it is
//
// A State maps each producer id seen in the partition to its epoch and the
// metadata (sequence range, offset range, timestamp) of its last
// BatchesRetained batches. A leader asks Check before appending a produced
// batch: the verdict is Append, Duplicate (one of the retained batches again:
// answer success with the ORIGINAL offsets, append nothing) or an *Error
// carrying the Kafka error code (OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_PRODUCER_EPOCH, or the per-partition bound). After the append it
// calls Update. Followers apply every batch they copy (CatchUp reads them back
// from the log after AppendAsFollower; UpdateFromReplicated takes one header),
// so that a new leader deduplicates retries of batches its predecessor wrote.
//
// State is rebuilt from disk by Load: the newest usable snapshot file, then
// every batch after it read from the log. Snapshot files lie in the
// partition's directory, named by the offset they cover up to, as Kafka
// names them (00000000000000000100.snapshot), in Kafka's version 1 layout
// (see snapshot_format.go). Snapshots writes them atomically through
// core/log/checkpoint's Writer. TruncateTo follows Kafka's contract after a
// log truncation: snapshots above the new end go, and the state is reloaded
// from the newest snapshot at or below it plus a replay.
//
// IDBlock is the broker's share of the producer ids the controller allocates
// in blocks (AllocateProducerIds); InitProducerId takes ids from it.
//
// # Where it differs from Kafka, and why
//
//   - A snapshot keeps every retained batch of a producer, not only the last
//     one: one version 1 entry per batch, oldest first, so that Kafka's own
//     reader (the last entry per producer wins) still reads the file, and a
//     replica restarted from a snapshot still recognises a retry of any of
//     the last five batches instead of answering OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - A snapshot at exactly the log start offset is kept and used (Kafka
//     deletes it): it describes every batch below that offset, so no state
//     is missing.
//   - The number of producer ids per partition is bounded (Config.ProducersMax).
//
// # What it must not do
//
// It is part of core/: State and IDBlock are pure and deterministic (no clock:
// callers pass nowMs; maps never leak their order: every listing is sorted by
// producer id). Snapshots reaches the disk only through env.Disk and never
// blocks on a sync. Nothing here panics on bad input or bad disk contents; a
// corrupt snapshot is skipped (an older one, or a full replay, is used).
package producer
