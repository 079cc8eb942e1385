package controller

import (
	"fmt"
	"path"

	"strand/core/env"
	"strand/core/log"
	"strand/core/metadata"
)

// MetadataTopic is the metadata log's topic; its only partition is 0.
const MetadataTopic = "__cluster_metadata"

// MetadataTopicID is the metadata topic's id, Kafka's Uuid.METADATA_TOPIC_ID
// (0, 1): Fetch v13+ names topics by id.
var MetadataTopicID = [16]byte{15: 1}

// MetadataLogDir is the metadata log's directory inside a log dir.
const MetadataLogDir = MetadataTopic + "-0"

// MetadataLog is the opened metadata log of the active controller.
type MetadataLog struct {
	log  *log.Log
	disk env.Disk
	dir  string
}

// OpenMetadataLog opens (recovering it after a crash) the metadata log in
// the node's first log dir, logDir ("" for the disk's root). Batches are
// verified from the start, because the controller keeps no recovery-point
// checkpoint for it.
func OpenMetadataLog(disk env.Disk, logDir string, nowMs int64) (*MetadataLog, error) {
	dir := MetadataLogDir
	if logDir != "" {
		dir = path.Join(logDir, MetadataLogDir)
	}
	l, err := log.Open(disk, dir, log.DefaultConfig(), log.OpenOptions{NowMs: nowMs})
	if err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	return &MetadataLog{log: l, disk: disk, dir: dir}, nil
}

// Log is the underlying partition log.
func (m *MetadataLog) Log() *log.Log { return m.log }

// Close closes the log's files.
func (m *MetadataLog) Close() error { return m.log.Close() }

// parentDirs are the directories whose entries lead to the log's directory,
// innermost first, "." for the disk's root: Open may have created them, and
// a created directory is durable only once its parent is synced.
func (m *MetadataLog) parentDirs() []string {
	var out []string
	for dir := path.Dir(m.dir); ; dir = path.Dir(dir) {
		out = append(out, dir)
		if dir == "." {
			return out
		}
	}
}

// quorum is the replicated metadata log as the controller sees it. Issue 5's
// Raft replaces localQuorum behind this interface; the state machine does
// not change.
//
// Contract: Append assigns consecutive offsets from EndOffset(); records
// become committed in offset order, and the quorum reports each advance of
// CommittedOffset through the onCommit callback it was built with, on the
// event loop, except an advance during Append itself, which the caller
// reads from CommittedOffset after Append returns. Committed records never
// change.
type quorum interface {
	// Append appends records as one batch and returns the offset of the
	// first. An error means nothing was appended and this node can no
	// longer append (a failed disk, or, with Raft, lost leadership).
	Append(records []metadata.Record) (baseOffset int64, err error)
	// EndOffset is the offset the next appended record will get.
	EndOffset() int64
	// CommittedOffset is the offset after the last committed record: the
	// high watermark of the metadata log.
	CommittedOffset() int64
	// LogStartOffset is the first offset still held.
	LogStartOffset() int64
	// ReadCommitted copies whole committed batches from fetchOffset, at
	// most maxBytes unless the first batch alone is larger.
	ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error)
	// Replay decodes every batch of the local log, committed or not, in
	// order: the controller rebuilds its images from them at start.
	Replay(fn func(metadata.Batch) error) error
}

// localQuorum is the single-voter quorum: a batch is committed once it is
// durable in the local metadata log.
type localQuorum struct {
	log   *log.Log
	ml    *MetadataLog
	clock env.Clock
	// epoch is stamped into every batch (PartitionLeaderEpoch): one more
	// than the log's latest, a new term for every start, as Raft would.
	epoch     int32
	committed int64
	// durable is the end of the synced prefix of the log. It becomes
	// committed only once started: the directories leading to the log
	// are synced too, or a power loss could lose the whole directory.
	durable int64
	started bool
	// inAppend is set while Append runs: a Sync completing at once then
	// advances the commit offset without calling onCommit.
	inAppend  bool
	onCommit  func(committedOffset int64)
	onFailure func(error)
	failed    error
}

// newLocalQuorum wraps the opened metadata log. Everything already in the
// log counts as committed once a first Sync of it completes: Sync is what
// makes it durable, and a single voter needs nothing more.
func newLocalQuorum(ml *MetadataLog, clock env.Clock, onCommit func(int64), onFailure func(error)) *localQuorum {
	l := ml.log
	return &localQuorum{
		log: l, ml: ml, clock: clock, epoch: max(l.Epochs().LatestEpoch(), 0) + 1,
		committed: l.LogStartOffset(), durable: l.LogStartOffset(), onCommit: onCommit, onFailure: onFailure,
	}
}

// start syncs the directories leading to the log, then the log itself, and
// commits what recovery found.
func (q *localQuorum) start() {
	parents := q.ml.parentDirs()
	pending, firstErr := len(parents)+1, error(nil)
	done := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if pending--; pending > 0 {
			return
		}
		if firstErr != nil {
			q.fail(firstErr)
			return
		}
		q.started = true
		q.flush()
	}
	for _, dir := range parents {
		q.ml.disk.SyncDir(dir, done)
	}
	done(nil)
}

// EndOffset implements quorum: the log end offset.
func (q *localQuorum) EndOffset() int64 { return q.log.LogEndOffset() }

// CommittedOffset implements quorum: the end of the synced prefix.
func (q *localQuorum) CommittedOffset() int64 { return q.committed }

// LogStartOffset implements quorum.
func (q *localQuorum) LogStartOffset() int64 { return q.log.LogStartOffset() }

// Append implements quorum: it appends the batch and syncs the log; the
// Sync's completion commits it.
func (q *localQuorum) Append(records []metadata.Record) (int64, error) {
	if q.failed != nil {
		return 0, q.failed
	}
	b := metadata.EncodeBatch(records, q.clock.WallMs())
	result, err := q.log.AppendAsLeader(b, q.epoch, q.clock.WallMs())
	if err != nil {
		q.fail(err)
		return 0, q.failed
	}
	if result.LastOffset-result.BaseOffset+1 != int64(len(records)) {
		panic(fmt.Sprintf("controller: appended %d records at [%d, %d]", len(records), result.BaseOffset, result.LastOffset))
	}
	q.inAppend = true
	q.flush()
	q.inAppend = false
	return result.BaseOffset, nil
}

// flush syncs the log up to its end and commits up to there when done.
func (q *localQuorum) flush() {
	upTo := q.log.LogEndOffset()
	q.log.Flush(upTo, func(err error) {
		if err != nil {
			q.fail(err)
			return
		}
		q.durable = max(q.durable, upTo)
		if !q.started || q.durable <= q.committed {
			return
		}
		q.committed = q.durable
		if !q.inAppend {
			q.onCommit(q.committed)
		}
	})
}

func (q *localQuorum) fail(err error) {
	if q.failed != nil {
		return
	}
	q.failed = fmt.Errorf("metadata log: %w", err)
	q.onFailure(q.failed)
}

// ReadCommitted implements quorum by copying the log's regions (the
// simulator has no sendfile; realnet can serve regions later).
func (q *localQuorum) ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error) {
	r, err := q.log.Read(fetchOffset, maxBytes, q.committed, true)
	if err != nil {
		return nil, err
	}
	return log.CopyRegions(r.Regions)
}

// Replay implements quorum, reading the log 1 MiB at a time.
func (q *localQuorum) Replay(fn func(metadata.Batch) error) error {
	const chunkBytes = 1 << 20
	for offset := q.log.LogStartOffset(); offset < q.log.LogEndOffset(); {
		r, err := q.log.Read(offset, chunkBytes, q.log.LogEndOffset(), true)
		if err != nil {
			return fmt.Errorf("replay metadata log at %d: %w", offset, err)
		}
		if r.NextOffset <= offset {
			return fmt.Errorf("replay metadata log: no progress at offset %d", offset)
		}
		data, err := log.CopyRegions(r.Regions)
		if err != nil {
			return fmt.Errorf("replay metadata log at %d: %w", offset, err)
		}
		batches, err := metadata.DecodeBatches(data)
		if err != nil {
			return fmt.Errorf("replay metadata log at %d: %w", offset, err)
		}
		for _, b := range batches {
			if err := fn(b); err != nil {
				return fmt.Errorf("replay metadata log: %w", err)
			}
		}
		offset = r.NextOffset
	}
	return nil
}
