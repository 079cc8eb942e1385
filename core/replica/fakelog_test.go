package replica

import (
	"fmt"
	"slices"
)

// entry is one record of the fake log: the leader epoch it was written in
// and a value unique to the write, so tests can tell records apart.
type entry struct {
	epoch int32
	value string
}

// fakeLog is an in-memory Log whose epoch cache is derived from its
// entries, answering EndOffsetForEpoch exactly as Log's contract says.
type fakeLog struct {
	start   int64
	entries []entry
}

func (l *fakeLog) LogStartOffset() int64 { return l.start }
func (l *fakeLog) LogEndOffset() int64   { return l.start + int64(len(l.entries)) }

// epochs is the epoch cache: (epoch, start offset) at every epoch change.
func (l *fakeLog) epochs() []EpochEndOffset {
	var out []EpochEndOffset
	for i, e := range l.entries {
		if len(out) == 0 || out[len(out)-1].Epoch != e.epoch {
			out = append(out, EpochEndOffset{Epoch: e.epoch, EndOffset: l.start + int64(i)}) // EndOffset holds the start offset here
		}
	}
	return out
}

func (l *fakeLog) LatestEpoch() int32 {
	if c := l.epochs(); len(c) > 0 {
		return c[len(c)-1].Epoch
	}
	return NoEpoch
}

func (l *fakeLog) EndOffsetForEpoch(requested int32) (int32, int64) {
	return endOffsetFor(l.epochs(), requested, l.LogEndOffset())
}

// endOffsetFor is the Log contract over a cache given as (epoch, start).
func endOffsetFor(cache []EpochEndOffset, requested int32, leo int64) (int32, int64) {
	if requested == NoEpoch || len(cache) == 0 {
		return NoEpoch, NoOffset
	}
	if cache[len(cache)-1].Epoch == requested {
		return requested, leo
	}
	higher := slices.IndexFunc(cache, func(c EpochEndOffset) bool { return c.Epoch > requested })
	switch higher {
	case -1:
		return NoEpoch, NoOffset
	case 0:
		return requested, cache[0].EndOffset
	}
	return cache[higher-1].Epoch, cache[higher].EndOffset
}

func (l *fakeLog) append(epoch int32, values ...string) {
	for _, v := range values {
		l.entries = append(l.entries, entry{epoch: epoch, value: v})
	}
}

// appendN appends n records of epoch with values named after the offsets.
func (l *fakeLog) appendN(epoch int32, n int, tag string) {
	for range n {
		l.append(epoch, fmt.Sprintf("%s@%d", tag, l.LogEndOffset()))
	}
}

// values are the log's record values, in offset order.
func values(l *fakeLog) []string {
	var out []string
	for _, e := range l.entries {
		out = append(out, e.value)
	}
	return out
}

func (l *fakeLog) slice(from, to int64) []entry {
	return slices.Clone(l.entries[from-l.start : to-l.start])
}

func (l *fakeLog) truncateTo(offset int64) {
	if offset < l.LogEndOffset() {
		l.entries = l.entries[:offset-l.start]
	}
}

func (l *fakeLog) truncateFullyAndStartAt(offset int64) {
	l.start, l.entries = offset, nil
}

// node is one replica in a test cluster: its log and its state machine.
type node struct {
	id  int32
	log *fakeLog
	p   *Partition
}

func testConfig(id int32) Config {
	return Config{ReplicaID: id, MinInsyncReplicas: 2, ReplicaLagTimeMaxMs: 10_000, AckWaitersMax: 16}
}

func newNode(id int32, log *fakeLog, hw int64, cfg Config) *node {
	if log == nil {
		log = &fakeLog{}
	}
	cfg.ReplicaID = id
	p, err := New(cfg, log, hw)
	if err != nil {
		panic(err)
	}
	return &node{id: id, log: log, p: p}
}

// apply pushes s to n, performing the truncation a Transition may ask for.
func (n *node) apply(s PartitionState, nowMs int64) Transition {
	t, err := n.p.ApplyState(s, nowMs)
	if err != nil {
		panic(err)
	}
	if t.TruncateToOffset != NoOffset {
		n.log.truncateTo(t.TruncateToOffset)
	}
	return t
}

// produce appends values on the leader n as one batch and reports it.
func (n *node) produce(acks int16, requestID uint64, nowMs, deadlineMs int64, values ...string) error {
	epoch, err := n.p.AdmitProduce(acks)
	if err != nil {
		return err
	}
	n.log.append(epoch, values...)
	return n.p.OnLeaderAppend(LeaderAppend{LastOffset: n.log.LogEndOffset() - 1, Acks: acks, RequestID: requestID, DeadlineMs: deadlineMs}, nowMs)
}

// fetchOnce runs one fetch round from follower f to leader l, performing
// the follower's action. It returns the leader's decision and the action.
func fetchOnce(f, l *node, nowMs int64) (FetchDecision, FollowerAction, bool) {
	leaderID, req, ok := f.p.NextFetch()
	if !ok || leaderID != l.id {
		return FetchDecision{}, FollowerAction{}, false
	}
	d := l.p.OnFollowerFetch(req, nowMs)
	var records []entry
	if d.ShouldRead() {
		records = l.log.slice(d.ReadFromOffset, d.ReadToOffset)
	}
	act := f.p.OnFetchResponse(req, d)
	switch act.Kind {
	case ActionAppend:
		f.log.entries = append(f.log.entries, records...)
		f.p.OnFollowerAppend(d.HighWatermark)
	case ActionTruncate:
		f.log.truncateTo(act.Offset)
	case ActionTruncateFullyAndStartAt:
		f.log.truncateFullyAndStartAt(act.Offset)
	}
	return d, act, true
}

func state(leader int32, leaderEpoch, partitionEpoch int32, replicas, isr []int32) PartitionState {
	return PartitionState{LeaderID: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Replicas: replicas, ISR: isr}
}
