package quorum

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// raftFingerprint renders r's whole state for comparison, but for its
// configuration, the log's entries (their bounds and last epoch instead)
// and the queued messages (their number instead). A Tick that changes
// nothing leaves it equal.
func raftFingerprint(r *Raft) string {
	c := *r
	c.cfg = Config{}
	c.log = entryLog{start: r.log.start, startEpoch: r.log.startEpoch}
	c.msgs = nil
	return fmt.Sprintf("log [%d, %d) last epoch %d, %d messages queued, %+v",
		r.log.start, r.log.endOffset(), r.log.lastEpoch(), len(r.msgs), c)
}

// tickEffects is what any rule Tick implements changes when it fires:
// cheaper to take than raftFingerprint, for the chaos harness, which
// checks every tick it makes between deadlines.
type tickEffects struct {
	role                          Role
	hard                          HardState
	leader                        int32
	queued, parked                int
	deadlineMs, nextDeadlineMs    int64
	fetchRef                      uint64
	fetchSentMs, lastBeginSentMs  int64
	fetchOutstanding, snapFetched bool
}

func tickEffectsOf(r *Raft) tickEffects {
	return tickEffects{role: r.role, hard: r.hard, leader: r.leader, queued: len(r.msgs), parked: len(r.parked),
		deadlineMs: r.deadlineMs, nextDeadlineMs: r.NextDeadlineMs(), fetchRef: r.fetchRef,
		fetchSentMs: r.fetchSentMs, lastBeginSentMs: r.lastBeginSentMs, fetchOutstanding: r.fetchOutstanding, snapFetched: r.snapFetch != nil}
}

// drawPeerMessage draws a message from another voter to node 1 that r
// might plausibly receive: epochs around its own, responses to its fetch in
// flight, offsets within its log, so that random sequences reach every
// role (a leader with parked fetches, a follower fetching, a candidate).
func drawPeerMessage(t *rapid.T, r *Raft) Message {
	epoch := max(0, r.Epoch()+rapid.SampledFrom([]int32{-1, 0, 0, 0, 0, 0, 1}).Draw(t, "epochDelta"))
	from := rapid.SampledFrom(r.voters[1:]).Draw(t, "from")
	leader := rapid.SampledFrom([]int32{-1, from, 1}).Draw(t, "leader")
	m := Message{From: from, To: 1, Epoch: epoch, LeaderID: leader,
		DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1}
	kind := rapid.IntRange(0, 8).Draw(t, "kind")
	if r.role == Leader && rapid.Bool().Draw(t, "toTheLeader") {
		kind = rapid.SampledFrom([]int{3, 4, 4}).Draw(t, "leaderKind") // its followers' acknowledgements and fetches
	}
	if r.fetchOutstanding && r.leader > 1 && rapid.Bool().Draw(t, "answerTheFetch") {
		kind, m.From = 5, r.leader // mostly its leader's answer to the fetch in flight
	}
	switch kind {
	case 0:
		m.Type, m.PreVote = MsgVote, rapid.Bool().Draw(t, "preVote")
		m.LastEpoch, m.LastOffset = r.log.lastEpoch(), r.log.endOffset()+rapid.Int64Range(-1, 1).Draw(t, "lastOffsetDelta")
	case 1, 8: // mostly the answer the node waits for, so that it gets elected
		m.Type, m.PreVote = MsgVoteResp, (r.role == Prospective) != (rapid.IntRange(0, 4).Draw(t, "otherVoteKind") == 0)
		m.Granted = rapid.IntRange(0, 3).Draw(t, "grant") > 0
	case 2:
		m.Type, m.LeaderID = MsgBeginEpoch, from
	case 3:
		m.Type, m.ErrorCode = MsgBeginEpochResp, rapid.SampledFrom([]int16{errNone, errNone, errFencedLeaderEpoch}).Draw(t, "beginError")
	case 4:
		m.Type, m.LeaderID = MsgFetch, 1
		m.FetchOffset = r.log.endOffset() // caught up: a leader parks it
		if rapid.IntRange(0, 2).Draw(t, "lagging") == 0 {
			m.FetchOffset -= rapid.Int64Range(0, r.log.endOffset()).Draw(t, "fetchLag")
		}
		m.LastFetchedEpoch = r.log.lastEpoch()
		if m.FetchOffset > r.log.start {
			m.LastFetchedEpoch = r.log.epochAt(m.FetchOffset - 1)
		}
		m.MaxWaitMs = rapid.SampledFrom([]int64{0, DefaultFetchMaxWaitMs}).Draw(t, "maxWait")
	case 5:
		m.Type, m.Ref, m.LeaderID = MsgFetchResp, r.fetchRef, m.From
		m.ErrorCode = rapid.SampledFrom([]int16{errNone, errNone, errNotLeaderOrFollower}).Draw(t, "fetchError")
		m.HighWatermark = rapid.Int64Range(0, r.log.endOffset()+1).Draw(t, "hw")
		for i := range rapid.IntRange(0, 2).Draw(t, "entries") {
			m.Entries = append(m.Entries, Entry{Offset: r.log.endOffset() + int64(i), Epoch: epoch})
		}
	case 6:
		m.Type, m.LeaderID = MsgEndEpoch, from
		m.PreferredSuccessors = rapid.Permutation(r.voters).Draw(t, "successors")
	case 7:
		m.Type = MsgEndEpochResp
	}
	return m
}

// TestTickBeforeTheDeadlineDoesNothing: over random sequences of messages,
// proposals, resignations, Ready/Advance rounds and the passing of time,
// with 3 or 5 voters, a Tick at any time before NextDeadlineMs (just
// before it, in particular) changes no state, draws no random number and
// sends nothing, and a Tick at the deadline does something (the deadline
// is no earlier than it need be) and leaves a later one (Tick itself
// panics otherwise).
func TestTickBeforeTheDeadlineDoesNothing(t *testing.T) {
	// earlyTicks counts the ticks before a deadline by the state they hit,
	// so that the test can demand that every rule's state was reached.
	earlyTicks := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		voters := []int32{1, 2, 3, 4, 5}[:rapid.SampledFrom([]int{3, 5}).Draw(t, "voters")]
		draws := 0
		cfg := DefaultConfig(1, voters, func(limit int64) int64 {
			draws++
			return int64(draws*7919) % limit
		})
		r, err := New(cfg, HardState{VotedFor: -1}, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		nowMs := int64(0)
		// Start unattached, or as a candidate or the leader, which random
		// messages seldom make it.
		start := rapid.SampledFrom([]Role{Follower, Candidate, Leader, Leader}).Draw(t, "start")
		if start != Follower {
			nowMs = r.NextDeadlineMs()
			r.Tick(nowMs)
			for _, preVote := range []bool{true, false}[:int(start-Prospective)] {
				for _, v := range voters[1 : len(voters)/2+1] {
					r.Step(nowMs, Message{Type: MsgVoteResp, From: v, To: 1, Epoch: r.Epoch(), LeaderID: -1, PreVote: preVote, Granted: true})
				}
			}
			if r.Role() != start {
				t.Fatalf("%v in epoch %d, want %v", r.Role(), r.Epoch(), start)
			}
		}
		if start == Leader {
			if rapid.Bool().Draw(t, "parked") { // a caught-up follower's fetch waits
				r.Step(nowMs, Message{Type: MsgFetch, From: 2, To: 1, Epoch: r.Epoch(), LeaderID: 1,
					FetchOffset: r.EndOffset(), LastFetchedEpoch: r.Epoch(), MaxWaitMs: DefaultFetchMaxWaitMs})
				if len(r.parked) != 1 {
					t.Fatalf("a caught-up fetch was not parked: %d parked", len(r.parked))
				}
			}
		}
		tickEarly := func(atMs int64) {
			deadlineMs := r.NextDeadlineMs()
			if atMs >= deadlineMs {
				t.Fatalf("tickEarly at %d ms, not before the deadline %d ms", atMs, deadlineMs)
			}
			switch {
			case r.role == Leader && len(r.parked) > 0:
				earlyTicks["leader with parked fetches"]++
			case r.role == Leader:
				earlyTicks["leader"]++
			case r.leader >= 0 && r.fetchOutstanding:
				earlyTicks[r.role.String()+" fetching"]++
			case r.leader >= 0:
				earlyTicks[r.role.String()+" backing off after a failed fetch"]++
			default:
				earlyTicks[r.role.String()+" without a leader"]++
			}
			before, drawsBefore := raftFingerprint(r), draws
			r.Tick(atMs)
			if after := raftFingerprint(r); after != before || draws != drawsBefore {
				t.Fatalf("Tick at %d ms, before the deadline %d ms, changed the state (%d draws)\nbefore %s\nafter  %s",
					atMs, deadlineMs, draws-drawsBefore, before, after)
			}
		}
		for range rapid.IntRange(1, 150).Draw(t, "actions") {
			deadlineMs := r.NextDeadlineMs()
			switch rapid.SampledFrom([]int{0, 1, 1, 2, 3, 3, 3, 4, 5, 6}).Draw(t, "action") {
			case 0: // time passes, up to past the fetch timeout
				nowMs += rapid.Int64Range(0, 3*DefaultFetchTimeoutMs).Draw(t, "elapseMs")
			case 1:
				r.Step(nowMs, drawPeerMessage(t, r))
			case 2: // a tick at whatever time it is
				if nowMs < deadlineMs {
					tickEarly(nowMs)
				} else {
					r.Tick(nowMs)
				}
			case 3: // ticks just before and at the deadline, as the driver's timer
				if deadlineMs == NoDeadlineMs {
					break
				}
				if deadlineMs-1 >= nowMs {
					tickEarly(deadlineMs - 1)
				}
				if deadlineMs >= nowMs {
					before := raftFingerprint(r)
					nowMs = deadlineMs
					r.Tick(nowMs)
					if raftFingerprint(r) == before {
						t.Fatalf("Tick at the deadline %d ms changed nothing: %s", deadlineMs, before)
					}
				} else {
					r.Tick(nowMs)
				}
			case 4:
				if r.HasReady() {
					r.Advance(nowMs, r.Ready())
				}
			case 5:
				_, _ = r.Propose(nowMs, []byte("x")) // fails unless leading
			case 6:
				if rapid.IntRange(0, 9).Draw(t, "resign") == 0 {
					r.Resign(nowMs)
				}
			}
		}
	})
	t.Logf("ticks before the deadline: %v", earlyTicks)
	for _, state := range []string{"leader with parked fetches", "leader", "Follower fetching", "Follower backing off after a failed fetch",
		"Follower without a leader", "Prospective without a leader", "Candidate without a leader"} {
		if earlyTicks[state] == 0 {
			t.Errorf("no tick before the deadline of a %s", state)
		}
	}
}
