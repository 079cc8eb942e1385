package workload

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// DeleteRecords: the deleter client moves a random partition's log start up
// to an offset at or below a high watermark the consumers saw, as an
// operator or a retention tool would, every DeleteIntervalNs on average
// while producers run, and once more on every partition when they stop
// (FinalDeleteRound), so that the log start moves with nothing produced
// after it. Every request is recorded in the history
// (models.DeleteRecords) for CheckFinal, which counts records below the
// final log start as deleted, not lost. Consumers that fall below the log
// start are answered OFFSET_OUT_OF_RANGE and move to the earliest offset
// (fetchFrom), as a consumer with auto.offset.reset=earliest does.

// deleteTimeoutMs is the DeleteRecords request's TimeoutMillis: how long the
// leader waits for its low watermark to reach the offset.
const deleteTimeoutMs = 2000

// startDeletes begins the deleter's loop, if the run deletes.
func (w *Workload) startDeletes() {
	if w.deleter != nil {
		w.scheduleDelete()
	}
}

func (w *Workload) scheduleDelete() {
	interval := w.cfg.DeleteIntervalNs
	w.deleter.proc.After(interval/2+w.cfg.DeleteRand.Int64N(interval+1), func() {
		if w.stopped {
			return
		}
		w.scheduleDelete()
		tp := w.tps[w.cfg.DeleteRand.IntN(len(w.tps))]
		if offset, ok := w.drawDeleteOffset(tp); ok {
			w.deleteRecords(tp, offset, func() bool { return w.stopped }, nil)
		}
	})
}

// drawDeleteOffset draws an offset above the highest one asked for so far
// and at or below the highest HW a fetch of tp returned; false if there is
// none.
func (w *Workload) drawDeleteOffset(tp models.TopicPartition) (int64, bool) {
	hw, floor := w.observedHW[tp], w.deleteFloor[tp]
	if hw <= floor {
		return 0, false
	}
	return floor + 1 + w.cfg.DeleteRand.Int64N(hw-floor), true
}

// FinalDeleteRound deletes once more on every partition that has grown
// since its last DeleteRecords, once producers have stopped, and calls done
// when every request is answered or deadlineNs (virtual time) has passed.
// It does nothing in a run without deletes. Nothing is produced after it
// before the harness's quiet check, so a follower that does not learn the
// new log start keeps an old one.
func (w *Workload) FinalDeleteRound(deadlineNs int64, done func()) {
	finished := false
	finish := func() {
		if !finished {
			finished = true
			done()
		}
	}
	if w.deleter == nil {
		w.s.After(0, finish)
		return
	}
	remaining := 1 // released below, once every request is sent
	answered := func() {
		if remaining--; remaining == 0 {
			finish()
		}
	}
	expired := func() bool { return w.s.NowNs() >= deadlineNs }
	for _, tp := range w.tps {
		offset, ok := w.drawDeleteOffset(tp)
		if !ok {
			continue
		}
		remaining++
		w.deleteRecords(tp, offset, expired, answered)
	}
	answered()
	w.deleter.proc.After(max(deadlineNs-w.s.NowNs(), 0), finish)
}

// DeleteAtLogStart asks each partition's leader to delete up to offsets[i],
// retrying every error until an answer without one or deadlineNs, and calls
// done with whether each completed: the harness's check that a DeleteRecords
// low watermark is reachable. The requests are recorded like any other.
func (w *Workload) DeleteAtLogStart(offsets []int64, deadlineNs int64, done func(completed []bool)) {
	tps := w.Partitions()
	c := w.admin
	completed := make([]bool, len(tps))
	remaining := len(tps)
	finished := false
	finish := func() {
		if !finished {
			finished = true
			done(completed)
		}
	}
	release := func() {
		if remaining--; remaining == 0 {
			finish()
		}
	}
	expired := func() bool { return finished || w.s.NowNs() >= deadlineNs }
	c.proc.After(max(deadlineNs-w.s.NowNs(), 0), finish)
	for i, tp := range tps {
		var try func()
		try = func() {
			if expired() {
				release()
				return
			}
			w.sendDeleteRecords(c, tp, offsets[i], expired, func(op models.DeleteRecords) {
				if op.Completed {
					completed[i] = true
					release()
					return
				}
				c.proc.After(w.cfg.BackoffNs, try)
			})
		}
		try()
	}
}

// deleteRecords sends the deleter's DeleteRecords of tp up to offset to
// the leader, unless stopped first; answered (if set) runs once the request
// is answered, failed or given up.
func (w *Workload) deleteRecords(tp models.TopicPartition, offset int64, stopped func() bool, answered func()) {
	w.deleteFloor[tp] = max(w.deleteFloor[tp], offset)
	if stopped() {
		if answered != nil {
			answered()
		}
		return
	}
	w.sendDeleteRecords(w.deleter, tp, offset, stopped, func(models.DeleteRecords) {
		if answered != nil {
			answered()
		}
	})
}

// sendDeleteRecords sends one DeleteRecords of tp up to offset from c to
// the leader its metadata names (looked up first if need be, until
// stopped), records it, and calls done with the recorded operation; done
// is not called if stopped before the request is sent.
func (w *Workload) sendDeleteRecords(c *client, tp models.TopicPartition, offset int64, stopped func() bool,
	done func(models.DeleteRecords)) {
	c.withLeader(tp, stopped, func(li leaderInfo) {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(2)
		req.TimeoutMillis = deleteTimeoutMs
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.Partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		op := models.DeleteRecords{Client: c.index, TP: tp, Offset: offset, CallNs: w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
		c.send(li.leader, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			if err != errTimedOut {
				op.ReturnNs = w.s.NowNs()
			}
			code := kerr.UnknownServerError.Code
			if err == nil {
				r := resp.(*kmsg.DeleteRecordsResponse)
				if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
					code = r.Topics[0].Partitions[0].ErrorCode
					op.LowWatermark = r.Topics[0].Partitions[0].LowWatermark
				}
			}
			op.Completed = code == 0
			if code == kerr.NotLeaderForPartition.Code || code == kerr.UnknownTopicOrPartition.Code || err != nil {
				c.forgetLeader(tp)
			}
			w.history.DeleteRecords = append(w.history.DeleteRecords, op)
			done(op)
		})
	})
}

// listOffsetsRequest is a consumer's ListOffsets v7 for tp at timestamp
// (-1 latest, -2 earliest), fenced by the leader epoch the client knows.
func listOffsetsRequest(tp models.TopicPartition, leaderEpoch int32, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = tp.Partition, leaderEpoch, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// listEarliest asks tp's leader for its log start offset (ListOffsets,
// timestamp -2); found is false on any error.
func (w *Workload) listEarliest(c *client, tp models.TopicPartition, li leaderInfo, done func(offset int64, found bool)) {
	req := listOffsetsRequest(tp, li.epoch, -2)
	c.send(li.leader, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err != nil {
			done(0, false)
			return
		}
		r := resp.(*kmsg.ListOffsetsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			done(0, false)
			return
		}
		done(r.Topics[0].Partitions[0].Offset, true)
	})
}
