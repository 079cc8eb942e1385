package quorum

import (
	"encoding/binary"
	"fmt"

	"strand/core/batch"
	"strand/core/metadata"
)

// MetadataQuorum adapts a Node to the controller's Quorum interface
// (core/controller/quorum.go): one entry per metadata record, so that entry
// offsets are the record offsets of __cluster_metadata-0. The leader-change
// entry a new leader appends reads as a NoOpRecord.
//
// # Decisions are atomic
//
// A decision (one Append: one controller batch) is proposed as consecutive
// entries, each headed by its index in the decision and the decision's
// record count. A decision is visible only once all its entries are
// committed: CommittedOffset is the end of the last whole committed
// decision, not Raft's high watermark. A leader that loses its epoch in the
// middle of replicating a decision may leave its first entries in a new
// leader's log, where the new leader's own leader-change entry commits them;
// such a decision, cut by an entry that does not continue it, is aborted:
// every reader skips it. So neither the controller nor a broker ever sees
// half a decision. Batches read back are one decision each, as KRaft's.
//
// Create it, StartNode with it as the Applier, then Attach the node, then
// let the controller Listen.
type MetadataQuorum struct {
	node       *Node
	onCommit   func()
	onChange   func()
	onFailure  func(error)
	onSnapshot func(*Snapshot)
	// inAppend: a commit reported during Append is not called back (the
	// controller reads CommittedOffset after Append returns).
	inAppend bool
	// visibleEnd is the end of the last whole committed decision, or of an
	// aborted one: everything below it is decided.
	visibleEnd int64
	// startSnapshot is the snapshot StartNode loaded before the controller
	// listened; Listen hands it over.
	startSnapshot *Snapshot
	// lastRole, lastEpoch and lastLeader are what onChange last reported.
	lastRole   Role
	lastEpoch  int32
	lastLeader int32
}

// NewMetadataQuorum returns the adapter.
func NewMetadataQuorum() *MetadataQuorum {
	return &MetadataQuorum{lastLeader: -2}
}

// Attach gives the adapter the node it serves and starts watching its
// leadership.
func (q *MetadataQuorum) Attach(n *Node) {
	q.node = n
	q.visibleEnd = max(q.visibleEnd, n.raft.LogStartOffset())
	n.onStateChange = q.stateChanged
}

// Listen registers the controller's callbacks, run on the event loop:
// onCommit when CommittedOffset advances (not from inside Append), onChange
// when this node's role, epoch or known leader changes, onFailure when the
// node stopped, onSnapshot when a snapshot replaces the state.
func (q *MetadataQuorum) Listen(onCommit, onChange func(), onFailure func(error), onSnapshot func(*Snapshot)) {
	q.onCommit, q.onChange, q.onFailure, q.onSnapshot = onCommit, onChange, onFailure, onSnapshot
	if snap := q.startSnapshot; snap != nil {
		q.startSnapshot = nil
		onSnapshot(snap)
	}
}

// LoadSnapshot implements Applier.
func (q *MetadataQuorum) LoadSnapshot(snap *Snapshot) {
	q.visibleEnd = snap.EndOffset
	if q.onSnapshot == nil {
		q.startSnapshot = snap
		return
	}
	q.onSnapshot(snap)
}

// TakeSnapshot hands the quorum the state after the committed decisions
// below endOffset; see Node.TakeSnapshot. Call it between events (not from
// inside a callback), when every committed entry has been handed out.
func (q *MetadataQuorum) TakeSnapshot(endOffset int64, data []byte) error {
	return q.node.TakeSnapshot(endOffset, data)
}

// Apply implements Applier: it reports the new commit offset.
func (q *MetadataQuorum) Apply(entries []Entry) {
	if len(entries) == 0 || q.inAppend || q.node == nil || q.onCommit == nil {
		return
	}
	q.onCommit()
}

// Failed implements Applier.
func (q *MetadataQuorum) Failed(err error) {
	if q.onFailure != nil {
		q.onFailure(err)
	}
}

func (q *MetadataQuorum) stateChanged() {
	r := q.node.raft
	if r.Role() == q.lastRole && r.Epoch() == q.lastEpoch && r.LeaderID() == q.lastLeader {
		return
	}
	q.lastRole, q.lastEpoch, q.lastLeader = r.Role(), r.Epoch(), r.LeaderID()
	if q.onChange != nil {
		q.onChange()
	}
}

// LatestSnapshot is the node's latest snapshot, nil if none.
func (q *MetadataQuorum) LatestSnapshot() *Snapshot { return q.node.raft.LatestSnapshot() }

// Epoch is the node's quorum epoch.
func (q *MetadataQuorum) Epoch() int32 { return q.node.raft.Epoch() }

// LeaderID is the quorum's leader as this node knows it, -1 if unknown.
func (q *MetadataQuorum) LeaderID() int32 { return q.node.raft.LeaderID() }

// Describe is the leader's view of the voters' replication, times in the
// node's monotonic milliseconds; false if this node does not lead.
func (q *MetadataQuorum) Describe() (Description, bool) {
	return q.node.raft.Describe(q.node.nowMs())
}

// LeaderEpochStart reports whether this node leads, and if so the offset of
// its epoch's leader-change entry: once that commits, everything before it
// is committed and the node may act as the active controller.
func (q *MetadataQuorum) LeaderEpochStart() (int64, bool) {
	r := q.node.raft
	if r.Role() != Leader {
		return 0, false
	}
	start := r.EndOffset()
	for start > r.LogStartOffset() && r.log.epochAt(start-1) == r.Epoch() {
		start--
	}
	return start, true
}

// entryHeaderBytes heads every record entry: its index in the decision and
// the decision's record count, big-endian uint32 each.
const entryHeaderBytes = 8

// Append proposes the records as one decision; all or none are appended
// (only a node that does not lead refuses, and it refuses the first), or
// the node stops part-way (its storage failed under the first proposals),
// after which it commits nothing more and the partial decision is skipped
// by every reader like one cut short by a change of leader.
func (q *MetadataQuorum) Append(records []metadata.Record) (int64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("quorum: Append of no records")
	}
	q.inAppend = true
	defer func() { q.inAppend = false }()
	base := int64(-1)
	for i, rec := range records {
		data := binary.BigEndian.AppendUint32(nil, uint32(i))
		data = binary.BigEndian.AppendUint32(data, uint32(len(records)))
		offset, err := q.node.Propose(append(data, metadata.EncodeRecord(rec)...))
		if err != nil {
			if i > 0 && !q.node.Stopped() {
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

// CommittedOffset is the end of the last whole committed decision.
func (q *MetadataQuorum) CommittedOffset() int64 {
	r := q.node.raft
	hw := r.CommittedOffset()
	q.visibleEnd = max(q.visibleEnd, r.LogStartOffset())
	entries := r.Entries(q.visibleEnd, hw)
	for len(entries) > 0 {
		n, _, err := decisionLen(entries)
		if err != nil || n == 0 {
			break // corrupt (reads report it) or not yet decided
		}
		q.visibleEnd += int64(n)
		entries = entries[n:]
	}
	return q.visibleEnd
}

// decisionLen returns how many entries the decision starting entries[0]
// spans, and whether it is whole (false: aborted, to be skipped). It
// returns 0 when the decision is not yet decided: its entries so far are
// all there is.
func decisionLen(entries []Entry) (n int, whole bool, err error) {
	if entries[0].Data == nil {
		return 1, true, nil
	}
	index, count, err := entryHeader(entries[0])
	if err != nil {
		return 0, false, err
	}
	if index != 0 {
		return 1, false, nil // the tail of a decision whose head is gone
	}
	for i := 1; i < count; i++ {
		if i == len(entries) {
			return 0, false, nil
		}
		e := entries[i]
		if e.Data == nil || e.Epoch != entries[0].Epoch {
			return i, false, nil
		}
		if idx, _, err := entryHeader(e); err != nil || idx != uint32(i) {
			return i, false, err
		}
	}
	return count, true, nil
}

func entryHeader(e Entry) (index uint32, count int, err error) {
	if len(e.Data) < entryHeaderBytes {
		return 0, 0, fmt.Errorf("quorum: entry %d has %d bytes, shorter than its header", e.Offset, len(e.Data))
	}
	index, c := binary.BigEndian.Uint32(e.Data), binary.BigEndian.Uint32(e.Data[4:])
	if c == 0 || index >= c {
		return 0, 0, fmt.Errorf("quorum: entry %d is record %d of a decision of %d", e.Offset, index, c)
	}
	return index, int(c), nil
}

// LogStartOffset is the first offset held as an entry (after the snapshot).
func (q *MetadataQuorum) LogStartOffset() int64 { return q.node.raft.LogStartOffset() }

// ReadCommitted encodes whole committed decisions from fetchOffset as
// record batches, one per decision, at most maxBytes unless the first batch
// alone is larger. Aborted decisions are skipped.
func (q *MetadataQuorum) ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error) {
	r := q.node.raft
	if fetchOffset < r.LogStartOffset() || fetchOffset > r.EndOffset() {
		return nil, fmt.Errorf("quorum: fetch offset %d outside the log [%d, %d]", fetchOffset, r.LogStartOffset(), r.EndOffset())
	}
	var out []byte
	err := q.decisions(fetchOffset, q.CommittedOffset(), func(b []byte, _ metadata.Batch) bool {
		if len(out) > 0 && len(out)+len(b) > int(maxBytes) {
			return false
		}
		out = append(out, b...)
		return true
	})
	return out, err
}

// CommittedBatches decodes the whole committed decisions from offset on,
// one batch each, skipping aborted ones, and hands them to fn in order.
func (q *MetadataQuorum) CommittedBatches(from int64, fn func(metadata.Batch) error) error {
	from = max(from, q.node.raft.LogStartOffset())
	var ferr error
	err := q.decisions(from, q.CommittedOffset(), func(_ []byte, b metadata.Batch) bool {
		ferr = fn(b)
		return ferr == nil
	})
	if err != nil {
		return err
	}
	return ferr
}

// decisions builds the record batch of each whole decision in [from, to)
// and hands it, encoded and decoded, to emit until it says stop.
func (q *MetadataQuorum) decisions(from, to int64, emit func([]byte, metadata.Batch) bool) error {
	entries := q.node.raft.Entries(from, to)
	for len(entries) > 0 {
		n, whole, err := decisionLen(entries)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if whole {
			var records []metadata.Record
			for _, e := range entries[:n] {
				rec := metadata.Record(&metadata.NoOpRecord{})
				if e.Data != nil {
					decoded, err := metadata.DecodeRecord(e.Data[entryHeaderBytes:])
					if err != nil {
						return fmt.Errorf("quorum: entry %d is not a metadata record: %w", e.Offset, err)
					}
					rec = decoded
				}
				records = append(records, rec)
			}
			b := metadata.EncodeBatch(records, 0)
			batch.SetBaseOffset(b, entries[0].Offset)
			batch.SetPartitionLeaderEpoch(b, entries[0].Epoch)
			decoded := metadata.Batch{BaseOffset: entries[0].Offset, NextOffset: entries[0].Offset + int64(n), LeaderEpoch: entries[0].Epoch, Records: records}
			if !emit(b, decoded) {
				return nil
			}
		}
		entries = entries[n:]
	}
	return nil
}
