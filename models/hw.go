package models

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The high watermark as clients observe it (SPEC.md §4.2, "The high
// watermark clients see"), checked for linearizability with Porcupine.
//
// Every answer that carries a partition's HW is an observation of one
// replica's HW at one instant between its call and its return: a Fetch
// (records or none), a ListOffsets for the latest offset, and an acks=all
// Produce acknowledged through offset o, which says the leader's HW had
// passed o. Kafka orders them so:
//   - within one leader epoch, the leader's HW never goes back: an answer
//     from the leader of epoch E called after another answer of epoch E
//     returned shows an HW at least as high, and at least one past every
//     acks=all offset acknowledged in E before it was called;
//   - across epochs, only for what was committed: once the leader of E has
//     committed in E (its HW has reached the start offset of E), its HW is
//     at least every HW shown, and one past every acks=all offset
//     acknowledged, in an earlier epoch or by a follower of E, before the
//     answer was called. Before that a Fetch may show the leader's lagging
//     HW; a ListOffsets must not (KIP-207: OFFSET_NOT_AVAILABLE), so a
//     ListOffsets answer is always held to the cross-epoch rule;
//   - a follower's HW (KIP-392) lags the leader's: a follower's answer is
//     not bounded below by anything other clients saw, but what it shows
//     is committed, so it bounds later answers of committed leaders.
//
// Over the fault budget a partition may lose committed records, so the
// cross-epoch rule and acknowledged offsets do not apply there; the leader
// of one epoch still never lowers its HW.
//
// The model: one Porcupine history per (partition, leader epoch E) holding
// E's leader answers (checks), E's acknowledged produces, and, as sources
// for committed answers only, the answers and acknowledgements of earlier
// epochs and of E's followers. Its state is two floors: what E's leader
// showed or acknowledged (same), and what anyone showed that E's committed
// answers must reach (all). The whole log is never one state, and every
// operation in it returned (a fetch or produce without an answer observes
// nothing), so no operation has an infinite return time.

// ListOffsets is one ListOffsets answer for a partition's latest offset
// (timestamp -1): the HW of the leader that answered.
type ListOffsets struct {
	Client int
	TP     TopicPartition
	// LeaderEpoch is the CurrentLeaderEpoch the client sent; an answer
	// without an error comes from the leader in exactly that epoch.
	LeaderEpoch      int32
	Replica          int32
	CallNs, ReturnNs int64
	HighWatermark    int64
}

// EpochStart is where a leader epoch of a partition starts: the leader's
// log end offset when it took the epoch (Kafka's leaderEpochStartOffsetOpt).
// The harness samples it from the leaders; an epoch without one is never
// taken as committed from a Fetch answer (the check is then weaker, never
// wrong).
type EpochStart struct {
	TP          TopicPartition
	LeaderEpoch int32
	StartOffset int64
}

// HWOptions bound and feed the HW check.
type HWOptions struct {
	// EpochStarts are the leader epochs' start offsets the harness saw.
	EpochStarts []EpochStart
	// OverBudget names the partitions whose fault budget was exceeded.
	OverBudget map[TopicPartition]bool
	// Final, if set, is the converged cluster: its logs name the leader
	// epoch of acknowledged batches no fetch read.
	Final map[TopicPartition]PartitionFinal
	// Timeout bounds Porcupine per (partition, epoch); Unknown is a
	// violation. Zero means 10 s.
	Timeout time.Duration
	// HTMLDir, if set, receives a visualization of every (partition,
	// epoch) that fails: hw-<topic>-<partition>-epoch-<E>.html.
	HTMLDir string
	// Porcupine runs Porcupine over every (partition, epoch), not only
	// over those the direct decision rejects; a disagreement is a
	// violation.
	Porcupine bool
}

// hwKind is what an operation of the HW model is.
type hwKind uint8

const (
	// hwAck: an acks=all produce acknowledged in this epoch, through
	// value-1. It raises both floors.
	hwAck hwKind = iota
	// hwLeaderRead: an answer of this epoch's leader showing HW value:
	// checked against the floors, and raising them.
	hwLeaderRead
	// hwEarlier: an answer or acknowledgement of an earlier epoch, or an
	// answer of a follower in this epoch: it raises only the floor
	// committed answers must reach.
	hwEarlier
)

// hwInput is one operation of the HW model.
type hwInput struct {
	kind  hwKind
	value int64
	// committed: a leader read that must reach every earlier observation
	// (its HW reached the epoch's start offset, or it is a ListOffsets
	// answer), and why.
	committed    bool
	committedWhy string
	// what describes the operation for reports and visualizations.
	what hwOrigin
}

// hwOrigin is what an operation of the HW model was, kept as values and
// turned into words only for a report or a visualization (most histories
// pass, and formatting every operation cost more than checking it).
type hwOrigin struct {
	// source is "fetch", "list" (ListOffsets), "produce", or "" for the
	// highest of the observations before an epoch's first answer (then
	// earlier describes it).
	source           string
	client           int
	replica, epoch   int32
	follower         bool
	offset, last     int64 // a fetch's offset; a produce's first and last offsets
	callNs, returnNs int64
	earlier          *hwOrigin
}

func (o hwOrigin) String() string {
	switch o.source {
	case "fetch":
		from := fmt.Sprintf("leader %d", o.replica)
		if o.follower {
			from = fmt.Sprintf("follower %d", o.replica)
		}
		return fmt.Sprintf("client %d's fetch at %d from %s in epoch %d, t=%d..%dns", o.client, o.offset, from, o.epoch, o.callNs, o.returnNs)
	case "list":
		return fmt.Sprintf("client %d's ListOffsets latest from leader %d in epoch %d, t=%d..%dns", o.client, o.replica, o.epoch, o.callNs, o.returnNs)
	case "produce":
		return fmt.Sprintf("client %d's acks=all produce of %d..%d in epoch %d, t=%d..%dns", o.client, o.offset, o.last, o.epoch, o.callNs, o.returnNs)
	}
	return "the highest observation before this epoch's first answer: " + o.earlier.String()
}

// hwState is the model's state: the floor this epoch's leader showed or
// acknowledged, and the floor committed answers must reach.
type hwState struct{ same, all int64 }

var hwModel = porcupine.Model{
	Init: func() interface{} { return hwState{} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, in := state.(hwState), input.(hwInput)
		switch in.kind {
		case hwAck:
			return true, hwState{max(s.same, in.value), max(s.all, in.value)}
		case hwEarlier:
			return true, hwState{s.same, max(s.all, in.value)}
		}
		ok := in.value >= s.same && (!in.committed || in.value >= s.all)
		return ok, hwState{in.value, max(s.all, in.value)}
	},
	Equal: func(a, b interface{}) bool { return a.(hwState) == b.(hwState) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(hwInput)
		switch in.kind {
		case hwAck:
			return fmt.Sprintf("acked to %d: %s", in.value, in.what)
		case hwEarlier:
			return fmt.Sprintf("HW ≥ %d earlier: %s", in.value, in.what)
		}
		if in.committed {
			return fmt.Sprintf("HW %d (committed): %s", in.value, in.what)
		}
		return fmt.Sprintf("HW %d: %s", in.value, in.what)
	},
	DescribeState: func(state interface{}) string {
		s := state.(hwState)
		return fmt.Sprintf("leader floor %d, committed floor %d", s.same, s.all)
	},
}

// hwOp is one operation with its client and times.
type hwOp struct {
	in        hwInput
	client    int
	call, ret int64
	epoch     int32
}

// porcupine is the operation as Porcupine checks it. An acknowledgement
// or earlier observation is checked as an instant at its return: it only
// raises floors, so placing it any earlier can only make more answers
// violate them (decideHW's argument), and the same histories are
// linearizable; but the many produces in flight at once would otherwise
// make Porcupine try every order of them.
func (o hwOp) porcupine() porcupine.Operation {
	call := o.call
	if o.in.kind != hwLeaderRead {
		call = o.ret
	}
	return porcupine.Operation{ClientId: o.client, Input: o.in, Call: call, Return: o.ret}
}

// hwEpochKey names one history of the model.
type hwEpochKey struct {
	tp    TopicPartition
	epoch int32
}

// CheckHighWatermarkOrder checks every HW clients saw against the order
// described at the top of this file. Each (partition, epoch) is decided
// directly (decideHW, exact for this model); Porcupine confirms and draws
// every rejected one, and checks every one when opts.Porcupine is set. It
// returns the violations and the visualizations written.
func CheckHighWatermarkOrder(h History, opts HWOptions) ([]Violation, []string) {
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	histories := hwHistories(h, opts)
	keys := make([]hwEpochKey, 0, len(histories))
	for k := range histories { // order-independent: sorted below
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.tp != b.tp {
			return a.tp.Topic < b.tp.Topic || (a.tp.Topic == b.tp.Topic && a.tp.Partition < b.tp.Partition)
		}
		return a.epoch < b.epoch
	})
	var violations []Violation
	var html []string
	for _, k := range keys {
		ops := histories[k]
		direct := decideHW(ops)
		if direct == "" && !opts.Porcupine {
			continue
		}
		pops := make([]porcupine.Operation, len(ops))
		for i, o := range ops {
			pops[i] = o.porcupine()
		}
		result, info := porcupine.CheckOperationsVerbose(hwModel, pops, opts.Timeout)
		var detail string
		switch {
		case result == porcupine.Unknown:
			detail = fmt.Sprintf("leader epoch %d: Porcupine timed out after %v (counted as a failure)", k.epoch, opts.Timeout)
			if direct != "" {
				detail += "; the direct decision: " + direct
			}
		case direct != "" && result == porcupine.Illegal:
			detail = fmt.Sprintf("leader epoch %d: %s", k.epoch, direct)
		case direct != "":
			detail = fmt.Sprintf("leader epoch %d: the checkers disagree: the direct decision finds %s, Porcupine a linearization", k.epoch, direct)
		case result == porcupine.Illegal:
			detail = fmt.Sprintf("leader epoch %d: the checkers disagree: Porcupine finds no linearization, the direct decision accepts", k.epoch)
		default:
			continue
		}
		violations = append(violations, Violation{Check: "hw-linearizability", TP: k.tp, Detail: detail})
		if opts.HTMLDir == "" {
			continue
		}
		p := filepath.Join(opts.HTMLDir, fmt.Sprintf("hw-%s-%d-epoch-%d.html", k.tp.Topic, k.tp.Partition, k.epoch))
		if err := porcupine.VisualizePath(hwModel, info, p); err != nil {
			violations = append(violations, Violation{Check: "hw-linearizability", TP: k.tp, Detail: "writing visualization: " + err.Error()})
			continue
		}
		html = append(html, p)
	}
	return violations, html
}

// hwSource is an observation that raises a floor: its value, when it
// returned, its epoch, and whether it is a follower's (a source only for
// its own epoch's committed answers and later ones, never for its
// epoch's leader floor).
type hwSource struct {
	op       hwOp
	follower bool
	// laterOnly: an acknowledgement that may come from a later epoch than
	// its batch's (an idempotent retry, answered by whichever leader holds
	// the first append): a source for later epochs only.
	laterOnly bool
}

// hwHistories builds the model's histories, one per (partition, epoch)
// whose leader answered a client.
func hwHistories(h History, opts HWOptions) map[hwEpochKey][]hwOp {
	starts := map[hwEpochKey]int64{}
	for _, s := range opts.EpochStarts {
		starts[hwEpochKey{s.TP, s.LeaderEpoch}] = s.StartOffset
	}
	committed := func(tp TopicPartition, epoch int32, hw int64) bool {
		start, known := starts[hwEpochKey{tp, epoch}]
		return known && hw >= start
	}
	byTP := map[TopicPartition][]hwSource{}
	for _, f := range h.Fetches {
		kind := hwLeaderRead
		if f.Follower {
			kind = hwEarlier
		}
		op := hwOp{client: f.Client, call: f.CallNs, ret: f.ReturnNs, epoch: f.LeaderEpoch, in: hwInput{
			kind: kind, value: f.HighWatermark, committed: !f.Follower && committed(f.TP, f.LeaderEpoch, f.HighWatermark),
			committedWhy: "its HW has reached the start of its epoch",
			what: hwOrigin{source: "fetch", client: f.Client, replica: f.Replica, epoch: f.LeaderEpoch, follower: f.Follower,
				offset: f.FetchOffset, callNs: f.CallNs, returnNs: f.ReturnNs}}}
		byTP[f.TP] = append(byTP[f.TP], hwSource{op: op, follower: f.Follower})
	}
	for _, l := range h.ListOffsets {
		op := hwOp{client: l.Client, call: l.CallNs, ret: l.ReturnNs, epoch: l.LeaderEpoch, in: hwInput{
			kind: hwLeaderRead, value: l.HighWatermark, committed: true,
			committedWhy: "ListOffsets never answers a lagging HW (KIP-207)",
			what:         hwOrigin{source: "list", client: l.Client, replica: l.Replica, epoch: l.LeaderEpoch, callNs: l.CallNs, returnNs: l.ReturnNs}}}
		byTP[l.TP] = append(byTP[l.TP], hwSource{op: op})
	}
	epochs := ackEpochs(h, opts.Final)
	for i, p := range h.Produces {
		epoch, known := epochs[i]
		if !known || opts.OverBudget[p.TP] {
			continue
		}
		last := p.BaseOffset + int64(len(p.Values)) - 1
		op := hwOp{client: p.Client, call: p.CallNs, ret: p.ReturnNs, epoch: epoch, in: hwInput{
			kind: hwAck, value: last + 1,
			what: hwOrigin{source: "produce", client: p.Client, epoch: epoch, offset: p.BaseOffset, last: last, callNs: p.CallNs, returnNs: p.ReturnNs}}}
		byTP[p.TP] = append(byTP[p.TP], hwSource{op: op, laterOnly: p.Idempotent})
	}
	out := map[hwEpochKey][]hwOp{}
	for tp, sources := range byTP { // order-independent: one entry per partition, each built alone
		overBudget := opts.OverBudget[tp]
		for k, ops := range epochHistories(tp, sources, overBudget) { // order-independent: distinct keys
			out[k] = ops
		}
	}
	return out
}

// epochHistories splits one partition's observations into the model's
// histories, one per epoch whose leader answered. Over budget, leader
// answers are held to their own epoch only.
func epochHistories(tp TopicPartition, sources []hwSource, overBudget bool) map[hwEpochKey][]hwOp {
	sort.SliceStable(sources, func(i, j int) bool { return sources[i].op.ret < sources[j].op.ret })
	checked := map[int32]int64{} // epochs with leader answers → their first call
	for _, s := range sources {
		if s.op.in.kind != hwLeaderRead {
			continue
		}
		if first, seen := checked[s.op.epoch]; !seen || s.op.call < first {
			checked[s.op.epoch] = s.op.call
		}
	}
	out := map[hwEpochKey][]hwOp{}
	for epoch, firstCallNs := range checked { // order-independent: distinct keys
		var ops []hwOp
		var earlierMax int64 = -1
		var earlierWhat hwOrigin
		for _, s := range sources {
			op := s.op
			switch {
			case op.epoch == epoch && s.laterOnly:
				continue
			case op.epoch == epoch && !s.follower:
				if overBudget && op.in.kind == hwLeaderRead {
					op.in.committed = false
				}
				ops = append(ops, op)
				continue
			case overBudget || op.epoch > epoch:
				continue
			}
			// An earlier epoch's observation, or a follower's of this
			// one: a source for committed answers only. Those that
			// returned before the epoch's first call fold into one.
			op.in.kind = hwEarlier
			if op.ret < firstCallNs {
				if op.in.value > earlierMax {
					earlierMax, earlierWhat = op.in.value, op.in.what
				}
				continue
			}
			ops = append(ops, op)
		}
		if earlierMax >= 0 {
			ops = append(ops, hwOp{client: 0, call: firstCallNs - 1, ret: firstCallNs - 1, epoch: epoch - 1,
				in: hwInput{kind: hwEarlier, value: earlierMax, what: hwOrigin{earlier: &earlierWhat}}})
		}
		out[hwEpochKey{tp, epoch}] = ops
	}
	return out
}

// ackEpochs finds, for each acknowledged acks=all produce, the leader
// epoch of the batch holding its records, from the records fetches read,
// else from the final logs; a produce whose records nobody read and the
// final logs lack is left out. The leader that appended a batch is the one
// that acknowledges it (it answers a produce it appended only while it
// leads, perhaps in a later epoch of its own, in which no client can reach
// it with the earlier one), except for an idempotent batch, whose retry
// any later leader holding it acknowledges: that one bounds later epochs
// only (hwSource.laterOnly).
func ackEpochs(h History, final map[TopicPartition]PartitionFinal) map[int]int32 {
	// want holds, per partition, the acknowledged produces by base offset
	// (index+1, 0 for none): every fetched record is looked up.
	want := map[TopicPartition]*partitionAcks{}
	for i, p := range h.Produces {
		if p.Acks == -1 && p.Acked && len(p.Values) > 0 {
			pa := want[p.TP]
			if pa == nil {
				pa = &partitionAcks{}
				want[p.TP] = pa
			}
			pa.set(p.BaseOffset, i)
		}
	}
	out := map[int]int32{}
	found := func(pa *partitionAcks, r Record) {
		i, ok := pa.get(r.Offset)
		if !ok || h.Produces[i].Values[0] != r.Value {
			return
		}
		if _, done := out[i]; !done {
			out[i] = r.LeaderEpoch
		}
	}
	for _, f := range h.Fetches {
		pa := want[f.TP]
		if pa == nil {
			continue
		}
		for _, r := range f.Records {
			found(pa, r)
		}
	}
	for tp, pf := range final { // order-independent: first finding per produce wins, all agree
		pa := want[tp]
		if pa == nil {
			continue
		}
		for _, rl := range pf.Replicas {
			for _, b := range rl.Batches {
				for _, r := range b.Records {
					found(pa, r)
				}
			}
		}
	}
	return out
}

// partitionAcks indexes one partition's acknowledged produces by base
// offset: a slice (logs in a run start at 0 and stay short), a map beyond.
type partitionAcks struct {
	dense  []int // produce index + 1; 0 for none
	sparse map[int64]int
}

func (pa *partitionAcks) set(offset int64, i int) {
	if offset >= 0 && offset < denseOffsetsMax {
		if offset >= int64(len(pa.dense)) {
			grown := make([]int, min(max(offset+1, 2*int64(len(pa.dense)), 1024), denseOffsetsMax))
			copy(grown, pa.dense)
			pa.dense = grown
		}
		pa.dense[offset] = i + 1
		return
	}
	if pa.sparse == nil {
		pa.sparse = map[int64]int{}
	}
	pa.sparse[offset] = i + 1
}

func (pa *partitionAcks) get(offset int64) (int, bool) {
	if offset >= 0 && offset < int64(len(pa.dense)) {
		return pa.dense[offset] - 1, pa.dense[offset] != 0
	}
	i, ok := pa.sparse[offset]
	return i - 1, ok
}

// decideHW decides one (partition, epoch) history of the HW model exactly
// and returns "" when it is linearizable, otherwise why not.
//
// Only leader reads are checked; acknowledgements and earlier observations
// only raise floors, so each is best placed at its return (it then
// precedes as few reads as possible). The leader reads must be linearized
// in the order of their values (the leader floor only rises), so each is
// best placed as early as that order and its call allow: reads in order of
// value, each at the latest of its call and the points of the lower
// values. That placement is the earliest possible for every read at once,
// and every constraint on a read is an upper bound on its point (its
// return, and the returns of higher floors it must precede), so the
// history is linearizable exactly when that placement meets them all.
// TestHWVerdictMatchesPorcupine compares this with Porcupine.
func decideHW(ops []hwOp) string {
	var reads []hwOp
	var same, all []hwOp // floors: acknowledgements of the epoch; everything committed reads must reach
	for _, o := range ops {
		switch o.in.kind {
		case hwLeaderRead:
			reads = append(reads, o)
		case hwAck:
			same = append(same, o)
			all = append(all, o)
		case hwEarlier:
			all = append(all, o)
		}
	}
	sort.SliceStable(reads, func(i, j int) bool { return reads[i].in.value < reads[j].in.value })
	sameFloor, allFloor := newFloorIndex(same), newFloorIndex(all)
	// lowerPoint is the latest point among the reads of lower values,
	// lowerRead the read placed there.
	lowerPoint, groupPoint := int64(-1<<63), int64(-1<<63)
	var lowerRead, groupRead hwOp
	for i, r := range reads {
		if i > 0 && r.in.value != reads[i-1].in.value {
			if groupPoint > lowerPoint {
				lowerPoint, lowerRead = groupPoint, groupRead
			}
		}
		point := max(r.call, lowerPoint)
		if point > r.ret {
			return fmt.Sprintf("%s showed HW %d after %s had shown %d: the leader's HW went back",
				lowerRead.in.what, lowerRead.in.value, r.in.what, r.in.value)
		}
		if point > groupPoint {
			groupPoint, groupRead = point, r
		}
		if s, ok := sameFloor.above(r.in.value, point); ok {
			return fmt.Sprintf("%s showed HW %d, below %s (HW past %d), which returned before it was called",
				r.in.what, r.in.value, s.in.what, s.in.value)
		}
		if !r.in.committed {
			continue
		}
		if s, ok := allFloor.above(r.in.value, point); ok {
			return fmt.Sprintf("%s showed HW %d, below %s (HW %d), which returned before it was called; it must not (%s)",
				r.in.what, r.in.value, s.in.what, s.in.value, r.in.committedWhy)
		}
	}
	return ""
}

// floorIndex answers "which observation that returned before t shows the
// highest value": observations by return time, with running maxima.
type floorIndex struct {
	ops    []hwOp
	argmax []int
}

func newFloorIndex(ops []hwOp) floorIndex {
	sorted := append([]hwOp(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ret < sorted[j].ret })
	fi := floorIndex{ops: sorted, argmax: make([]int, len(sorted))}
	for i := range sorted {
		fi.argmax[i] = i
		if i > 0 && sorted[fi.argmax[i-1]].in.value >= sorted[i].in.value {
			fi.argmax[i] = fi.argmax[i-1]
		}
	}
	return fi
}

// above returns the highest observation that returned strictly before t,
// if its value exceeds value.
func (fi floorIndex) above(value, t int64) (hwOp, bool) {
	n := sort.Search(len(fi.ops), func(i int) bool { return fi.ops[i].ret >= t })
	if n == 0 {
		return hwOp{}, false
	}
	best := fi.ops[fi.argmax[n-1]]
	return best, best.in.value > value
}
