package quorum

// ReplicaProgress is what the leader knows of one replica of the metadata
// log from the replica's fetches: what DescribeQuorum reports per voter and
// per observer (KIP-595, KIP-836). Times are in the leader's monotonic
// milliseconds; -1 is unknown (the replica has not fetched from this
// leader).
type ReplicaProgress struct {
	ReplicaID int32
	// LogEndOffset is the fetch offset of the replica's latest fetch: its
	// log end as the leader last saw it.
	LogEndOffset int64
	// LastFetchMs is when the leader last received a fetch from it.
	LastFetchMs int64
	// LastCaughtUpMs is the last time at which the replica is known to
	// have held everything the leader held.
	LastCaughtUpMs int64
	// leaderEndAtLastFetch is the leader's end when the replica last
	// fetched, -1 before its first fetch.
	leaderEndAtLastFetch int64
}

// NewReplicaProgress is the progress of a replica that has not fetched.
func NewReplicaProgress(id int32) ReplicaProgress {
	return ReplicaProgress{ReplicaID: id, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1, leaderEndAtLastFetch: -1}
}

// Fetched records a fetch at nowMs from fetchOffset, when the leader's
// log ended at leaderEnd. A fetch from the leader's end shows the replica
// caught up now; a fetch from the end the leader had at the replica's
// previous fetch shows it was caught up then (Kafka's rule: a replica
// that keeps fetching while the leader appends is never exactly at the
// end, yet never falls behind by more than one fetch).
func (p *ReplicaProgress) Fetched(nowMs, fetchOffset, leaderEnd int64) {
	switch {
	case fetchOffset >= leaderEnd:
		p.LastCaughtUpMs = max(p.LastCaughtUpMs, nowMs)
	case p.leaderEndAtLastFetch > 0 && fetchOffset >= p.leaderEndAtLastFetch:
		p.LastCaughtUpMs = max(p.LastCaughtUpMs, p.LastFetchMs)
	}
	p.leaderEndAtLastFetch = leaderEnd
	p.LastFetchMs = max(p.LastFetchMs, nowMs)
	p.LogEndOffset = fetchOffset
}

// Description is the quorum as its leader sees it, for DescribeQuorum.
type Description struct {
	LeaderID    int32
	LeaderEpoch int32
	// HighWatermark is the leader's commit offset.
	HighWatermark int64
	// Voters is every voter, by id, the leader included: its own log end,
	// fetched and caught up at the time of the description.
	Voters []ReplicaProgress
}

// Describe is the leader's view of the voters' replication at nowMs; false
// on a node that does not lead. Observers (brokers) do not fetch through
// Raft: core/controller tracks them.
func (r *Raft) Describe(nowMs int64) (Description, bool) {
	if r.role != Leader {
		return Description{}, false
	}
	d := Description{LeaderID: r.cfg.ID, LeaderEpoch: r.hard.Epoch, HighWatermark: r.commit,
		Voters: make([]ReplicaProgress, 0, len(r.voters))}
	for _, v := range r.voters { // sorted: no map order reaches the answer
		switch p, ok := r.progress[v]; {
		case v == r.cfg.ID:
			d.Voters = append(d.Voters, ReplicaProgress{ReplicaID: v, LogEndOffset: r.log.endOffset(),
				LastFetchMs: nowMs, LastCaughtUpMs: nowMs, leaderEndAtLastFetch: r.log.endOffset()})
		case ok:
			d.Voters = append(d.Voters, *p)
		default:
			d.Voters = append(d.Voters, NewReplicaProgress(v))
		}
	}
	return d, true
}

// voterFetched records a voter's fetch from fetchOffset at nowMs in the
// leader's progress of it.
func (r *Raft) voterFetched(nowMs int64, id int32, fetchOffset int64) {
	p, ok := r.progress[id]
	if !ok {
		np := NewReplicaProgress(id)
		p = &np
		r.progress[id] = p
	}
	p.Fetched(nowMs, fetchOffset, r.log.endOffset())
}
