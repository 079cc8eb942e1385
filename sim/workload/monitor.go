package workload

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// The lag monitor: a client that asks every partition's leader for its
// latest offset (ListOffsets, timestamp -1: the HW) every
// Config.ListOffsetsIntervalNs, as a consumer-lag exporter does, and records
// every answer without an error (models.History.ListOffsets) for the HW
// model. It asks about one partition once at a time: a round skips a
// partition whose last request is still out, so that a stalled leader does
// not collect a pile of requests answered at once. Kafka answers OFFSET_NOT_AVAILABLE instead while a new leader's HW
// lags the start of its epoch (KIP-207), so these answers, unlike a
// Fetch's, must never show an HW below one committed before. The monitor
// draws only from its own stream (Config.ListOffsetsRand), so it
// reshuffles no other client's draws.

// startMonitor begins the monitor's rounds, if the run has one.
func (w *Workload) startMonitor() {
	if w.monitor == nil {
		return
	}
	w.monitorAsking = make([]bool, len(w.tps))
	var round func()
	round = func() {
		if w.stopped {
			return
		}
		for i, tp := range w.tps {
			if !w.monitorAsking[i] {
				w.monitorAsking[i] = true
				w.listLatest(w.monitor, tp, func() { w.monitorAsking[i] = false })
			}
		}
		interval := w.cfg.ListOffsetsIntervalNs
		w.monitor.proc.After(interval/2+w.cfg.ListOffsetsRand.Int64N(interval+1), round)
	}
	round()
}

// listLatest asks tp's leader, as c's metadata names it, for its latest
// offset, records an answer without an error, and then calls done (not
// called if the workload stops before the request is sent). An answer
// naming stale metadata makes c forget the leader; OFFSET_NOT_AVAILABLE (a
// new leader that has not committed in its epoch) is only counted.
func (w *Workload) listLatest(c *client, tp models.TopicPartition, done func()) {
	c.withLeader(tp, func() bool { return w.stopped }, func(li leaderInfo) {
		callNs := w.s.NowNs()
		c.send(li.leader, listOffsetsRequest(tp, li.epoch, -1), w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			defer done()
			code, offset := listOffsetsAnswer(resp, err)
			switch code {
			case 0:
				w.recordListOffsets(c, tp, li, callNs, offset)
			case kerr.OffsetNotAvailable.Code:
				w.offsetsNotAvailable++
			default:
				c.forgetLeader(tp)
			}
		})
	})
}

// listOffsetsAnswer is the error code and offset of a one-partition
// ListOffsets answer; UNKNOWN_SERVER_ERROR if there is none.
func listOffsetsAnswer(resp kmsg.Response, err error) (int16, int64) {
	if err != nil {
		return kerr.UnknownServerError.Code, -1
	}
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code, -1
	}
	p := r.Topics[0].Partitions[0]
	return p.ErrorCode, p.Offset
}

// recordListOffsets records a ListOffsets latest answer of li's leader.
func (w *Workload) recordListOffsets(c *client, tp models.TopicPartition, li leaderInfo, callNs, hw int64) {
	w.history.ListOffsets = append(w.history.ListOffsets, models.ListOffsets{Client: c.index, TP: tp,
		LeaderEpoch: li.epoch, Replica: li.leader, CallNs: callNs, ReturnNs: w.s.NowNs(), HighWatermark: hw})
}
