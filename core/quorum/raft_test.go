package quorum

import (
	"testing"
)

func zeroRand(int64) int64 { return 0 }

func newTestRaft(t *testing.T, id int32, voters []int32, hard HardState, entries []Entry, bugs Bugs) *Raft {
	t.Helper()
	cfg := DefaultConfig(id, voters, zeroRand)
	cfg.Bugs = bugs
	r, err := New(cfg, hard, nil, entries, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findMsg(rd Ready, typ MsgType, to int32) (Message, bool) {
	for _, m := range rd.Messages {
		if m.Type == typ && m.To == to {
			return m, true
		}
	}
	return Message{}, false
}

// TestVoteIsDurableBeforeItIsAnswered: the grant leaves in the same Ready
// as the hard state recording it, so the driver sends it only after the
// vote is synced; a second candidate of the same epoch is refused, even
// after a restart from the durable hard state; raft-vote-twice grants it.
func TestVoteIsDurableBeforeItIsAnswered(t *testing.T) {
	voters := []int32{1, 2, 3}
	r := newTestRaft(t, 1, voters, HardState{VotedFor: -1}, nil, Bugs{})
	r.Step(10, Message{Type: MsgVote, From: 2, To: 1, Epoch: 1, LastEpoch: 0, LastOffset: 0})
	rd := r.Ready()
	resp, ok := findMsg(rd, MsgVoteResp, 2)
	if !ok || !resp.Granted {
		t.Fatalf("vote for 2 not granted: %+v", rd.Messages)
	}
	if rd.HardState == nil || *rd.HardState != (HardState{Epoch: 1, VotedFor: 2}) {
		t.Fatalf("grant not persisted with its answer: hard state %+v", rd.HardState)
	}
	r.Advance(10, rd)

	r.Step(20, Message{Type: MsgVote, From: 3, To: 1, Epoch: 1})
	rd = r.Ready()
	if resp, _ := findMsg(rd, MsgVoteResp, 3); resp.Granted {
		t.Fatal("voted twice in epoch 1")
	}
	r.Advance(20, rd)

	restarted := newTestRaft(t, 1, voters, HardState{Epoch: 1, VotedFor: 2}, nil, Bugs{})
	restarted.Step(30, Message{Type: MsgVote, From: 3, To: 1, Epoch: 1})
	if resp, _ := findMsg(restarted.Ready(), MsgVoteResp, 3); resp.Granted {
		t.Fatal("voted twice in epoch 1 after a restart")
	}

	buggy := newTestRaft(t, 1, voters, HardState{Epoch: 1, VotedFor: 2}, nil, Bugs{VoteTwice: true})
	buggy.Step(30, Message{Type: MsgVote, From: 3, To: 1, Epoch: 1})
	if resp, _ := findMsg(buggy.Ready(), MsgVoteResp, 3); !resp.Granted {
		t.Fatal("raft-vote-twice did not vote twice")
	}
}

// TestLeaderCountsOnlyDurableEntries: a single voter elects itself, but
// commits its leader-change entry only once Advance reports it durable;
// raft-commit-early commits it at once.
func TestLeaderCountsOnlyDurableEntries(t *testing.T) {
	for _, early := range []bool{false, true} {
		r := newTestRaft(t, 1, []int32{1}, HardState{VotedFor: -1}, nil, Bugs{CommitEarly: early})
		r.Tick(DefaultElectionTimeoutMs) // unattached: the election timeout fires
		if r.Role() != Leader || r.Epoch() != 1 {
			t.Fatalf("single voter is %v in epoch %d", r.Role(), r.Epoch())
		}
		if got, want := r.CommittedOffset(), map[bool]int64{false: 0, true: 1}[early]; got != want {
			t.Fatalf("commitEarly=%v: committed %d before the entry is durable, want %d", early, got, want)
		}
		rd := r.Ready()
		if len(rd.Entries) != 1 || rd.Entries[0].Epoch != 1 || rd.HardState == nil || rd.HardState.VotedFor != 1 {
			t.Fatalf("first Ready: entries %+v hard %+v", rd.Entries, rd.HardState)
		}
		r.Advance(DefaultElectionTimeoutMs, rd)
		if r.CommittedOffset() != 1 {
			t.Fatalf("commitEarly=%v: committed %d after the entry is durable, want 1", early, r.CommittedOffset())
		}
	}
}

// TestFollowerReconcilesAtDivergingEpoch: a follower whose log has an
// uncommitted tail from an older epoch truncates where the leader's answer
// says and fetches from there with the epoch it then ends with.
func TestFollowerReconcilesAtDivergingEpoch(t *testing.T) {
	entries := []Entry{{Offset: 0, Epoch: 1}, {Offset: 1, Epoch: 1}, {Offset: 2, Epoch: 2}, {Offset: 3, Epoch: 2}}
	r := newTestRaft(t, 2, []int32{1, 2, 3}, HardState{Epoch: 3, VotedFor: -1}, entries, Bugs{})
	r.Step(0, Message{Type: MsgBeginEpoch, From: 1, To: 2, Epoch: 3, LeaderID: 1})
	rd := r.Ready()
	fetch, ok := findMsg(rd, MsgFetch, 1)
	if !ok || fetch.FetchOffset != 4 || fetch.LastFetchedEpoch != 2 {
		t.Fatalf("first fetch %+v", fetch)
	}
	r.Advance(0, rd)
	r.Step(5, Message{Type: MsgFetchResp, From: 1, To: 2, Ref: fetch.Ref, Epoch: 3, LeaderID: 1,
		DivergingEpoch: 1, DivergingEndOffset: 2, HighWatermark: 1})
	rd = r.Ready()
	if rd.TruncateTo != 2 || r.EndOffset() != 2 {
		t.Fatalf("truncated to %d (log end %d), want 2", rd.TruncateTo, r.EndOffset())
	}
	fetch, ok = findMsg(rd, MsgFetch, 1)
	if !ok || fetch.FetchOffset != 2 || fetch.LastFetchedEpoch != 1 {
		t.Fatalf("fetch after truncation %+v", fetch)
	}
	r.Advance(5, rd)
	r.Step(9, Message{Type: MsgFetchResp, From: 1, To: 2, Ref: fetch.Ref, Epoch: 3, LeaderID: 1, HighWatermark: 3,
		DivergingEpoch: -1, DivergingEndOffset: -1, Entries: []Entry{{Offset: 2, Epoch: 3, Data: []byte("x")}}})
	rd = r.Ready()
	if len(rd.Entries) != 1 || rd.Entries[0].Epoch != 3 || r.CommittedOffset() != 3 || len(rd.Committed) != 3 {
		t.Fatalf("after the fetch: entries %+v commit %d committed %d", rd.Entries, r.CommittedOffset(), len(rd.Committed))
	}
}

// TestLeaderAnswersInconsistentFetchWithDivergingEpoch: the leader's side
// of KIP-595's reconciliation.
func TestLeaderAnswersInconsistentFetchWithDivergingEpoch(t *testing.T) {
	entries := []Entry{{Offset: 0, Epoch: 1}, {Offset: 1, Epoch: 1}, {Offset: 2, Epoch: 3}}
	r := newTestRaft(t, 1, []int32{1}, HardState{Epoch: 3, VotedFor: 1}, entries, Bugs{})
	r.Tick(DefaultElectionTimeoutMs)
	if r.Role() != Leader {
		t.Fatalf("not leader: %v", r.Role())
	}
	r.Advance(DefaultElectionTimeoutMs, r.Ready())
	epoch := r.Epoch()
	r.Step(DefaultElectionTimeoutMs, Message{Type: MsgFetch, From: 7, To: 1, Epoch: epoch, FetchOffset: 4, LastFetchedEpoch: 2})
	rd := r.Ready()
	resp, ok := findMsg(rd, MsgFetchResp, 7)
	if !ok || resp.DivergingEpoch != 1 || resp.DivergingEndOffset != 2 {
		t.Fatalf("answer to an inconsistent fetch: %+v", resp)
	}
}

// TestResignedLeaderIsNotFollowedAgain: once its leader's EndQuorumEpoch
// has arrived, a voter takes no later message of that epoch naming that
// leader (a Fetch answer, a pre-vote answer or a BeginQuorumEpoch sent
// before the resignation and overtaken by it) as news of a leader: the
// leader resigned the epoch for good, and following it again would leave
// the voter waiting a whole fetch timeout (seeds 41 and 77 of
// TestResignHandsOverQuickly took 2.7 s instead of about 100 ms).
func TestResignedLeaderIsNotFollowedAgain(t *testing.T) {
	for _, late := range []Message{
		{Type: MsgFetchResp, From: 2, To: 1, Epoch: 1, LeaderID: 2, DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1},
		{Type: MsgVoteResp, From: 3, To: 1, Epoch: 1, LeaderID: 2, PreVote: true},
		{Type: MsgBeginEpoch, From: 2, To: 1, Epoch: 1, LeaderID: 2},
	} {
		r := newTestRaft(t, 1, []int32{1, 2, 3}, HardState{Epoch: 1, VotedFor: 2}, nil, Bugs{})
		r.Step(0, Message{Type: MsgBeginEpoch, From: 2, To: 1, Epoch: 1, LeaderID: 2})
		r.Step(5, Message{Type: MsgEndEpoch, From: 2, To: 1, Epoch: 1, LeaderID: 2, PreferredSuccessors: []int32{1, 3}})
		if r.LeaderID() != -1 {
			t.Fatalf("leader %d after its EndQuorumEpoch", r.LeaderID())
		}
		r.Tick(5) // the first successor stands at once: its backoff is 0 to 125 ms, and zeroRand draws 0
		if r.Role() != Prospective {
			t.Fatalf("%v after the resignation's backoff, want Prospective", r.Role())
		}
		r.Step(6, late)
		if r.LeaderID() != -1 || r.Role() != Prospective {
			t.Errorf("a late %v naming the resigned leader made the voter %v of leader %d", late.Type, r.Role(), r.LeaderID())
		}
	}
}
