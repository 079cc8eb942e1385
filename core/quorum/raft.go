package quorum

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Role is a node's part in the current epoch.
type Role int8

// The roles. KRaft's Unattached and Resigned states are a Follower with no
// leader.
const (
	Follower Role = iota
	Prospective
	Candidate
	Leader
)

// String names the role.
func (r Role) String() string {
	return [...]string{"Follower", "Prospective", "Candidate", "Leader"}[r]
}

// HardState is what must be durable before a vote is answered: KRaft's
// quorum-state file.
type HardState struct {
	Epoch int32
	// VotedFor is the candidate voted for in Epoch, -1 if none.
	VotedFor int32
}

// Snapshot is the state machine's state after the entries below EndOffset,
// the last of which had epoch Epoch: Kafka's <EndOffset>-<Epoch>.checkpoint.
type Snapshot struct {
	EndOffset int64
	Epoch     int32
	// Data is the state machine's encoding; never modified once handed over.
	Data []byte
}

// Ready is the work the caller must do: persist, then send and apply. See
// the package doc for the contract.
type Ready struct {
	// HardState, if not nil, must be made durable.
	HardState *HardState
	// TruncateTo >= 0: drop durable entries at and above this offset before
	// appending Entries.
	TruncateTo int64
	// Entries to append durably (a copy of the slice; Data is shared and
	// must not be modified).
	Entries []Entry
	// Messages to send once the above is durable.
	Messages []Message
	// Committed are entries newly known committed, in order, to apply.
	Committed []Entry
	// Snapshot, if not nil, must be made durable before the messages are
	// sent; the durable entries below its EndOffset may then be deleted.
	// With SnapshotInstall it came from the leader: the caller deletes its
	// whole log and loads the snapshot into the state machine (replacing
	// it) before applying Committed, which follow it.
	Snapshot        *Snapshot
	SnapshotInstall bool
}

// Raft is one node's Raft state machine. It is not safe for concurrent use;
// the event loop drives it.
type Raft struct {
	cfg    Config
	voters []int32

	hard      HardState
	hardDirty bool
	role      Role
	leader    int32
	// resignedLeader is the node that led this epoch and resigned it
	// (EndQuorumEpoch), -1 if none: it never leads this epoch again, so a
	// late message naming it leader is stale.
	resignedLeader int32
	log            entryLog
	// commit is the high watermark: entries below it are committed.
	commit int64
	// applied is where the next Ready's Committed starts.
	applied int64

	// unstableFrom: entries at and above it are not yet handed to a Ready.
	unstableFrom int64
	// truncatePending >= 0 is the lowest truncation not yet in a Ready.
	truncatePending int64
	// durableEnd is the end of the log the caller reported durable.
	durableEnd int64
	// snapshot is the latest snapshot (nil if none): the log starts at its
	// EndOffset. snapshotDirty: not yet in a Ready; snapshotInstall: it
	// came from the leader and replaces the state machine.
	snapshot        *Snapshot
	snapshotDirty   bool
	snapshotInstall bool
	// snapFetch is the snapshot a follower is reading from its leader,
	// with the bytes read so far.
	snapFetch *Snapshot

	// readyOut is set between Ready and Advance.
	readyOut *Ready
	msgs     []Message

	// deadlineMs: fetch timeout (follower with a leader), election timeout
	// (unattached follower, prospective, candidate).
	deadlineMs int64
	// lastLeaderContactMs is when this node last heard from its leader.
	lastLeaderContactMs int64
	// grants and rejects are the (pre-)vote answers collected as
	// prospective or candidate.
	grants  map[int32]bool
	rejects map[int32]bool

	// Follower's fetch in flight; with none in flight, the next is sent at
	// fetchRetryAtMs (a failed fetch backs off).
	fetchOutstanding bool
	fetchSentMs      int64
	fetchRetryAtMs   int64
	fetchRef         uint64

	// Leader's view of the followers.
	matches     map[int32]int64
	lastFetchMs map[int32]int64
	hwSent      map[int32]int64
	beginAcked  map[int32]bool
	// progress is each voter's replication as its fetches show it, for
	// Describe; a voter that has not fetched from this leader has none.
	progress        map[int32]*ReplicaProgress
	lastBeginSentMs int64
	parked          []parkedFetch
}

// parkedFetch is a Fetch the leader holds until something changes (long poll).
type parkedFetch struct {
	req        Message
	deadlineMs int64
}

// New returns a voter restarted from its durable state: hard (zero for a
// new node), the latest durable snapshot (nil if none; the caller loads it
// into the state machine) and the durable log entries after it. It starts
// as an unattached follower.
func New(cfg Config, hard HardState, snap *Snapshot, entries []Entry, nowMs int64) (*Raft, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if hard.Epoch < 0 || hard.VotedFor < -1 {
		return nil, fmt.Errorf("quorum: hard state %+v out of range", hard)
	}
	r := &Raft{cfg: cfg, voters: slices.Sorted(slices.Values(cfg.Voters)), hard: hard, leader: -1, resignedLeader: -1, truncatePending: -1}
	if snap != nil {
		if snap.EndOffset <= 0 || snap.Epoch < 0 || snap.Epoch > hard.Epoch {
			return nil, fmt.Errorf("quorum: snapshot %d-%d out of range for epoch %d", snap.EndOffset, snap.Epoch, hard.Epoch)
		}
		r.snapshot = snap
		r.log.compactTo(snap.EndOffset, snap.Epoch)
		r.commit, r.applied = snap.EndOffset, snap.EndOffset
	}
	for i, e := range entries {
		if e.Offset != r.log.start+int64(i) || e.Epoch < r.log.lastEpoch() || e.Epoch > hard.Epoch {
			return nil, fmt.Errorf("quorum: durable entry %d (offset %d, epoch %d) out of order or beyond epoch %d", i, e.Offset, e.Epoch, hard.Epoch)
		}
		r.log.append(e)
	}
	r.unstableFrom = r.log.endOffset()
	r.durableEnd = r.log.endOffset()
	r.becomeFollower(nowMs, hard.Epoch, -1)
	return r, nil
}

// ErrSnapshotPending: a snapshot is not yet durable (or, from the leader,
// not yet loaded); take the next one after Advance.
var ErrSnapshotPending = errors.New("quorum: a snapshot is still being persisted")

// TakeSnapshot records the state machine's state after the committed
// entries below endOffset (all already handed out in Ready.Committed) as
// the latest snapshot; once a Ready has made it durable, the log behind it
// is dropped and followers below it are sent the snapshot.
func (r *Raft) TakeSnapshot(endOffset int64, data []byte) error {
	if r.snapshotDirty || (r.readyOut != nil && r.readyOut.Snapshot != nil) {
		return ErrSnapshotPending
	}
	if endOffset <= r.log.start || endOffset > r.applied {
		return fmt.Errorf("quorum: snapshot at %d outside (%d, %d], the applied entries above the log start", endOffset, r.log.start, r.applied)
	}
	r.snapshot = &Snapshot{EndOffset: endOffset, Epoch: r.log.epochAt(endOffset - 1), Data: data}
	r.snapshotDirty, r.snapshotInstall = true, false
	return nil
}

// LogStartOffset is the first offset held as an entry: the latest
// snapshot's end.
func (r *Raft) LogStartOffset() int64 { return r.log.start }

// LatestSnapshot is the latest snapshot, nil if none.
func (r *Raft) LatestSnapshot() *Snapshot { return r.snapshot }

// ID is this node's id.
func (r *Raft) ID() int32 { return r.cfg.ID }

// Role is this node's current role.
func (r *Raft) Role() Role { return r.role }

// Epoch is the current epoch.
func (r *Raft) Epoch() int32 { return r.hard.Epoch }

// LeaderID is the leader of the current epoch, -1 if unknown.
func (r *Raft) LeaderID() int32 { return r.leader }

// EndOffset is the offset the next entry gets.
func (r *Raft) EndOffset() int64 { return r.log.endOffset() }

// CommittedOffset is the high watermark: entries below it are committed.
func (r *Raft) CommittedOffset() int64 { return r.commit }

// Entries returns the entries [from, to) of the log; the slice aliases
// the log and is valid only until the next call into Raft.
func (r *Raft) Entries(from, to int64) []Entry { return r.log.slice(from, to) }

func (r *Raft) isVoter(id int32) bool {
	_, found := slices.BinarySearch(r.voters, id)
	return found
}

func (r *Raft) majority() int { return len(r.voters)/2 + 1 }

func (r *Raft) send(m Message) {
	m.From = r.cfg.ID
	r.msgs = append(r.msgs, m)
}

func (r *Raft) setHard(epoch, votedFor int32) {
	if epoch < r.hard.Epoch {
		panic(fmt.Sprintf("quorum: epoch going back from %d to %d", r.hard.Epoch, epoch))
	}
	if r.hard.Epoch != epoch {
		r.resignedLeader = -1
	}
	if r.hard.Epoch != epoch || r.hard.VotedFor != votedFor {
		r.hard = HardState{Epoch: epoch, VotedFor: votedFor}
		r.hardDirty = true
	}
}

func (r *Raft) electionDeadline(nowMs int64) int64 {
	return nowMs + r.cfg.ElectionTimeoutMs + r.cfg.RandInt63n(r.cfg.ElectionTimeoutMs)
}

// fetchDeadline is when a follower that last heard from its leader at nowMs
// stands for election: FetchTimeoutMs plus up to half an election timeout of
// jitter, so that the followers of a crashed leader do not all stand at
// once and split the vote. Voters judge a pre-vote by FetchTimeoutMs alone,
// so a follower still within its jitter grants it.
func (r *Raft) fetchDeadline(nowMs int64) int64 {
	return nowMs + r.cfg.FetchTimeoutMs + r.cfg.RandInt63n(r.cfg.ElectionTimeoutMs/2+1)
}

// lostElection backs off after a majority rejected this node's (pre-)vote:
// a split vote is retried after up to half an election timeout, not a
// whole one (KRaft's election backoff).
func (r *Raft) lostElection(nowMs int64) {
	if len(r.rejects) > len(r.voters)-r.majority() {
		r.rejects = map[int32]bool{}
		r.deadlineMs = min(r.deadlineMs, nowMs+1+r.cfg.RandInt63n(r.cfg.ElectionTimeoutMs/2+1))
	}
}

// becomeFollower moves to epoch (clearing the vote if it grows) following
// leader, or unattached if leader is -1.
func (r *Raft) becomeFollower(nowMs int64, epoch, leader int32) {
	if epoch > r.hard.Epoch {
		r.setHard(epoch, -1)
	}
	r.role, r.leader, r.grants, r.rejects = Follower, leader, nil, nil
	r.matches, r.lastFetchMs, r.hwSent, r.beginAcked, r.progress = nil, nil, nil, nil, nil
	r.answerParked(nowMs, true)
	r.fetchOutstanding, r.snapFetch = false, nil
	if leader >= 0 {
		r.lastLeaderContactMs = nowMs
		r.deadlineMs = r.fetchDeadline(nowMs)
		r.sendFetch(nowMs)
		return
	}
	r.deadlineMs = r.electionDeadline(nowMs)
	if len(r.voters) == 1 && r.voters[0] == r.cfg.ID {
		// The only voter has no one to wait for: its deadline is now, so it
		// stands at the next Tick, as KRaft's only voter becomes candidate
		// at once.
		r.deadlineMs = nowMs
	}
}

// becomeProspective asks for pre-votes for epoch+1. The leader, if any, is
// kept: a prospective node still accepts its leader.
func (r *Raft) becomeProspective(nowMs int64) {
	r.role, r.grants, r.rejects = Prospective, map[int32]bool{r.cfg.ID: true}, map[int32]bool{}
	r.deadlineMs = r.electionDeadline(nowMs)
	if len(r.grants) >= r.majority() {
		r.becomeCandidate(nowMs)
		return
	}
	r.requestVotes(true)
}

func (r *Raft) becomeCandidate(nowMs int64) {
	r.setHard(r.hard.Epoch+1, r.cfg.ID)
	r.role, r.leader, r.grants, r.rejects = Candidate, -1, map[int32]bool{r.cfg.ID: true}, map[int32]bool{}
	r.deadlineMs = r.electionDeadline(nowMs)
	if len(r.grants) >= r.majority() {
		r.becomeLeader(nowMs)
		return
	}
	r.requestVotes(false)
}

func (r *Raft) requestVotes(preVote bool) {
	epoch := r.hard.Epoch
	if preVote {
		epoch++
	}
	for _, v := range r.voters {
		if v != r.cfg.ID {
			r.send(Message{Type: MsgVote, To: v, Epoch: epoch, LeaderID: -1, PreVote: preVote,
				LastEpoch: r.log.lastEpoch(), LastOffset: r.log.endOffset()})
		}
	}
}

func (r *Raft) becomeLeader(nowMs int64) {
	r.role, r.leader, r.grants, r.rejects = Leader, r.cfg.ID, nil, nil
	r.matches, r.lastFetchMs, r.hwSent, r.beginAcked = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}, map[int32]bool{}
	r.progress = map[int32]*ReplicaProgress{}
	for _, v := range r.voters {
		r.lastFetchMs[v] = nowMs // a grace period for check-quorum
	}
	r.appendEntry(nil)
	if r.cfg.Observer != nil {
		r.cfg.Observer.BecameLeader(r.cfg.ID, r.hard.Epoch)
	}
	r.sendBeginEpoch(nowMs)
	r.maybeCommit(nowMs)
}

func (r *Raft) sendBeginEpoch(nowMs int64) {
	r.lastBeginSentMs = nowMs
	for _, v := range r.voters { // order-independent of maps: voters is sorted
		if v != r.cfg.ID && !r.beginAcked[v] {
			r.send(Message{Type: MsgBeginEpoch, To: v, Epoch: r.hard.Epoch, LeaderID: r.cfg.ID})
		}
	}
}

func (r *Raft) appendEntry(data []byte) int64 {
	offset := r.log.endOffset()
	r.log.append(Entry{Offset: offset, Epoch: r.hard.Epoch, Data: data})
	return offset
}

// Propose appends data as a new entry if this node is the leader, and
// returns its offset. It is committed once CommittedOffset passes it.
func (r *Raft) Propose(nowMs int64, data []byte) (int64, error) {
	if r.role != Leader {
		return 0, fmt.Errorf("quorum: node %d is not the leader (epoch %d, leader %d)", r.cfg.ID, r.hard.Epoch, r.leader)
	}
	offset := r.appendEntry(data)
	r.maybeCommit(nowMs)
	r.answerParked(nowMs, false)
	return offset, nil
}

// Tick advances time to nowMs: the timeouts due by then fire. A Tick
// before NextDeadlineMs does nothing, so the caller need only call it at
// the deadline (and may call it at any other time).
func (r *Raft) Tick(nowMs int64) {
	if r.role == Leader {
		r.tickLeader(nowMs)
	} else {
		if nowMs >= r.deadlineMs && r.isVoter(r.cfg.ID) {
			// Election timeout (unattached, prospective, candidate) or
			// fetch timeout (a follower's leader went quiet): stand. An
			// observer never stands, and keeps waiting for a leader.
			r.becomeProspective(nowMs)
		}
		if due, ok := r.fetchDueMs(); ok && nowMs >= due {
			r.sendFetch(nowMs)
		}
	}
	// Everything due by nowMs has fired: a deadline still due would make
	// a deadline-driven caller Tick again and again at the same instant.
	if next := r.NextDeadlineMs(); next <= nowMs {
		panic(fmt.Sprintf("quorum: node %d (%v) still has a deadline at %d ms after Tick at %d ms", r.cfg.ID, r.role, next, nowMs))
	}
}

// NoDeadlineMs is what NextDeadlineMs returns when no time-based rule is
// pending: only a message or a proposal can make the node act.
const NoDeadlineMs = math.MaxInt64

// NextDeadlineMs is the earliest time at which Tick could do anything:
// Tick at an earlier time changes nothing and sends nothing. It is the
// earliest of the deadlines of the rules Tick implements:
//   - a voter that is not the leader stands at deadlineMs: the election
//     timeout (unattached, prospective, candidate, or backing off after a
//     lost vote or its leader's resignation) or the fetch timeout (a
//     follower that has not heard from its leader);
//   - a follower or prospective node with a leader fetches again when its
//     fetch has gone unanswered for FetchMaxWaitMs + RequestTimeoutMs, or,
//     with no fetch in flight (the last one failed), after a backoff;
//   - the leader answers a parked fetch when its max wait ends, resigns
//     when check-quorum fails (checkQuorumDeadlineMs), and sends
//     BeginQuorumEpoch again to the voters that have not acknowledged it
//     (beginEpochResendMs).
//
// It may be at or before a time already passed to Tick or Step (then the
// next Tick fires it); after a Tick(nowMs) it is always later than nowMs.
func (r *Raft) NextDeadlineMs() int64 {
	if r.role == Leader {
		return r.leaderDeadlineMs()
	}
	next := int64(NoDeadlineMs)
	if r.isVoter(r.cfg.ID) {
		next = r.deadlineMs
	}
	if due, ok := r.fetchDueMs(); ok {
		next = min(next, due)
	}
	return next
}

// fetchDueMs is when a follower (or prospective node) that knows its leader
// sends its next fetch: when the one in flight times out, or, with none in
// flight, when its retry backoff ends. ok is false for a node that does not
// fetch.
func (r *Raft) fetchDueMs() (dueMs int64, ok bool) {
	if (r.role != Follower && r.role != Prospective) || r.leader < 0 {
		return 0, false
	}
	if r.fetchOutstanding {
		return r.fetchSentMs + r.cfg.FetchMaxWaitMs + r.cfg.RequestTimeoutMs, true
	}
	return r.fetchRetryAtMs, true
}

// fetchRetryBackoffMs is how long a follower waits to fetch again after its
// leader answered with an error: Kafka's controller.quorum.retry.backoff.ms
// default. Without it, a leader that keeps answering with an error would be
// fetched from in a tight loop.
const fetchRetryBackoffMs = 20

// fetchFailed records that the fetch in flight failed: the next one is due
// after the retry backoff.
func (r *Raft) fetchFailed(nowMs int64) {
	r.fetchOutstanding = false
	r.fetchRetryAtMs = nowMs + fetchRetryBackoffMs
}

// checkQuorumMs is how long a leader waits for a majority's fetches before
// it resigns: 1.5 × FetchTimeoutMs, as KRaft's leader does.
func (r *Raft) checkQuorumMs() int64 { return r.cfg.FetchTimeoutMs * 3 / 2 }

func (r *Raft) tickLeader(nowMs int64) {
	r.answerParked(nowMs, false)
	if nowMs >= r.checkQuorumDeadlineMs() {
		r.Resign(nowMs)
		return
	}
	if nowMs >= r.beginEpochResendMs() {
		r.sendBeginEpoch(nowMs)
	}
}

// leaderDeadlineMs is the leader's next deadline: the first parked fetch's
// max wait, check-quorum, or the resend of BeginQuorumEpoch.
func (r *Raft) leaderDeadlineMs() int64 {
	next := min(r.checkQuorumDeadlineMs(), r.beginEpochResendMs())
	for _, p := range r.parked {
		next = min(next, p.deadlineMs)
	}
	return next
}

// checkQuorumDeadlineMs is when the leader resigns unless more voters fetch
// first: when fewer than a majority (itself included) will have fetched
// within checkQuorumMs. That is the k-th latest of the other voters' last
// fetches, plus checkQuorumMs, where k is the other voters a majority needs.
func (r *Raft) checkQuorumDeadlineMs() int64 {
	need := r.majority() - 1 // the leader counts itself
	if need == 0 {
		return NoDeadlineMs
	}
	var buf [8]int64
	lastFetches := buf[:0]
	for _, v := range r.voters {
		if v != r.cfg.ID {
			lastFetches = append(lastFetches, r.lastFetchMs[v])
		}
	}
	slices.Sort(lastFetches)
	return lastFetches[len(lastFetches)-need] + r.checkQuorumMs()
}

// beginEpochResendMs is when the leader sends BeginQuorumEpoch again to
// the voters that have not acknowledged it: an election timeout after the
// last send. Once all have, it is never sent again.
func (r *Raft) beginEpochResendMs() int64 {
	for _, v := range r.voters { // order-independent of maps: voters is sorted
		if v != r.cfg.ID && !r.beginAcked[v] {
			return r.lastBeginSentMs + r.cfg.ElectionTimeoutMs
		}
	}
	return NoDeadlineMs
}

// Resign ends this leader's epoch: it tells the voters (EndQuorumEpoch),
// best placed first, so that one stands at once instead of after the fetch
// timeout, and becomes an unattached follower. Check-quorum resigns too; a
// controlled shutdown calls it. A node that does not lead does nothing.
func (r *Raft) Resign(nowMs int64) {
	if r.role != Leader {
		return
	}
	successors := make([]int32, 0, len(r.voters)-1)
	for _, v := range r.voters {
		if v != r.cfg.ID {
			successors = append(successors, v)
		}
	}
	slices.SortStableFunc(successors, func(a, b int32) int { return cmpInt64(r.matches[b], r.matches[a]) })
	for _, v := range successors {
		r.send(Message{Type: MsgEndEpoch, To: v, Epoch: r.hard.Epoch, LeaderID: r.cfg.ID, PreferredSuccessors: successors})
	}
	r.becomeFollower(nowMs, r.hard.Epoch, -1)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stepEndEpoch: this epoch's leader resigned. The voter forgets it and
// stands after a backoff that grows with its place among the successors.
func (r *Raft) stepEndEpoch(nowMs int64, m Message) {
	if m.Epoch == r.hard.Epoch && r.leader == m.From && r.role != Leader {
		place := int64(slices.Index(m.PreferredSuccessors, r.cfg.ID))
		if place < 0 {
			place = int64(len(m.PreferredSuccessors))
		}
		r.becomeFollower(nowMs, r.hard.Epoch, -1)
		r.resignedLeader = m.From
		r.deadlineMs = nowMs + place*r.cfg.ElectionTimeoutMs/4 + r.cfg.RandInt63n(r.cfg.ElectionTimeoutMs/8+1)
	}
	r.send(Message{Type: MsgEndEpochResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader})
}

// Step processes a message received at nowMs.
func (r *Raft) Step(nowMs int64, m Message) {
	if m.Type == MsgVote && m.PreVote {
		r.stepPreVote(nowMs, m)
		return
	}
	if m.Type == MsgVoteResp && m.PreVote {
		if r.role == Prospective {
			r.stepProspective(nowMs, m)
		}
		return
	}
	if m.Epoch > r.hard.Epoch {
		leader := int32(-1)
		if m.LeaderID >= 0 && (m.Type == MsgBeginEpoch || (m.Type.IsResponse() && m.Type != MsgEndEpochResp)) {
			leader = m.LeaderID
		}
		r.becomeFollower(nowMs, m.Epoch, leader)
	} else if m.Epoch == r.hard.Epoch && m.Type.IsResponse() && m.LeaderID >= 0 && r.leader < 0 && m.LeaderID != r.cfg.ID &&
		m.LeaderID != r.resignedLeader {
		r.becomeFollower(nowMs, m.Epoch, m.LeaderID) // learned this epoch's leader
	}
	switch m.Type {
	case MsgVote:
		r.stepVote(nowMs, m)
	case MsgBeginEpoch:
		r.stepBeginEpoch(nowMs, m)
	case MsgFetch:
		r.stepFetch(nowMs, m)
	case MsgVoteResp:
		if r.role == Candidate && m.Epoch == r.hard.Epoch {
			if !m.Granted {
				r.rejects[m.From] = true
				r.lostElection(nowMs)
				return
			}
			r.grants[m.From] = true
			if len(r.grants) >= r.majority() {
				r.becomeLeader(nowMs)
			}
		}
	case MsgBeginEpochResp:
		if r.role == Leader && m.Epoch == r.hard.Epoch && m.ErrorCode == errNone {
			r.beginAcked[m.From] = true
		}
	case MsgFetchResp:
		r.stepFetchResp(nowMs, m)
	case MsgFetchSnapshot:
		r.stepFetchSnapshot(nowMs, m)
	case MsgFetchSnapshotResp:
		r.stepFetchSnapshotResp(nowMs, m)
	case MsgEndEpoch:
		r.stepEndEpoch(nowMs, m)
	}
}

// stepPreVote answers a pre-vote without touching this node's state.
func (r *Raft) stepPreVote(nowMs int64, m Message) {
	heardFromLeader := r.role == Leader ||
		(r.leader >= 0 && nowMs-r.lastLeaderContactMs < r.cfg.FetchTimeoutMs)
	granted := m.Epoch > r.hard.Epoch && !heardFromLeader && r.isVoter(r.cfg.ID) &&
		logUpToDate(m.LastEpoch, m.LastOffset, r.log.lastEpoch(), r.log.endOffset())
	// Two prospective nodes standing together with equal logs would both
	// win their pre-votes and split the real vote: the lower id goes first.
	if granted && r.role == Prospective && m.Epoch == r.hard.Epoch+1 && m.From > r.cfg.ID &&
		!logUpToDate(m.LastEpoch, m.LastOffset, r.log.lastEpoch(), r.log.endOffset()+1) {
		granted = false
	}
	// Having backed another node, stand back for half an election timeout
	// so as not to split the vote it is about to ask for.
	if granted && (r.role == Follower || r.role == Prospective) {
		r.role, r.grants, r.rejects = Follower, nil, nil
		r.deadlineMs = max(r.deadlineMs, nowMs+r.cfg.ElectionTimeoutMs/2)
	}
	r.send(Message{Type: MsgVoteResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader, PreVote: true, Granted: granted})
}

func (r *Raft) stepProspective(nowMs int64, m Message) {
	switch {
	case m.Epoch > r.hard.Epoch:
		r.becomeFollower(nowMs, m.Epoch, m.LeaderID)
	case m.Epoch == r.hard.Epoch && m.LeaderID >= 0 && m.LeaderID != r.leader && m.LeaderID != r.cfg.ID &&
		m.LeaderID != r.resignedLeader:
		r.becomeFollower(nowMs, m.Epoch, m.LeaderID)
	case m.Epoch == r.hard.Epoch && m.Granted:
		r.grants[m.From] = true
		if len(r.grants) >= r.majority() {
			r.becomeCandidate(nowMs)
		}
	case m.Epoch == r.hard.Epoch:
		r.rejects[m.From] = true
		r.lostElection(nowMs)
	}
}

func (r *Raft) stepVote(nowMs int64, m Message) {
	granted := false
	if m.Epoch == r.hard.Epoch && r.isVoter(r.cfg.ID) && r.isVoter(m.From) {
		upToDate := logUpToDate(m.LastEpoch, m.LastOffset, r.log.lastEpoch(), r.log.endOffset())
		granted = voteGranted(r.hard.VotedFor, m.From, r.leader >= 0, upToDate, r.cfg.Bugs.VoteTwice)
	}
	if granted {
		r.setHard(r.hard.Epoch, m.From)
		if r.role == Follower {
			r.deadlineMs = r.electionDeadline(nowMs)
		}
	}
	r.send(Message{Type: MsgVoteResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader, Granted: granted})
}

func (r *Raft) stepBeginEpoch(nowMs int64, m Message) {
	code := errNone
	switch {
	case m.Epoch < r.hard.Epoch:
		code = errFencedLeaderEpoch
	case r.role == Leader:
		code = errInconsistentVoterSet // two leaders in one epoch: a broken invariant the checkers report
	case m.From == r.resignedLeader && m.Epoch == r.hard.Epoch:
		// Sent before it resigned, overtaken by its EndQuorumEpoch.
	case r.leader < 0 || r.role != Follower:
		r.becomeFollower(nowMs, m.Epoch, m.From)
	}
	if r.leader == m.From {
		r.lastLeaderContactMs = nowMs
	}
	r.send(Message{Type: MsgBeginEpochResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader, ErrorCode: code})
}

func (r *Raft) sendFetch(nowMs int64) {
	r.fetchOutstanding, r.fetchSentMs = true, nowMs
	r.fetchRef++
	if s := r.snapFetch; s != nil {
		r.send(Message{Type: MsgFetchSnapshot, To: r.leader, Ref: r.fetchRef, Epoch: r.hard.Epoch, LeaderID: r.leader,
			SnapshotEndOffset: s.EndOffset, SnapshotEpoch: s.Epoch, Position: int64(len(s.Data)),
			DivergingEpoch: -1, DivergingEndOffset: -1})
		return
	}
	r.send(Message{Type: MsgFetch, To: r.leader, Ref: r.fetchRef, Epoch: r.hard.Epoch, LeaderID: r.leader,
		FetchOffset: r.log.endOffset(), LastFetchedEpoch: r.log.lastEpoch(), MaxWaitMs: r.cfg.FetchMaxWaitMs})
}

// stepFetch is the leader serving a follower's (or observer's) Fetch.
func (r *Raft) stepFetch(nowMs int64, m Message) {
	resp := Message{Type: MsgFetchResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader,
		DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1}
	switch {
	case m.Epoch < r.hard.Epoch:
		resp.ErrorCode = errFencedLeaderEpoch
	case r.role != Leader:
		resp.ErrorCode = errNotLeaderOrFollower
	case m.FetchOffset < 0:
		resp.ErrorCode = errUnknownLeaderEpoch
	}
	if resp.ErrorCode != errNone {
		r.send(resp)
		return
	}
	if r.log.start > 0 && (m.FetchOffset < r.log.start || m.LastFetchedEpoch < r.log.startEpoch) {
		// Below the log start, or diverged at or before it: read the snapshot.
		resp.SnapshotEndOffset, resp.SnapshotEpoch = r.snapshot.EndOffset, r.snapshot.Epoch
		resp.HighWatermark = r.commit
		r.lastFetchMs[m.From] = nowMs
		r.send(resp)
		return
	}
	if m.FetchOffset > 0 {
		epoch, end := r.log.endOffsetForEpoch(m.LastFetchedEpoch)
		if epoch != m.LastFetchedEpoch || end < m.FetchOffset {
			resp.DivergingEpoch, resp.DivergingEndOffset = epoch, end
			resp.HighWatermark = r.commit
			r.send(resp)
			return
		}
	}
	r.lastFetchMs[m.From] = nowMs
	if r.isVoter(m.From) {
		r.voterFetched(nowMs, m.From, m.FetchOffset)
		r.matches[m.From] = max(r.matches[m.From], m.FetchOffset)
		r.maybeCommit(nowMs)
	}
	if m.FetchOffset == r.log.endOffset() && r.hwSent[m.From] == r.commit && m.MaxWaitMs > 0 {
		// At most one parked fetch per replica, so the list stays bounded:
		// a newer one supersedes it, and the older is answered now (every
		// request gets its response; its sender ignores it).
		r.parked = slices.DeleteFunc(r.parked, func(p parkedFetch) bool {
			if p.req.From == m.From {
				r.answerFetch(p.req)
				return true
			}
			return false
		})
		r.parked = append(r.parked, parkedFetch{req: m, deadlineMs: nowMs + min(m.MaxWaitMs, r.cfg.FetchMaxWaitMs)})
		return
	}
	r.answerFetch(m)
}

func (r *Raft) answerFetch(m Message) {
	end := min(r.log.endOffset(), m.FetchOffset+int64(r.cfg.FetchEntriesMax))
	r.hwSent[m.From] = r.commit
	r.send(Message{Type: MsgFetchResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader,
		HighWatermark: r.commit, Entries: slices.Clone(r.log.slice(min(m.FetchOffset, end), end)),
		DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1})
}

// answerParked answers the parked fetches that have something new or have
// waited long enough; all of them if all is set (leadership ends: they get
// an answer from the new follower naming no leader, and fetch again).
func (r *Raft) answerParked(nowMs int64, all bool) {
	kept := r.parked[:0]
	for _, p := range r.parked {
		switch {
		case all:
			r.send(Message{Type: MsgFetchResp, To: p.req.From, Ref: p.req.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader,
				ErrorCode: errNotLeaderOrFollower, DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1})
		case nowMs >= p.deadlineMs || p.req.FetchOffset < r.log.endOffset() || r.hwSent[p.req.From] != r.commit:
			r.answerFetch(p.req)
		default:
			kept = append(kept, p)
		}
	}
	clear(r.parked[len(kept):])
	r.parked = kept
}

// maybeCommit advances the leader's commit offset by counting matches.
func (r *Raft) maybeCommit(nowMs int64) {
	if r.role != Leader {
		return
	}
	own := r.durableEnd
	if r.cfg.Bugs.CommitEarly {
		own = r.log.endOffset()
	}
	matches := make([]int64, 0, len(r.voters))
	for _, v := range r.voters {
		if v == r.cfg.ID {
			matches = append(matches, min(own, r.log.endOffset()))
		} else {
			matches = append(matches, r.matches[v])
		}
	}
	majority := majorityMatch(matches)
	if r.cfg.Bugs.CommitEarly {
		majority = slices.Max(matches)
	}
	next := nextCommit(r.commit, majority, r.log.epochAt, r.hard.Epoch)
	if next > r.commit {
		if r.cfg.Observer != nil {
			r.cfg.Observer.Committed(r.cfg.ID, r.hard.Epoch, r.commit, next)
		}
		r.commit = next
		r.answerParked(nowMs, false)
	}
}

// stepFetchResp is a follower handling its leader's answer.
func (r *Raft) stepFetchResp(nowMs int64, m Message) {
	if (r.role != Follower && r.role != Prospective) || m.From != r.leader || m.Epoch != r.hard.Epoch ||
		!r.fetchOutstanding || m.Ref != r.fetchRef {
		return
	}
	if m.ErrorCode != errNone {
		r.fetchFailed(nowMs) // Tick fetches again after the backoff
		return
	}
	r.fetchOutstanding = false
	r.role, r.grants = Follower, nil // the leader answered: follow it again
	r.lastLeaderContactMs = nowMs
	r.deadlineMs = r.fetchDeadline(nowMs)
	if m.SnapshotEndOffset > 0 { // a snapshot is never empty; none is -1
		r.snapFetch = &Snapshot{EndOffset: m.SnapshotEndOffset, Epoch: m.SnapshotEpoch}
		r.sendFetch(nowMs)
		return
	}
	if m.DivergingEpoch >= 0 || m.DivergingEndOffset >= 0 {
		_, localEnd := r.log.endOffsetForEpoch(m.DivergingEpoch)
		r.truncate(min(localEnd, m.DivergingEndOffset, r.log.endOffset()))
		r.sendFetch(nowMs)
		return
	}
	for _, e := range m.Entries {
		if e.Offset == r.log.endOffset() && e.Epoch >= r.log.lastEpoch() && e.Epoch <= r.hard.Epoch {
			r.log.append(e)
		}
	}
	r.commit = max(r.commit, min(m.HighWatermark, r.log.endOffset()))
	r.sendFetch(nowMs)
}

// snapshotChunkBytesMax bounds the snapshot bytes in one response.
const snapshotChunkBytesMax = 64 << 10

// stepFetchSnapshot is the leader serving a chunk of its latest snapshot.
func (r *Raft) stepFetchSnapshot(nowMs int64, m Message) {
	resp := Message{Type: MsgFetchSnapshotResp, To: m.From, Ref: m.Ref, Epoch: r.hard.Epoch, LeaderID: r.leader,
		SnapshotEndOffset: m.SnapshotEndOffset, SnapshotEpoch: m.SnapshotEpoch, Position: m.Position,
		DivergingEpoch: -1, DivergingEndOffset: -1}
	s := r.snapshot
	switch {
	case m.Epoch < r.hard.Epoch:
		resp.ErrorCode = errFencedLeaderEpoch
	case r.role != Leader:
		resp.ErrorCode = errNotLeaderOrFollower
	case s == nil || s.EndOffset != m.SnapshotEndOffset || s.Epoch != m.SnapshotEpoch:
		resp.ErrorCode = errSnapshotNotFound
	case m.Position < 0 || m.Position > int64(len(s.Data)):
		resp.ErrorCode = errPositionOutOfRange
	default:
		r.lastFetchMs[m.From] = nowMs
		end := min(int64(len(s.Data)), m.Position+snapshotChunkBytesMax)
		resp.SnapshotSize, resp.SnapshotBytes = int64(len(s.Data)), s.Data[m.Position:end:end]
	}
	r.send(resp)
}

// stepFetchSnapshotResp is a follower reading its leader's snapshot; the
// last chunk installs it.
func (r *Raft) stepFetchSnapshotResp(nowMs int64, m Message) {
	s := r.snapFetch
	if (r.role != Follower && r.role != Prospective) || m.From != r.leader || m.Epoch != r.hard.Epoch || !r.fetchOutstanding ||
		m.Ref != r.fetchRef || s == nil {
		return
	}
	if m.ErrorCode != errNone || m.SnapshotEndOffset != s.EndOffset || m.SnapshotEpoch != s.Epoch ||
		m.Position != int64(len(s.Data)) || m.SnapshotSize < m.Position+int64(len(m.SnapshotBytes)) {
		r.snapFetch = nil // start over with a Fetch, which names the current snapshot
		r.fetchFailed(nowMs)
		return
	}
	r.fetchOutstanding = false
	r.role, r.grants, r.rejects = Follower, nil, nil // the leader answered: follow it again
	r.lastLeaderContactMs = nowMs
	r.deadlineMs = r.fetchDeadline(nowMs)
	s.Data = append(s.Data, m.SnapshotBytes...)
	if int64(len(s.Data)) == m.SnapshotSize {
		r.installSnapshot(s)
	}
	r.sendFetch(nowMs)
}

// installSnapshot replaces the follower's log and state with the leader's
// snapshot, which is committed.
func (r *Raft) installSnapshot(s *Snapshot) {
	r.snapFetch = nil
	clear(r.log.entries)
	r.log = entryLog{start: s.EndOffset, startEpoch: s.Epoch} // the snapshot wins over any tail of ours
	r.snapshot, r.snapshotDirty, r.snapshotInstall = s, true, true
	r.commit, r.applied = s.EndOffset, s.EndOffset
	r.unstableFrom, r.truncatePending = s.EndOffset, -1
	r.durableEnd = min(r.durableEnd, s.EndOffset)
}

func (r *Raft) truncate(end int64) {
	end = max(end, r.log.start) // only a planted bug asks to go below the snapshot
	if end >= r.log.endOffset() {
		return
	}
	r.log.truncateTo(end)
	if r.truncatePending < 0 || end < r.truncatePending {
		r.truncatePending = end
	}
	r.unstableFrom = min(r.unstableFrom, end)
	r.commit = min(r.commit, end) // only a planted bug truncates below it
}

// HasReady reports whether Ready has work, and no earlier Ready awaits Advance.
func (r *Raft) HasReady() bool {
	if r.readyOut != nil {
		return false
	}
	return r.hardDirty || r.truncatePending >= 0 || r.unstableFrom < r.log.endOffset() ||
		len(r.msgs) > 0 || r.applied < r.commit || r.snapshotDirty
}

// Ready returns the work to do; call Advance with it once done. Only one
// Ready is out at a time.
func (r *Raft) Ready() Ready {
	if r.readyOut != nil {
		panic("quorum: Ready before Advance of the previous one")
	}
	rd := Ready{TruncateTo: r.truncatePending, Messages: r.msgs}
	if r.hardDirty {
		hard := r.hard
		rd.HardState = &hard
	}
	if r.snapshotDirty {
		rd.Snapshot, rd.SnapshotInstall = r.snapshot, r.snapshotInstall
	}
	// Copies: a later truncation must not change what the caller persists.
	rd.Entries = slices.Clone(r.log.slice(r.unstableFrom, r.log.endOffset()))
	if r.applied < r.commit {
		rd.Committed = slices.Clone(r.log.slice(r.applied, r.commit))
	}
	r.hardDirty, r.truncatePending, r.unstableFrom, r.msgs = false, -1, r.log.endOffset(), nil
	r.snapshotDirty, r.snapshotInstall = false, false
	r.applied = max(r.applied, r.commit)
	r.readyOut = &rd
	return rd
}

// Advance reports that rd's hard state and entries are durable and its
// messages sent.
func (r *Raft) Advance(nowMs int64, rd Ready) {
	if r.readyOut == nil {
		panic("quorum: Advance without Ready")
	}
	r.readyOut = nil
	if rd.TruncateTo >= 0 {
		r.durableEnd = min(r.durableEnd, rd.TruncateTo)
	}
	if n := len(rd.Entries); n > 0 {
		r.durableEnd = rd.Entries[n-1].Offset + 1
	}
	if r.truncatePending >= 0 {
		r.durableEnd = min(r.durableEnd, r.truncatePending)
	}
	if s := rd.Snapshot; s != nil {
		// The snapshot is durable: the log behind it goes.
		if rd.SnapshotInstall {
			r.durableEnd = max(r.durableEnd, s.EndOffset)
		}
		r.log.compactTo(s.EndOffset, s.Epoch)
		r.unstableFrom = max(r.unstableFrom, r.log.start)
	}
	r.durableEnd = min(r.durableEnd, r.log.endOffset())
	r.maybeCommit(nowMs)
}
