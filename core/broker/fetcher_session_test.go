package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// requestedPartitions lists the partitions a replica fetch built now would
// name and forget, and counts those it fetches.
func requestedPartitions(f *fetcher, n *Node) (named []partitionKey, fetched int, forgotten []partitionKey) {
	req, all := n.parts.buildReplicaFetch(f)
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
	f = follower.parts.fetchers[2]
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
	follower.parts.follow(follower.parts.partitions[gone], 2)
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
