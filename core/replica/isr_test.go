package replica

import "testing"

// TestCaughtUpRuleForTrailingFollower is Kafka's case for the second clause
// of the caught-up rule: a follower always one produce behind the LEO, but
// at least at the LEO the leader had at its previous fetch, stays caught up.
func TestCaughtUpRuleForTrailingFollower(t *testing.T) {
	f := freshProgress(2, true, 0)
	leo := int64(0)
	for now := int64(100); now <= 1000; now += 100 {
		leo++                      // one produce arrives before each fetch
		f.onFetch(leo-1, leo, now) // the follower fetches from the previous LEO
		if now > 100 && f.lastCaughtUpTimeMs != now-100 {
			t.Fatalf("at %d: lastCaughtUpTimeMs %d, want the previous fetch time %d", now, f.lastCaughtUpTimeMs, now-100)
		}
	}
	if !f.caughtUp(leo, 1000, 150) {
		t.Errorf("trailing follower not caught up")
	}
	stuck := freshProgress(3, true, 0)
	stuck.onFetch(0, 5, 100)
	stuck.onFetch(0, 6, 200) // never reaches any earlier leader LEO
	if stuck.lastCaughtUpTimeMs != 0 || stuck.caughtUp(6, 200, 150) {
		t.Errorf("stuck follower: lastCaughtUpTimeMs %d, caught up %v; want 0 and false", stuck.lastCaughtUpTimeMs, stuck.caughtUp(6, 200, 150))
	}
	if never := freshProgress(4, false, 0); never.caughtUp(1, 0, 150) {
		t.Errorf("a follower that never fetched counts as caught up at time 0")
	}
}
