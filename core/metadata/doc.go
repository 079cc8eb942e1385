// Package metadata is the cluster metadata of Strand, as KRaft keeps it: the
// typed records of the metadata log (partition __cluster_metadata-0) and the
// Image, the state that applying those records in order produces.
//
// The controller appends records and applies them to its Image when they
// commit; every broker follows the log and applies the same records to its
// own Image. Apply is pure and deterministic, so every node that applied the
// same prefix of the log holds the same Image (SPEC.md, controller).
//
// # Encoding
//
// Each metadata record is the value of one Kafka record inside a RecordBatch
// v2 (uncompressed, null key, no headers). The value is an int16 record type
// (Kafka's apiKey for the record: TopicRecord is 2, PartitionRecord 3, ...),
// an int16 record version, then the fields in declaration order, big-endian,
// strings and arrays prefixed with an int16/int32 length (-1 for null). The
// encoding is canonical: one record has exactly one encoding, so that
// encode(decode(b)) == b.
//
// # Validation
//
// Apply never panics on a record: a record that does not fit the image (an
// unknown topic, a replica set that breaks an invariant, an epoch that goes
// backwards) is an error naming the field, and the image is left unchanged.
// After every successful Apply the invariants of the touched partition hold:
// the leader is -1 or in the ISR, ISR and ELR are subsets of the replicas and
// disjoint, and the leader and partition epochs never decrease.
//
// # Ownership
//
// Slices returned by the Image's accessors are shared, never copied, and
// Apply never modifies a slice it has handed out: it replaces it (copy on
// write). Callers must not modify them.
//
// What it must not do: any I/O, reading a clock, randomness, or letting map
// iteration order reach its output (every listing is sorted).
package metadata
