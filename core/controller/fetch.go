package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// isMetadataFetch reports whether req fetches exactly __cluster_metadata-0,
// by name before Fetch v13 and by topic id from v13.
func isMetadataFetch(req *kmsg.FetchRequest) bool {
	if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		return false
	}
	if req.Version >= 13 {
		return req.Topics[0].TopicID == MetadataTopicID
	}
	return req.Topics[0].Topic == MetadataTopic
}

// fetchReplicaID is the replica a metadata fetch is sent for, -1 for a
// consumer's: ReplicaState (v15+) or ReplicaID.
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchWaiter is a metadata fetch held by long polling.
type fetchWaiter struct {
	req   *kmsg.FetchRequest
	reply func(kmsg.Response)
	timer env.Timer
	done  bool
}

// fetchWaiters are the held fetches, oldest first.
type fetchWaiters struct {
	waiting []*fetchWaiter
}

// wake answers the held fetches that the commit offset has passed.
func (fw *fetchWaiters) wake(c *Controller) {
	committed := c.quorum.CommittedOffset()
	var ready []*fetchWaiter
	fw.waiting = slices.DeleteFunc(fw.waiting, func(w *fetchWaiter) bool {
		if w.req.Topics[0].Partitions[0].FetchOffset >= committed {
			return false
		}
		ready = append(ready, w)
		return true
	})
	for _, w := range ready {
		w.timer.Stop()
		w.done = true
		c.answerFetch(w.req, w.reply)
	}
}

// answerAll answers every held fetch now (a resigning controller: they
// learn the new leader).
func (fw *fetchWaiters) answerAll(c *Controller) {
	waiting := fw.waiting
	fw.waiting = nil
	for _, w := range waiting {
		w.timer.Stop()
		w.done = true
		c.answerFetch(w.req, w.reply)
	}
}

// dropAll forgets every held fetch without answering.
func (fw *fetchWaiters) dropAll() {
	for _, w := range fw.waiting {
		w.timer.Stop()
		w.done = true
	}
	fw.waiting = nil
}

// handleFetch serves the metadata log to a broker following it: committed
// batches from the fetch offset. A fetch at or above the commit offset (but
// within the log: a restarted controller commits its log again before it
// serves it) waits up to MaxWaitMillis for new records, bounded by
// FetchWaitersMax; beyond the log end it gets OFFSET_OUT_OF_RANGE.
func (c *Controller) handleFetch(req *kmsg.FetchRequest, reply func(kmsg.Response)) {
	if !c.Active() {
		c.answerFetch(req, reply)
		return
	}
	offset := req.Topics[0].Partitions[0].FetchOffset
	if id := fetchReplicaID(req); id >= 0 {
		c.observers.fetched(id, c.nowMs(), offset, c.quorum.CommittedOffset())
	}
	wait := offset >= c.quorum.CommittedOffset() && offset <= c.quorum.EndOffset() && req.MaxWaitMillis > 0 &&
		len(c.fetches.waiting) < c.cfg.FetchWaitersMax
	if !wait {
		c.answerFetch(req, reply)
		return
	}
	w := &fetchWaiter{req: req, reply: reply}
	w.timer = c.clock.SetTimer(int64(req.MaxWaitMillis)*1e6, func() {
		if w.done {
			return
		}
		w.done = true
		c.fetches.remove(w)
		c.answerFetch(req, reply)
	})
	c.fetches.waiting = append(c.fetches.waiting, w)
}

func (fw *fetchWaiters) remove(w *fetchWaiter) {
	for i, x := range fw.waiting {
		if x == w {
			fw.waiting = append(fw.waiting[:i], fw.waiting[i+1:]...)
			return
		}
	}
}

// answerFetch answers a metadata fetch with what is committed now.
func (c *Controller) answerFetch(req *kmsg.FetchRequest, reply func(kmsg.Response)) {
	resp, p := fetchResponse(req)
	if !c.Active() {
		// Brokers follow the metadata log from the active controller;
		// CurrentLeader (KIP-595) tells them where it is, if known.
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = c.quorum.LeaderID(), -1
		reply(resp)
		return
	}
	fp := req.Topics[0].Partitions[0]
	committed := c.quorum.CommittedOffset()
	p.HighWatermark, p.LastStableOffset, p.LogStartOffset = committed, committed, c.quorum.LogStartOffset()
	if fp.FetchOffset < p.LogStartOffset || fp.FetchOffset > c.quorum.EndOffset() {
		p.ErrorCode = kerr.OffsetOutOfRange.Code
		if snap := c.quorum.LatestSnapshot(); snap != nil && fp.FetchOffset < p.LogStartOffset {
			// Behind the log start: the broker reads the snapshot
			// (FetchSnapshot) in this leader's epoch, as KIP-630.
			p.SnapshotID.EndOffset, p.SnapshotID.Epoch = snap.EndOffset, snap.Epoch
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = c.quorum.LeaderID(), c.quorum.Epoch()
		}
		reply(resp)
		return
	}
	maxBytes := c.cfg.FetchMaxBytes
	for _, limit := range []int32{fp.PartitionMaxBytes, req.MaxBytes} {
		if limit > 0 {
			maxBytes = min(maxBytes, limit)
		}
	}
	if fp.FetchOffset < committed {
		data, err := c.quorum.ReadCommitted(fp.FetchOffset, maxBytes)
		if err != nil {
			p.ErrorCode = kerr.KafkaStorageError.Code
			reply(resp)
			return
		}
		p.RecordBatches = data
	}
	reply(resp)
}

// fetchResponse returns a response for req with its one partition, and a
// pointer to that partition.
func fetchResponse(req *kmsg.FetchRequest) (*kmsg.FetchResponse, *kmsg.FetchResponseTopicPartition) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	topic := kmsg.NewFetchResponseTopic()
	topic.Topic, topic.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
	topic.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
	resp.Topics = []kmsg.FetchResponseTopic{topic}
	return resp, &resp.Topics[0].Partitions[0]
}

// snapshotChunkBytesMax bounds one FetchSnapshot answer.
const snapshotChunkBytesMax = 1 << 20

// handleFetchSnapshot serves the latest snapshot, a chunk from Position, to
// a broker behind the metadata log's start (a voter's FetchSnapshot goes to
// its Raft instead; both read the same snapshot).
func (c *Controller) handleFetchSnapshot(req *kmsg.FetchSnapshotRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.FetchSnapshotResponse)
	rp := req.Topics[0].Partitions[0]
	p := kmsg.NewFetchSnapshotResponseTopicPartition()
	p.SnapshotID.EndOffset, p.SnapshotID.Epoch, p.Position = rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch, rp.Position
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = c.quorum.LeaderID(), c.quorum.Epoch()
	snap := c.quorum.LatestSnapshot()
	switch {
	case !c.Active():
		p.ErrorCode = kerr.NotLeaderForPartition.Code
	case snap == nil || snap.EndOffset != rp.SnapshotID.EndOffset || snap.Epoch != rp.SnapshotID.Epoch:
		p.ErrorCode = kerr.SnapshotNotFound.Code
	case rp.Position < 0 || rp.Position > int64(len(snap.Data)):
		p.ErrorCode = kerr.PositionOutOfRange.Code
	default:
		limit := int64(snapshotChunkBytesMax)
		if req.MaxBytes > 0 {
			limit = min(limit, int64(req.MaxBytes))
		}
		end := min(int64(len(snap.Data)), rp.Position+limit)
		p.Size, p.Bytes = int64(len(snap.Data)), snap.Data[rp.Position:end:end]
	}
	t := kmsg.NewFetchSnapshotResponseTopic()
	t.Topic, t.Partitions = req.Topics[0].Topic, []kmsg.FetchSnapshotResponseTopicPartition{p}
	resp.Topics = []kmsg.FetchSnapshotResponseTopic{t}
	reply(resp)
}
