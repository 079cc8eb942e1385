package workload

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// ProbeProduce is the liveness phase's check that every partition accepts
// acks=all writes again: the admin client produces one record to each
// partition, retrying every error until it is acknowledged or deadlineNs
// (virtual time) passes, then calls done with the partitions that never
// acknowledged. The probes are recorded in the history like any produce.
func (w *Workload) ProbeProduce(deadlineNs int64, done func(unacked []models.TopicPartition)) {
	tps := w.Partitions()
	acked := make([]bool, len(tps))
	remaining := len(tps)
	finish := func() {
		var unacked []models.TopicPartition
		for i, tp := range tps {
			if !acked[i] {
				unacked = append(unacked, tp)
			}
		}
		done(unacked)
	}
	for i, tp := range tps {
		value := fmt.Sprintf("probe%d-%s-%d", w.admin.index, tp.Topic, tp.Partition)
		var try func()
		try = func() {
			if w.s.NowNs() >= deadlineNs {
				remaining--
				if remaining == 0 {
					finish()
				}
				return
			}
			expired := func() bool { return false }
			w.admin.withLeader(tp, expired, func(li leaderInfo) {
				w.produce(w.admin, -1, tp, li.leader, []string{value}, nil, func(op models.Produce, _ int16, _ bool) {
					if !op.Acked {
						w.admin.forgetLeader(tp)
						w.admin.proc.After(w.cfg.BackoffNs, try)
						return
					}
					acked[i] = true
					remaining--
					if remaining == 0 {
						finish()
					}
				})
			})
		}
		try()
	}
}

// LeaderView is what a partition's leader answered to a fetch probe.
type LeaderView struct {
	Leader, LeaderEpoch int32
	HighWatermark       int64
	// OK: the leader answered without error.
	OK bool
}

// ProbeHighWatermarks asks each partition's leader (fresh metadata first)
// for its high watermark with ListOffsets (timestamp -1, latest: the HW,
// which is also the LSO without transactions), records the answers like
// the monitor's, and calls done with them, indexed like Partitions. (A fetch at offset 0 would be out of
// range once DeleteRecords moved the log start.)
func (w *Workload) ProbeHighWatermarks(done func([]LeaderView)) {
	tps := w.Partitions()
	views := make([]LeaderView, len(tps))
	w.admin.refreshMetadata(func() {
		remaining := len(tps)
		for i, tp := range tps {
			li, ok := w.admin.leaders[tp]
			if !ok {
				remaining--
				if remaining == 0 {
					done(views)
				}
				continue
			}
			req := listOffsetsRequest(tp, li.epoch, -1)
			callNs := w.s.NowNs()
			w.admin.send(li.leader, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
				if code, offset := listOffsetsAnswer(resp, err); code == 0 {
					views[i] = LeaderView{Leader: li.leader, LeaderEpoch: li.epoch, HighWatermark: offset, OK: true}
					w.recordListOffsets(w.admin, tp, li, callNs, offset)
				}
				remaining--
				if remaining == 0 {
					done(views)
				}
			})
		}
	})
}
