package broker

import (
	"testing"
)

// TestReviewIdleIncrementalFetchesKeepFollowersInISR: a follower's
// incremental fetches of idle partitions name none of them, yet the leader
// executes them over every partition of the session, so each follower
// stays caught up: after several replica.lag.time.max.ms (30 s) of idle
// incremental fetches no ISR has shrunk, and the leader's session still
// holds every partition the follower fetches from it, with the position
// the follower would ask for (r-0's moved by records produced after the
// session was set up).
func TestReviewIdleIncrementalFetchesKeepFollowersInISR(t *testing.T) {
	c, leader, _, f := idleSessionCluster(t, 6)
	// Records produced now move r-0's fetch position through incremental
	// fetches that name it: the leader must cache the new position.
	for i := range 3 {
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d: error %d offset %d", i, r.ErrorCode, r.BaseOffset)
		}
	}
	before := leader.FetchSessionStats().IncrementalFetches
	c.run(100_000)
	if got := leader.FetchSessionStats().IncrementalFetches - before; got < 100 {
		t.Fatalf("node 2 answered %d incremental fetches in 100 s; want at least 100 (idle fetches wait 500 ms)", got)
	}
	img := c.nodes[1].node.controllerRole.ctrl.Image()
	for _, topic := range []string{"r", "other", "idle"} {
		for i := int32(0); ; i++ {
			s, ok := img.PartitionByName(topic, i)
			if !ok {
				break
			}
			if len(s.ISR) != 3 {
				t.Errorf("%s-%d: ISR %v after 100 s idle; want all 3 replicas", topic, i, s.ISR)
			}
		}
	}
	s := leader.parts.fetchSessions.get(f.session.id)
	if s == nil {
		t.Fatalf("node 2 lost node 3's session %d", f.session.id)
	}
	fetched := 0
	for _, k := range f.keys {
		_, fr, ok := f.partitions[k].replica.NextFetch()
		if !ok {
			continue
		}
		fetched++
		sp := s.index[fetchSessionKey{topic: k.topic, partition: k.index}]
		if sp == nil {
			t.Errorf("%v: fetched by node 3 but not in node 2's session", k)
			continue
		}
		if sp.fetchOffset != fr.FetchOffset || sp.currentLeaderEpoch != fr.CurrentLeaderEpoch || sp.lastFetchedEpoch != fr.LastFetchedEpoch || sp.logStartOffset != fr.LogStartOffset {
			t.Errorf("%v: node 2's session holds offset %d epoch %d last %d start %d; node 3 would ask %+v",
				k, sp.fetchOffset, sp.currentLeaderEpoch, sp.lastFetchedEpoch, sp.logStartOffset, fr)
		}
	}
	if fetched < 3 || len(s.partitions) != fetched {
		t.Errorf("node 3 fetches %d partitions from node 2, whose session holds %d; want the same, at least 3", fetched, len(s.partitions))
	}
}
