package broker

import (
	"testing"

	"strand/core/replica"

	"github.com/twmb/franz-go/pkg/kerr"
)

// requestedPartitions lists the partitions a replica fetch built now would
// name and forget, and counts those it fetches.
func requestedPartitions(f *fetcher, n *Node) (named []partitionKey, fetched int, forgotten []partitionKey) {
	req, all := n.parts.fetchers.buildReplicaFetch(f)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			named = append(named, partitionKey{t.Topic, p.Partition})
		}
	}
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			forgotten = append(forgotten, partitionKey{t.Topic, p})
		}
	}
	return named, len(all), forgotten
}

// namesOnly reports whether named holds no key but allowed.
func namesOnly(named []partitionKey, allowed partitionKey) bool {
	for _, k := range named {
		if k != allowed {
			return false
		}
	}
	return true
}

// idleSessionCluster is threeNodes (r-0 led by node 2) with a topic "idle"
// of idlePartitions more, run for 3 s: by then node 3's fetcher of node 2
// (returned with both nodes) holds an incremental session.
func idleSessionCluster(t *testing.T, idlePartitions int32) (c *cluster, leader, follower *Node, f *fetcher) {
	t.Helper()
	c = threeNodes(t)
	c.createTopic(1, "idle", idlePartitions, 3)
	c.run(3000)
	leader, follower = c.nodes[2].node, c.nodes[3].node
	f = follower.parts.fetchers.byLeader[2]
	if f == nil || f.session.id == 0 || !f.session.incremental() {
		t.Fatalf("after 3 s node 3 has no incremental fetch session with node 2 (fetcher %v)", f != nil)
	}
	return c, leader, follower, f
}

// TestReplicaFetcherUsesIncrementalSessions: a follower fetches through a
// fetch session (KIP-227, as Kafka's replica fetchers do). Once the session
// is set up, a fetch names only the partitions whose fetch changed, so with
// nothing produced it names none; acks=all still completes, which needs the
// followers' next fetches; a partition the fetcher stops fetching is
// forgotten; and when the leader loses the session, the follower falls back
// to a full fetch and replication goes on.
func TestReplicaFetcherUsesIncrementalSessions(t *testing.T) {
	c, leader, follower, f := idleSessionCluster(t, 12)
	named, fetched, forgotten := requestedPartitions(f, follower)
	if fetched < 5 || len(named) != 0 || len(forgotten) != 0 {
		t.Fatalf("idle fetch: names %v, forgets %v, of %d fetched; want none and none of at least 5 (r-0 and the idle ones node 2 leads)", named, forgotten, fetched)
	}
	before := leader.FetchSessionStats().IncrementalFetches

	for i := range 5 {
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	if got := leader.FetchSessionStats().IncrementalFetches - before; got < 5 {
		t.Fatalf("the leader answered %d incremental fetches during 5 acks=all produces; want at least 5", got)
	}
	c.waitFor("node 3 caught up with r-0", 5000, func() bool {
		return follower.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset() == 5
	})

	// A partition the fetcher no longer fetches is forgotten, and leaves
	// the leader's session; fetched again, it is named and joins it again.
	// (A fetch is in flight: r-0's position in it is not yet answered, so
	// a fetch built now may name r-0 again; no other.)
	r0 := partitionKey{"r", 0}
	gone := f.keys[0]
	inLeaderSession := func() bool {
		s := leader.parts.fetchSessions.get(f.session.id)
		return s != nil && s.index[fetchSessionKey{topic: gone.topic, partition: gone.index}] != nil
	}
	if !inLeaderSession() {
		t.Fatalf("%v is not in the leader's session %d", gone, f.session.id)
	}
	f.remove(gone)
	if named, _, forgotten := requestedPartitions(f, follower); !namesOnly(named, r0) || len(forgotten) != 1 || forgotten[0] != gone {
		t.Fatalf("after removing %v: names %v, forgets %v; want at most r-0, and %v", gone, named, forgotten, gone)
	}
	c.run(1500) // idle fetches wait 500 ms: several are answered
	if inLeaderSession() {
		t.Fatalf("%v is still in the leader's session %d after the fetcher forgot it", gone, f.session.id)
	}
	follower.parts.fetchers.follow(follower.parts.partitions[gone], 2)
	c.run(1500)
	if !inLeaderSession() {
		t.Fatalf("%v did not join the leader's session %d again", gone, f.session.id)
	}
	if named, _, forgotten := requestedPartitions(f, follower); !namesOnly(named, r0) || len(forgotten) != 0 {
		t.Fatalf("after following %v again: names %v, forgets %v; want at most r-0, and none", gone, named, forgotten)
	}

	// The leader loses the session (a restart or an eviction would): the
	// follower's next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND,
	// and a full fetch makes a new session.
	old := f.session.id
	leader.parts.fetchSessions.remove(old)
	if r := c.produce(2, "r", 0, -1, recordBatch("after")); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("acks=all after the session was lost: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	c.run(1000)
	if f.session.id == 0 || f.session.id == old || !f.session.incremental() {
		t.Fatalf("after losing session %d the fetcher has session %d epoch %d; want a new incremental one", old, f.session.id, f.session.epoch)
	}
	c.waitFor("node 3 caught up with r-0 again", 5000, func() bool {
		return follower.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset() == 6
	})
}

// TestIdleIncrementalFetchesKeepFollowersInISR: a follower's
// incremental fetches of idle partitions name none of them, yet the leader
// executes them over every partition of the session, so each follower
// stays caught up: after several replica.lag.time.max.ms (30 s) of idle
// incremental fetches no ISR has shrunk, and the leader's session still
// holds every partition the follower fetches from it, with the position
// the follower would ask for (r-0's moved by records produced after the
// session was set up).
func TestIdleIncrementalFetchesKeepFollowersInISR(t *testing.T) {
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

// TestFollowerLearnsLogStartAfterDivergingFullFetch: a stale leader
// (cut off, it wrote acks=1 records the cluster never saw) rejoins as a
// follower. Its first fetch of the new leader is answered DivergingEpoch,
// with the leader's log start offset, which DeleteRecords moved while the
// old leader was away. The follower truncates (ActionTruncate) and does not
// apply that answer's log start, but the leader's fetch session counts it
// as told and, with nothing produced, would not name the partition again:
// the follower must still learn it (the next fetch is full), or it keeps
// records DeleteRecords deleted and holds the DeleteRecords low watermark
// back (a DeleteRecords to the same offset again would time out).
func TestFollowerLearnsLogStartAfterDivergingFullFetch(t *testing.T) {
	c := threeNodes(t)
	for _, v := range []string{"a", "b"} {
		if r := c.produce(2, "r", 0, -1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	c.isolate(2)
	if r := c.produce(2, "r", 0, 1, recordBatch("lost")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=1 on the isolated leader: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica.Role() == replica.RoleLeader
	})
	// Node 2 is fenced now: it does not hold the low watermark back.
	if r := c.deleteRecords(leader, "r", 1, 15000); r.ErrorCode != 0 || r.LowWatermark != 1 {
		t.Fatalf("DeleteRecords to 1 on the new leader: error %v low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	c.net.Heal()
	old := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("old leader rejoins as follower and truncates", 30000, func() bool {
		return old.replica.Role() == replica.RoleFollower && old.log.LogEndOffset() == 2
	})
	c.run(5000) // many idle fetches
	if got := old.log.LogStartOffset(); got != 1 {
		t.Errorf("the rejoined follower's log start is %d after 5 s of fetching; the leader's is 1 (DeleteRecords)", got)
	}
	if r := c.deleteRecords(leader, "r", 1, 3000); r.ErrorCode != 0 || r.LowWatermark != 1 {
		t.Errorf("DeleteRecords to 1 again: error %v low watermark %d; want done, 1", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}
