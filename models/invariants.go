package models

import (
	"bytes"
	"fmt"
	"sort"
)

// CheckFetchContiguity checks that every fetch returned contiguous, unique
// offsets starting at its fetch offset and below the high watermark it
// reported: consumers see a log without gaps or repeats, and nothing
// uncommitted.
func CheckFetchContiguity(h History) []Violation {
	var out []Violation
	for _, f := range h.Fetches {
		next := f.FetchOffset
		for _, r := range f.Records {
			if r.Offset != next {
				out = append(out, Violation{Check: "contiguity", TP: f.TP, Detail: fmt.Sprintf(
					"client %d fetch at %d (t=%dns): offset %d where %d was due", f.Client, f.FetchOffset, f.CallNs, r.Offset, next)})
				break
			}
			if r.Offset >= f.HighWatermark {
				out = append(out, Violation{Check: "contiguity", TP: f.TP, Detail: fmt.Sprintf(
					"client %d fetch at %d (t=%dns): offset %d at or above the high watermark %d",
					f.Client, f.FetchOffset, f.CallNs, r.Offset, f.HighWatermark)})
				break
			}
			next++
		}
	}
	return out
}

// Restart is one broker restart at AtNs: a new incarnation, whose state (a
// follower's high watermark among it) starts again from what its disk kept.
type Restart struct {
	Node int32
	AtNs int64
}

// CheckHighWatermarks checks the high watermarks followers answered
// consumers with (KIP-392), taking them in the order they returned: the
// one a client sees from one follower never goes backwards within one
// leader epoch, unless that follower restarted in between. A follower's
// HW lags the leader's, so a client alternating between them sees it move
// back and forth; but one follower learns it from the leader's answers, in
// order, and never truncates below it in one epoch (SPEC.md §4.1: it never
// goes back but by truncation). The leaders' HWs, and how followers' bound
// them, are CheckHighWatermarkOrder's (hw.go).
func CheckHighWatermarks(h History, restarts []Restart) []Violation {
	type key struct {
		client  int
		tp      TopicPartition
		epoch   int32
		replica int32
	}
	restarted := func(node int32, fromNs, toNs int64) bool {
		for _, r := range restarts {
			if r.Node == node && r.AtNs > fromNs && r.AtNs < toNs {
				return true
			}
		}
		return false
	}
	var fetches []Fetch
	for _, f := range h.Fetches {
		if f.Follower {
			fetches = append(fetches, f)
		}
	}
	sort.SliceStable(fetches, func(i, j int) bool { return fetches[i].ReturnNs < fetches[j].ReturnNs })
	last := map[key]Fetch{}
	var out []Violation
	for _, f := range fetches {
		k := key{f.Client, f.TP, f.LeaderEpoch, f.Replica}
		if prev, ok := last[k]; ok && f.HighWatermark < prev.HighWatermark && !restarted(f.Replica, prev.CallNs, f.ReturnNs) {
			out = append(out, Violation{Check: "hw-monotonic", TP: f.TP, Detail: fmt.Sprintf(
				"client %d from follower %d in leader epoch %d: high watermark %d at t=%dns after %d at t=%dns",
				f.Client, f.Replica, f.LeaderEpoch, f.HighWatermark, f.ReturnNs, prev.HighWatermark, prev.ReturnNs)})
		}
		last[k] = f
	}
	return out
}

// LeaderSample is what one node believed about one partition at one time:
// its leader in a leader epoch.
type LeaderSample struct {
	AtNs        int64
	Node        int32
	TP          TopicPartition
	LeaderEpoch int32
	Leader      int32
}

// CheckLeaders checks that no partition has two leaders in one leader
// epoch, across every node's samples.
func CheckLeaders(samples []LeaderSample) []Violation {
	type key struct {
		tp    TopicPartition
		epoch int32
	}
	first := map[key]LeaderSample{}
	reported := map[key]bool{}
	var out []Violation
	for _, s := range samples {
		if s.Leader < 0 {
			continue
		}
		k := key{s.TP, s.LeaderEpoch}
		prev, ok := first[k]
		if !ok {
			first[k] = s
			continue
		}
		if prev.Leader != s.Leader && !reported[k] {
			reported[k] = true
			out = append(out, Violation{Check: "one-leader-per-epoch", TP: s.TP, Detail: fmt.Sprintf(
				"leader epoch %d: node %d saw leader %d at t=%dns, node %d saw leader %d at t=%dns",
				s.LeaderEpoch, prev.Node, prev.Leader, prev.AtNs, s.Node, s.Leader, s.AtNs)})
		}
	}
	return out
}

// Batch is one record batch of a replica's log, as stored.
type Batch struct {
	BaseOffset, LastOffset int64
	// Bytes are the batch's bytes exactly as the replica stores them.
	Bytes []byte
	// Records are the batch's records (offset and value).
	Records []Record
}

// ReplicaLog is one replica's log after the run.
type ReplicaLog struct {
	Node int32
	// LogStartOffset is the replica's log start offset: DeleteRecords
	// moves it, and batches below it may or may not still be stored.
	LogStartOffset int64
	Batches        []Batch
}

// PartitionFinal is a partition's state after the liveness phase.
type PartitionFinal struct {
	// Leader is the leader every node agrees on, or -1.
	Leader        int32
	HighWatermark int64
	// LogStartOffset is the leader's log start offset.
	LogStartOffset int64
	// Replicas are the logs of every replica in the assignment.
	Replicas []ReplicaLog
}

// FinalOptions say which guarantees the run must keep.
type FinalOptions struct {
	// LogStartMayRegress names the partitions where crashes the budget
	// does not bound (over the budget, or a shape where every crash goes
	// ahead) may have taken every replica's log start back to its last
	// checkpoint, below a completed DeleteRecords, as in Kafka (the log
	// start offset checkpoint is written periodically).
	LogStartMayRegress map[TopicPartition]bool
	// Held are the records replicas held in the segments they deleted,
	// per partition (the harness gathers them as segments go): an
	// acknowledged record below the final log start must have been held
	// at its offset by some replica up to its deletion.
	Held map[TopicPartition]*HeldRecords
}

// CheckFinal checks the converged cluster: every partition has a leader,
// every replica starts at the leader's log start offset, holds the same
// batches byte for byte from there on and ends at the high watermark, and
// every acks=all-acknowledged record, and every record a fetch returned
// below its high watermark (committed, from a leader or a follower), is at
// its offset; below the log start (which some DeleteRecords asked for) it
// must have been held at its offset by a replica until deleted (in a
// segment a replica deleted, or still stores), and no fetch or ListOffsets
// returned a high watermark above the final one (hw-final: what was
// committed stays committed). Those are losses (Violation.Loss). The log
// start itself must be explained by DeleteRecords: above every offset
// asked for, records vanished from the front; below the low watermark of
// one that completed, the deletion was undone.
func CheckFinal(h History, final map[TopicPartition]PartitionFinal, opts FinalOptions) []Violation {
	var out []Violation
	tps := make([]TopicPartition, 0, len(final))
	for tp := range final { // order-independent: sorted below
		tps = append(tps, tp)
	}
	sortTPs(tps)
	deletes := deletesByTP(h.DeleteRecords)
	logs := map[TopicPartition]*finalLogs{}
	for _, tp := range tps {
		pf := final[tp]
		if pf.Leader < 0 {
			out = append(out, Violation{Check: "convergence", TP: tp, Detail: "no leader after healing"})
		}
		d := deletes[tp]
		fl := &finalLogs{held: opts.Held[tp]}
		switch {
		case pf.LogStartOffset > d.requestedMax:
			out = append(out, Violation{Check: "log-start", TP: tp, Detail: fmt.Sprintf(
				"the log starts at %d, but no DeleteRecords asked for more than %d: records vanished from its front",
				pf.LogStartOffset, d.requestedMax)})
		default:
			fl.deletedBelow = pf.LogStartOffset
		}
		if d.completed && pf.LogStartOffset < d.completedLW && !opts.LogStartMayRegress[tp] {
			out = append(out, Violation{Check: "log-start", TP: tp, Detail: fmt.Sprintf(
				"client %d's DeleteRecords to %d completed with low watermark %d (t=%dns), but the log starts at %d: deleted records came back",
				d.completedBy.Client, d.completedBy.Offset, d.completedLW, d.completedBy.ReturnNs, pf.LogStartOffset)})
		}
		out = append(out, compareReplicas(tp, pf, d.requestedMax)...)
		if len(pf.Replicas) > 0 {
			fl.leader = newLogValues(leaderLog(pf))
			for _, r := range pf.Replicas {
				fl.replicas = append(fl.replicas, newLogValues(r))
			}
		}
		logs[tp] = fl
	}
	for _, p := range h.Produces {
		if p.Acks != -1 || !p.Acked {
			continue
		}
		fl, known := logs[p.TP]
		if !known {
			continue // a partition the run did not inspect (deleted topic)
		}
		for j, v := range p.Values {
			o := p.BaseOffset + int64(j)
			if why := fl.missing(o, v); why != "" {
				out = append(out, Violation{Check: "acked-present", TP: p.TP, Loss: true, Detail: fmt.Sprintf(
					"client %d's acks=all record %s acknowledged at offset %d (t=%dns) but %s",
					p.Client, v, o, p.ReturnNs, why)})
			}
		}
	}
	hwFinal := func(tp TopicPartition, hw int64, what string) {
		if pf, known := final[tp]; known && hw > pf.HighWatermark {
			out = append(out, Violation{Check: "hw-final", TP: tp, Loss: true, Detail: fmt.Sprintf(
				"%s returned high watermark %d, above the final high watermark %d: it counted uncommitted records",
				what, hw, pf.HighWatermark)})
		}
	}
	for _, l := range h.ListOffsets {
		hwFinal(l.TP, l.HighWatermark, fmt.Sprintf("client %d's ListOffsets from leader %d (t=%dns)", l.Client, l.Replica, l.ReturnNs))
	}
	for _, f := range h.Fetches {
		fl, known := logs[f.TP]
		if !known {
			continue
		}
		hwFinal(f.TP, f.HighWatermark, fmt.Sprintf("client %d's fetch from %s (t=%dns)", f.Client, f.answeredBy(), f.ReturnNs))
		for _, r := range f.Records {
			if r.Offset >= f.HighWatermark {
				continue // above the HW is contiguity's
			}
			if why := fl.missing(r.Offset, r.Value); why != "" {
				out = append(out, Violation{Check: "fetched-present", TP: f.TP, Loss: true, Detail: fmt.Sprintf(
					"client %d read %s at offset %d below the high watermark %d from %s (t=%dns) but %s: it was not committed",
					f.Client, r.Value, r.Offset, f.HighWatermark, f.answeredBy(), f.ReturnNs, why)})
				break
			}
		}
	}
	return out
}

// finalLogs are one partition's final logs, for the presence checks.
type finalLogs struct {
	leader   logValues
	replicas []logValues
	// deletedBelow is the log start below which records may have been
	// deleted (0 when the log start is itself a violation).
	deletedBelow int64
	held         *HeldRecords
}

// missing returns "" when value is where it must be at offset: in the
// leader's log at or above the log start; below it, held there by some
// replica until deleted (still stored, or in a segment it deleted).
// Otherwise it says what is there instead.
func (fl *finalLogs) missing(offset int64, value string) string {
	got := fl.leader.at(offset)
	if offset >= fl.deletedBelow || got == value {
		if got == value {
			return ""
		}
		return fmt.Sprintf("the log holds %q there", got)
	}
	for _, r := range fl.replicas {
		if r.at(offset) == value {
			return ""
		}
	}
	if fl.held.Held(offset, value) {
		return ""
	}
	return fmt.Sprintf("no replica held it there up to its deletion below the log start %d", fl.deletedBelow)
}

// HeldRecords are the records replicas of one partition held in the
// segments they deleted: by offset, every value some replica held there.
// The zero value is empty; a nil one holds nothing.
type HeldRecords struct {
	first  []string // first value held, by offset (dense: logs start at 0)
	others map[int64][]string
}

// Add records that a replica held value at offset.
func (hr *HeldRecords) Add(offset int64, value string) {
	if offset >= 0 && offset < denseOffsetsMax {
		if offset >= int64(len(hr.first)) {
			grown := make([]string, min(max(offset+1, 2*int64(len(hr.first)), 1024), denseOffsetsMax))
			copy(grown, hr.first)
			hr.first = grown
		}
		switch hr.first[offset] {
		case "":
			hr.first[offset] = value
			return
		case value:
			return
		}
	}
	if containsString(hr.others[offset], value) {
		return
	}
	if hr.others == nil {
		hr.others = map[int64][]string{}
	}
	hr.others[offset] = append(hr.others[offset], value)
}

// Held reports whether some replica held value at offset.
func (hr *HeldRecords) Held(offset int64, value string) bool {
	if hr == nil {
		return false
	}
	if offset >= 0 && offset < int64(len(hr.first)) && hr.first[offset] == value {
		return true
	}
	return containsString(hr.others[offset], value)
}

// logValues are the values of a replica's log by offset: a slice from the
// first batch's base offset, and a map for records outside the batches'
// ranges (a log whose record offsets disagree with its batch headers).
type logValues struct {
	base   int64
	values []string
	others map[int64]string
}

func newLogValues(r ReplicaLog) logValues {
	var lv logValues
	if len(r.Batches) == 0 {
		return lv
	}
	lv.base = r.Batches[0].BaseOffset
	span := logEnd(r) - lv.base
	if span < 0 || span > denseOffsetsMax {
		span = 0
	}
	lv.values = make([]string, span)
	for _, b := range r.Batches {
		for _, rec := range b.Records {
			if i := rec.Offset - lv.base; i >= 0 && i < span {
				lv.values[i] = rec.Value
				continue
			}
			if lv.others == nil {
				lv.others = map[int64]string{}
			}
			lv.others[rec.Offset] = rec.Value
		}
	}
	return lv
}

// at returns the value at offset, "" if none.
func (lv logValues) at(offset int64) string {
	if i := offset - lv.base; i >= 0 && i < int64(len(lv.values)) {
		return lv.values[i]
	}
	return lv.others[offset]
}

// compareReplicas checks that every replica's log starts at or above the
// leader's log start offset (above: a former leader may have moved its own
// for a DeleteRecords that never completed, but not past any offset asked
// for, requestedMax), holds the same batches byte for byte as the leader
// from the one holding the higher of the two on (a replica may still store
// batches below its log start, or not), and ends at the high watermark.
func compareReplicas(tp TopicPartition, pf PartitionFinal, requestedMax int64) []Violation {
	var out []Violation
	if len(pf.Replicas) == 0 {
		return []Violation{{Check: "convergence", TP: tp, Detail: "no replica logs"}}
	}
	ref := leaderLog(pf)
	for _, r := range pf.Replicas {
		end := logEnd(r)
		if end != pf.HighWatermark {
			out = append(out, Violation{Check: "convergence", TP: tp, Detail: fmt.Sprintf(
				"replica %d ends at %d, high watermark is %d", r.Node, end, pf.HighWatermark)})
		}
		if r.LogStartOffset < pf.LogStartOffset || (r.LogStartOffset > pf.LogStartOffset && r.LogStartOffset > requestedMax) {
			out = append(out, Violation{Check: "log-start", TP: tp, Detail: fmt.Sprintf(
				"replica %d's log starts at %d, the leader's (%d) at %d, and no DeleteRecords asked for more than %d",
				r.Node, r.LogStartOffset, pf.Leader, pf.LogStartOffset, requestedMax)})
		}
		if r.Node == ref.Node {
			continue
		}
		from := max(r.LogStartOffset, pf.LogStartOffset)
		if d := firstDifference(fromOffset(ref, from), fromOffset(r, from)); d != "" {
			out = append(out, Violation{Check: "replicas-identical", TP: tp, Detail: d})
		}
	}
	return out
}

// logEnd is one past the replica's last offset: its log start offset when
// it holds no batch (a log restarted empty there).
func logEnd(r ReplicaLog) int64 {
	if len(r.Batches) == 0 {
		return r.LogStartOffset
	}
	return r.Batches[len(r.Batches)-1].LastOffset + 1
}

// leaderLog is the leader's replica of pf (the first replica if none is):
// the reference the others are compared with, and the one that holds
// every record from the log start on.
func leaderLog(pf PartitionFinal) ReplicaLog {
	for _, r := range pf.Replicas {
		if r.Node == pf.Leader {
			return r
		}
	}
	return pf.Replicas[0]
}

// fromOffset is r without the batches wholly below offset.
func fromOffset(r ReplicaLog, offset int64) ReplicaLog {
	for i, b := range r.Batches {
		if b.LastOffset >= offset {
			r.Batches = r.Batches[i:]
			return r
		}
	}
	r.Batches = nil
	return r
}

// partitionDeletes sums up one partition's DeleteRecords requests.
type partitionDeletes struct {
	// requestedMax is the highest offset any request asked for, answered
	// or not (0 if none).
	requestedMax int64
	// completed: some request completed; completedLW is the highest low
	// watermark answered, completedBy that request.
	completed   bool
	completedLW int64
	completedBy DeleteRecords
}

func deletesByTP(ops []DeleteRecords) map[TopicPartition]partitionDeletes {
	out := map[TopicPartition]partitionDeletes{}
	for _, op := range ops {
		d := out[op.TP]
		d.requestedMax = max(d.requestedMax, op.Offset)
		if op.Completed && (!d.completed || op.LowWatermark > d.completedLW) {
			d.completed, d.completedLW, d.completedBy = true, op.LowWatermark, op
		}
		out[op.TP] = d
	}
	return out
}

// CheckDeleteRecords checks the DeleteRecords answers themselves: one that
// completed answered a low watermark at or above the offset it asked for
// (Kafka's DelayedDeleteRecords answers only once the low watermark has
// reached it).
func CheckDeleteRecords(h History) []Violation {
	var out []Violation
	for _, op := range h.DeleteRecords {
		if op.Completed && op.LowWatermark < op.Offset {
			out = append(out, Violation{Check: "delete-records", TP: op.TP, Detail: fmt.Sprintf(
				"client %d's DeleteRecords to %d (t=%dns) completed with low watermark %d, below it",
				op.Client, op.Offset, op.ReturnNs, op.LowWatermark)})
		}
	}
	return out
}

// firstDifference describes where two replicas' logs first differ, or
// returns "".
func firstDifference(a, b ReplicaLog) string {
	for i := 0; i < len(a.Batches) && i < len(b.Batches); i++ {
		x, y := a.Batches[i], b.Batches[i]
		if !bytes.Equal(x.Bytes, y.Bytes) {
			return fmt.Sprintf("replicas %d and %d differ in batch %d (offsets %d..%d vs %d..%d)",
				a.Node, b.Node, i, x.BaseOffset, x.LastOffset, y.BaseOffset, y.LastOffset)
		}
	}
	if len(a.Batches) != len(b.Batches) {
		return fmt.Sprintf("replica %d has %d batches, replica %d has %d", a.Node, len(a.Batches), b.Node, len(b.Batches))
	}
	return ""
}
