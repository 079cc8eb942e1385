package quorum

import "testing"

// TestReplicaProgressCaughtUp: a fetch from the leader's end is caught up
// now; a fetch that reaches the end the leader had at the previous fetch
// shows the replica was caught up at that previous fetch; a fetch that
// falls short changes only the last fetch and the log end offset.
func TestReplicaProgressCaughtUp(t *testing.T) {
	p := NewReplicaProgress(2)
	if p.LogEndOffset != -1 || p.LastFetchMs != -1 || p.LastCaughtUpMs != -1 {
		t.Fatalf("before any fetch: %+v, want -1 (unknown) throughout", p)
	}
	steps := []struct {
		nowMs, fetchOffset, leaderEnd int64
		caughtUpMs                    int64
	}{
		{100, 5, 10, -1},   // behind, first fetch: not known caught up
		{200, 10, 12, 100}, // reaches the end of the previous fetch: caught up at 100
		{300, 11, 14, 100}, // short of the previous end (12)
		{400, 14, 14, 400}, // at the end: caught up now
		{500, 14, 20, 400}, // the leader appended; the replica has not fetched it yet
	}
	for i, s := range steps {
		p.Fetched(s.nowMs, s.fetchOffset, s.leaderEnd)
		if p.LastCaughtUpMs != s.caughtUpMs || p.LastFetchMs != s.nowMs || p.LogEndOffset != s.fetchOffset {
			t.Errorf("step %d (fetch %d at %d ms, leader end %d): %+v, want caught up at %d", i, s.fetchOffset, s.nowMs,
				s.leaderEnd, p, s.caughtUpMs)
		}
	}
}
