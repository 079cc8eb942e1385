package quorum

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMajorityMatchIsLargestOffsetAMajorityHas: against brute force.
func TestMajorityMatchIsLargestOffsetAMajorityHas(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		matches := rapid.SliceOfN(rapid.Int64Range(0, 50), 1, 7).Draw(t, "matches")
		got := majorityMatch(matches)
		count := func(v int64) int {
			n := 0
			for _, m := range matches {
				if m >= v {
					n++
				}
			}
			return n
		}
		majority := len(matches)/2 + 1
		if count(got) < majority {
			t.Fatalf("majorityMatch(%v) = %d, held by only %d of %d", matches, got, count(got), len(matches))
		}
		if count(got+1) >= majority {
			t.Fatalf("majorityMatch(%v) = %d, but %d is held by a majority too", matches, got, got+1)
		}
	})
}

// TestNextCommitOnlyByCountingCurrentEpoch: the commit offset never goes
// back, never passes the majority match, and moves only onto an entry of
// the leader's epoch (Raft §5.4.2).
func TestNextCommitOnlyByCountingCurrentEpoch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		epochs := rapid.SliceOfN(rapid.Int32Range(1, 4), 1, 30).Draw(t, "epochs")
		slices.Sort(epochs)
		leaderEpoch := epochs[len(epochs)-1] + rapid.Int32Range(0, 1).Draw(t, "newer")
		end := int64(len(epochs))
		commit := rapid.Int64Range(0, end).Draw(t, "commit")
		majority := rapid.Int64Range(0, end).Draw(t, "majority")
		got := nextCommit(commit, majority, func(o int64) int32 { return epochs[o] }, leaderEpoch)
		switch {
		case got < commit:
			t.Fatalf("commit went back from %d to %d", commit, got)
		case got > commit && got != majority:
			t.Fatalf("commit moved to %d, not the majority match %d", got, majority)
		case got > commit && epochs[got-1] != leaderEpoch:
			t.Fatalf("commit moved onto offset %d of epoch %d by counting in epoch %d", got-1, epochs[got-1], leaderEpoch)
		case got == commit && majority > commit && epochs[majority-1] == leaderEpoch:
			t.Fatalf("commit stuck at %d though a majority has %d of the current epoch", commit, majority)
		}
	})
}

// TestLogUpToDateIsATotalPreorder: reflexive, total, transitive, and a
// larger last epoch wins whatever the lengths.
func TestLogUpToDateIsATotalPreorder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type pos struct {
			epoch int32
			end   int64
		}
		draw := func(name string) pos {
			return pos{rapid.Int32Range(0, 3).Draw(t, name+"Epoch"), rapid.Int64Range(0, 5).Draw(t, name+"End")}
		}
		a, b, c := draw("a"), draw("b"), draw("c")
		ge := func(x, y pos) bool { return logUpToDate(x.epoch, x.end, y.epoch, y.end) }
		if !ge(a, a) || (!ge(a, b) && !ge(b, a)) {
			t.Fatalf("not reflexive or total: %v %v", a, b)
		}
		if ge(a, b) && ge(b, c) && !ge(a, c) {
			t.Fatalf("not transitive: %v ≥ %v ≥ %v", a, b, c)
		}
		if a.epoch > b.epoch && !ge(a, b) {
			t.Fatalf("%v has a larger last epoch than %v but is not up to date", a, b)
		}
	})
}

// TestVoteGrantedAtMostOncePerEpoch: replaying any sequence of requests in
// one epoch through voteGranted, as stepVote does, grants at most one
// candidate; with raft-vote-twice it can grant two.
func TestVoteGrantedAtMostOncePerEpoch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		votedFor := rapid.SampledFrom([]int32{-1, 1, 2, 3}).Draw(t, "votedFor")
		granted := map[int32]bool{}
		if votedFor >= 0 {
			granted[votedFor] = true
		}
		for range rapid.IntRange(1, 8).Draw(t, "requests") {
			cand := rapid.Int32Range(1, 3).Draw(t, "candidate")
			if voteGranted(votedFor, cand, false, rapid.Bool().Draw(t, "upToDate"), false) {
				votedFor = cand
				granted[cand] = true
			}
		}
		if len(granted) > 1 {
			t.Fatalf("granted votes to %v in one epoch", granted)
		}
	})
	if !voteGranted(1, 2, false, true, true) {
		t.Fatal("raft-vote-twice does not grant a second vote")
	}
	if voteGranted(-1, 2, true, true, false) {
		t.Fatal("a voter that knows this epoch's leader granted a vote")
	}
}

// TestEndOffsetForEpoch: against a linear scan.
func TestEndOffsetForEpoch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		epochs := rapid.SliceOfN(rapid.Int32Range(1, 6), 0, 20).Draw(t, "epochs")
		slices.Sort(epochs)
		var l entryLog
		for i, e := range epochs {
			l.append(Entry{Offset: int64(i), Epoch: e})
		}
		q := rapid.Int32Range(0, 7).Draw(t, "epoch")
		gotEpoch, gotEnd := l.endOffsetForEpoch(q)
		wantEpoch, wantEnd := int32(-1), int64(0)
		for i, e := range epochs {
			if e <= q {
				wantEpoch, wantEnd = e, int64(i+1)
			}
		}
		if gotEpoch != wantEpoch || gotEnd != wantEnd {
			t.Fatalf("endOffsetForEpoch(%d) of %v = (%d, %d), want (%d, %d)", q, epochs, gotEpoch, gotEnd, wantEpoch, wantEnd)
		}
	})
}
