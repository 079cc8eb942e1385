// Package log is Strand's storage engine: the segmented log of one partition
// replica, laid out on disk exactly as Kafka lays it out.
//
// # What it is
//
// A Log lives in one directory, <topic>-<partition>/, and holds a sequence of
// segments, each three files named by the segment's base offset:
//
//	00000000000000000000.log        RecordBatch v2 bytes, as produced, with
//	                                BaseOffset and PartitionLeaderEpoch stamped
//	00000000000000000000.index      sparse offset index: 8-byte entries
//	                                (int32 relative offset, int32 position)
//	00000000000000000000.timeindex  time index: 12-byte entries
//	                                (int64 timestamp, int32 relative offset)
//
// plus leader-epoch-checkpoint (epoch → start offset). Integers are
// big-endian, as in Kafka. A Manager owns one log directory (one env.Disk
// root) and the per-directory checkpoints recovery-point-offset-checkpoint,
// replication-offset-checkpoint and log-start-offset-checkpoint.
//
// # Ownership of byte slices
//
//   - AppendAsLeader and AppendAsFollower take ownership of the batch bytes:
//     the log stamps them in place and hands the very slice to
//     env.File.Append. The caller must not touch the slice afterwards. The
//     log never copies record bytes on the append path.
//   - Read returns Regions: references to byte ranges of segment files, not
//     copies, so that realnet can send them with sendfile. Pin keeps them in
//     place while a response is in flight (pin.go). CopyRegions reads them
//     into a buffer for readers inside the node (the group coordinator's
//     load) and tests.
//
// # Durability
//
// Appends reach the file (the page cache in the real build) before they
// return. They become durable only through Flush, which issues asynchronous
// Syncs; the recovery point advances when the Syncs complete. An fsync
// therefore never blocks an append, on this partition or any other. The
// default flush policy never flushes (Kafka's default): durability comes from
// replication.
//
// On Open, everything below the recovery point is trusted, as in Kafka: it
// was synced. Bit rot below the recovery point is caught end to end by the
// consumers' CRC checks, as in Kafka. From the segment holding the recovery
// point on, every batch is verified (lengths, magic, CRC-32C, contiguous
// offsets) and the log is truncated at the first batch that fails; indexes
// are rebuilt. A corrupt batch is never served, and a synced batch is never
// dropped by recovery.
//
// # Failure
//
// Any failed write or Sync puts the Log in a failed state: every later call
// returns an error wrapping env.ErrIO (the broker answers
// KAFKA_STORAGE_ERROR and takes the directory offline). Sync is never
// retried on a file whose Sync failed.
//
// # What it must not do
//
// It is part of core/: it reaches the disk only through env.Disk, reads time
// only from values passed in, starts no goroutines and never blocks on I/O
// completion. It panics only when one of its own invariants breaks, never on
// bad input or bad disk contents.
package log
