package quorum

import (
	"fmt"

	"strand/core/batch"
	"strand/core/metadata"
)

// MetadataQuorum adapts a Node to the controller's quorum interface
// (core/controller/quorum.go: Append, EndOffset, CommittedOffset,
// LogStartOffset, ReadCommitted, Replay): one entry per metadata record, so
// that entry offsets are the record offsets of __cluster_metadata-0. The
// leader-change entry a new leader appends reads as a NoOpRecord. Batches
// read back group consecutive entries of one epoch.
//
// What the adapter does not give the controller: a decision's records may
// commit in two steps (the controller applies record by record, so it
// tolerates that; a broker fetching exactly between them sees half a
// decision, which KRaft's atomic batches avoid), and following leadership
// (becoming active, resigning) is the controller's to do.
//
// It is the Node's Applier: create it first, then StartNode with it, then
// Attach the node.
type MetadataQuorum struct {
	node      *Node
	onCommit  func(committedOffset int64)
	onFailure func(error)
	// onSnapshot loads a snapshot into the controller's committed image.
	onSnapshot func(*Snapshot)
	// inAppend: a commit reported during Append is not called back (the
	// controller reads CommittedOffset after Append returns).
	inAppend bool
	// batchBytesMax bounds one batch built by ReadCommitted or Replay.
	batchBytesMax int
}

// NewMetadataQuorum returns the adapter; the callbacks run on the event loop.
func NewMetadataQuorum(onCommit func(int64), onFailure func(error), onSnapshot func(*Snapshot)) *MetadataQuorum {
	return &MetadataQuorum{onCommit: onCommit, onFailure: onFailure, onSnapshot: onSnapshot, batchBytesMax: 1 << 20}
}

// Attach gives the adapter the node it serves.
func (q *MetadataQuorum) Attach(n *Node) { q.node = n }

// LoadSnapshot implements Applier.
func (q *MetadataQuorum) LoadSnapshot(snap *Snapshot) { q.onSnapshot(snap) }

// Apply implements Applier: it reports the new commit offset.
func (q *MetadataQuorum) Apply(entries []Entry) {
	if len(entries) == 0 || q.inAppend || q.node == nil {
		return
	}
	q.onCommit(entries[len(entries)-1].Offset + 1)
}

// Failed implements Applier.
func (q *MetadataQuorum) Failed(err error) { q.onFailure(err) }

// Append proposes each record as an entry; all or none are appended (only
// a node that does not lead refuses, and it refuses the first).
func (q *MetadataQuorum) Append(records []metadata.Record) (int64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("quorum: Append of no records")
	}
	q.inAppend = true
	defer func() { q.inAppend = false }()
	base := int64(-1)
	for i, rec := range records {
		offset, err := q.node.Propose(metadata.EncodeRecord(rec))
		if err != nil {
			if i > 0 {
				panic(fmt.Sprintf("quorum: leadership lost within one Append after %d records", i))
			}
			return 0, err
		}
		if base < 0 {
			base = offset
		}
	}
	return base, nil
}

// EndOffset is the offset the next record gets.
func (q *MetadataQuorum) EndOffset() int64 { return q.node.raft.EndOffset() }

// CommittedOffset is the high watermark.
func (q *MetadataQuorum) CommittedOffset() int64 { return q.node.raft.CommittedOffset() }

// LogStartOffset is the first offset held as an entry (after the snapshot).
func (q *MetadataQuorum) LogStartOffset() int64 { return q.node.raft.LogStartOffset() }

// ReadCommitted encodes committed entries from fetchOffset as record
// batches, at most maxBytes unless the first batch alone is larger.
func (q *MetadataQuorum) ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error) {
	r := q.node.raft
	if fetchOffset < r.LogStartOffset() || fetchOffset > r.EndOffset() {
		return nil, fmt.Errorf("quorum: fetch offset %d outside the log [%d, %d]", fetchOffset, r.LogStartOffset(), r.EndOffset())
	}
	var out []byte
	err := q.batches(fetchOffset, r.CommittedOffset(), func(b []byte) bool {
		if len(out) > 0 && len(out)+len(b) > int(maxBytes) {
			return false
		}
		out = append(out, b...)
		return true
	})
	return out, err
}

// Replay decodes every entry of the log, committed or not, as batches.
func (q *MetadataQuorum) Replay(fn func(metadata.Batch) error) error {
	r := q.node.raft
	var ferr error
	err := q.batches(r.LogStartOffset(), r.EndOffset(), func(b []byte) bool {
		decoded, err := metadata.DecodeBatches(b)
		if err == nil && len(decoded) != 1 {
			err = fmt.Errorf("built %d batches, want 1", len(decoded))
		}
		if err == nil {
			err = fn(decoded[0])
		}
		ferr = err
		return err == nil
	})
	if err != nil {
		return err
	}
	return ferr
}

// batches builds record batches of entries [from, to), each a run of one
// epoch of at most batchBytesMax, and hands them to emit until it says stop.
func (q *MetadataQuorum) batches(from, to int64, emit func([]byte) bool) error {
	entries := q.node.raft.Entries(from, to)
	for len(entries) > 0 {
		var records []metadata.Record
		size, n := 0, 0
		for n < len(entries) && entries[n].Epoch == entries[0].Epoch && (n == 0 || size+len(entries[n].Data) <= q.batchBytesMax) {
			rec := metadata.Record(&metadata.NoOpRecord{})
			if entries[n].Data != nil {
				decoded, err := metadata.DecodeRecord(entries[n].Data)
				if err != nil {
					return fmt.Errorf("quorum: entry %d is not a metadata record: %w", entries[n].Offset, err)
				}
				rec = decoded
			}
			records, size, n = append(records, rec), size+len(entries[n].Data), n+1
		}
		b := metadata.EncodeBatch(records, 0)
		batch.SetBaseOffset(b, entries[0].Offset)
		batch.SetPartitionLeaderEpoch(b, entries[0].Epoch)
		if !emit(b) {
			return nil
		}
		entries = entries[n:]
	}
	return nil
}
