package workload

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/models"
)

// consumer fetches its partitions from their leaders (and, some of the
// time, their followers: fetchFrom), each partition in its own loop of one
// fetch at a time, from offset 0 up to the high watermark.
type consumer struct {
	w      *Workload
	client *client
	tps    []models.TopicPartition
	// next is the next offset to fetch, per partition, indexed like tps.
	next []int64
}

func (c *consumer) start() {
	c.next = make([]int64, len(c.tps))
	for i := range c.tps {
		c.fetchLoop(i)
	}
}

// fetchLoop fetches partition i once, then again, forever.
func (c *consumer) fetchLoop(i int) {
	tp := c.tps[i]
	never := func() bool { return false }
	c.client.withLeader(tp, never, func(li leaderInfo) {
		c.w.fetchFrom(c.client, tp, li, c.next[i], func(next int64, ok bool) {
			if ok {
				c.next[i] = next
				if oneIn := c.w.cfg.RewindOneIn; oneIn > 0 && c.w.cfg.RewindRand.IntN(oneIn) == 0 {
					c.next[i] = 0
					c.w.rewinds++
				}
				c.fetchLoop(i)
				return
			}
			c.client.forgetLeader(tp)
			c.client.proc.After(c.w.cfg.BackoffNs, func() { c.fetchLoop(i) })
		})
	})
}

// fetchFrom sends one Fetch of tp at offset, to the leader li names or, one
// time in Config.FollowerFetchOneIn, to one of the followers li names (the
// client's metadata, perhaps stale; KIP-392: a follower serves consumers'
// Fetch v11+ up to its own high watermark), records it if it succeeds, and
// calls done with the next offset to fetch and whether the fetch
// succeeded. Consumers and group members share it.
func (w *Workload) fetchFrom(c *client, tp models.TopicPartition, li leaderInfo, offset int64, done func(next int64, ok bool)) {
	replica := li.leader
	if oneIn := w.cfg.FollowerFetchOneIn; oneIn > 0 {
		r := w.cfg.FollowerFetchRand
		if followers := li.followers(); r.IntN(oneIn) == 0 && len(followers) > 0 {
			replica = followers[r.IntN(len(followers))]
		}
	}
	w.fetchFromReplica(c, tp, li, replica, offset, done)
}

// followers lists the replicas other than the leader, in metadata order.
func (li leaderInfo) followers() []int32 {
	var out []int32
	for _, id := range li.replicas {
		if id != li.leader {
			out = append(out, id)
		}
	}
	return out
}

// fetchFromReplica is fetchFrom's fetch from replica, the leader or a
// follower. A follower's errors are handled as kgo handles them: an
// OFFSET_OUT_OF_RANGE (the follower lags the offset, or has not yet
// learned a log start) is retried on the leader at once, which resolves
// it; NOT_LEADER_OR_FOLLOWER and FENCED/UNKNOWN_LEADER_EPOCH fail the
// fetch, so that its caller refreshes its metadata and retries.
func (w *Workload) fetchFromReplica(c *client, tp models.TopicPartition, li leaderInfo, replica int32, offset int64, done func(next int64, ok bool)) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12) // ≥ 11: a follower serves it
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, w.cfg.FetchMaxWaitMs, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.Topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = tp.Partition, offset, 1<<18
	fp.CurrentLeaderEpoch = li.epoch
	rt.Partitions = append(rt.Partitions, fp)
	req.Topics = append(req.Topics, rt)
	callNs := w.s.NowNs()
	follower := replica != li.leader
	if follower {
		w.followerFetches++
	}
	c.send(replica, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		next, ok := w.handleFetch(c, tp, li, replica, callNs, offset, resp, err)
		if ok || !outOfRange(resp, err) {
			done(next, ok)
			return
		}
		if follower {
			w.followerRetriesOnLeader++
			w.fetchFromReplica(c, tp, li, li.leader, offset, done)
			return
		}
		// Below the log start (DeleteRecords moved it), the consumer moves
		// to the earliest offset, as auto.offset.reset=earliest does; above
		// the log end (an over-budget loss) it keeps its position and
		// retries once the log grows past it.
		w.listEarliest(c, tp, li, func(earliest int64, found bool) {
			if found && earliest > offset {
				w.offsetResets++
				done(earliest, true)
				return
			}
			done(offset, false)
		})
	})
}

// outOfRange reports whether a fetch answer is OFFSET_OUT_OF_RANGE.
func outOfRange(resp kmsg.Response, err error) bool {
	if err != nil {
		return false
	}
	r := resp.(*kmsg.FetchResponse)
	return r.ErrorCode == 0 && len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 &&
		r.Topics[0].Partitions[0].ErrorCode == kerr.OffsetOutOfRange.Code
}

// handleFetch records a successful fetch; it returns the next offset to
// fetch and whether the fetch succeeded.
func (w *Workload) handleFetch(c *client, tp models.TopicPartition, li leaderInfo, replica int32, callNs, fetchOffset int64,
	resp kmsg.Response, err error) (int64, bool) {
	if err != nil {
		return fetchOffset, false
	}
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fetchOffset, false
	}
	rp := r.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		// Stale leader, fenced epoch, storage error, or
		// OFFSET_OUT_OF_RANGE (fetchFrom resolves it): retried.
		return fetchOffset, false
	}
	w.observedHW[tp] = max(w.observedHW[tp], rp.HighWatermark)
	records, decodeErr := decodeRecords(rp.RecordBatches, fetchOffset)
	f := models.Fetch{Client: c.index, TP: tp, LeaderEpoch: li.epoch, Replica: replica, Follower: replica != li.leader,
		FetchOffset: fetchOffset, CallNs: callNs, ReturnNs: w.s.NowNs(), Records: records, HighWatermark: rp.HighWatermark}
	if f.Follower && len(records) > 0 {
		w.followerFetchesRead++
	}
	w.history.Fetches = append(w.history.Fetches, f)
	if decodeErr != nil {
		w.decodeErrors = append(w.decodeErrors, DecodeError{TP: tp, Replica: replica, AtNs: w.s.NowNs(),
			Detail: fmt.Sprintf("client %d fetch %s at %d from %d: %v", c.index, tp, fetchOffset, replica, decodeErr)})
		return fetchOffset, false
	}
	if n := len(records); n > 0 {
		return records[n-1].Offset + 1, true
	}
	return fetchOffset, true
}

// decodeRecords returns the records at or above fromOffset in fetched
// batches, in order. A batch cut short at the end of the response (the
// size limit) is skipped, as clients do.
func decodeRecords(b []byte, fromOffset int64) ([]models.Record, error) {
	var out []models.Record
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			if len(b) < 61 {
				return out, nil // a partial header at the end
			}
			return out, err
		}
		size := int(h.Length) + 12
		if size > len(b) {
			return out, nil
		}
		if _, err := batch.Verify(b[:size]); err != nil {
			// Clients check CRCs (kgo's default): a damaged batch reaching
			// a consumer is reported, never decoded.
			return out, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			return out, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
		}
		if rb.Attributes&0x07 != 0 {
			return out, fmt.Errorf("batch at %d: compressed (attributes %#x), the workload never compresses", h.BaseOffset, rb.Attributes)
		}
		recs, err := DecodeBatchRecords(rb)
		if err != nil {
			return out, err
		}
		for _, r := range recs {
			if r.Offset >= fromOffset {
				out = append(out, r)
			}
		}
		b = b[size:]
	}
	return out, nil
}

// DecodeBatchRecords decodes the records of an uncompressed batch: their
// offsets, values and the batch's leader epoch. The harness uses it to read
// replicas' logs.
func DecodeBatchRecords(rb kmsg.RecordBatch) ([]models.Record, error) {
	out := make([]models.Record, 0, rb.NumRecords)
	raw := rb.Records
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(len(raw)-n) < length {
			return out, fmt.Errorf("batch at %d: record %d: bad length", rb.FirstOffset, i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:n+int(length)]); err != nil {
			return out, fmt.Errorf("batch at %d: record %d: %w", rb.FirstOffset, i, err)
		}
		out = append(out, models.Record{Offset: rb.FirstOffset + int64(rec.OffsetDelta), Value: string(rec.Value),
			LeaderEpoch: rb.PartitionLeaderEpoch})
		raw = raw[n+int(length):]
	}
	return out, nil
}
