package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// Review V7 of the per-partition replica fetch backoff (d8e503b): edge
// cases of a delayed partition (partition.fetchBackoff).

// v7DelayAhead makes node follower's replica of key hold a leader epoch one
// ahead of what the other replicas hold, so that the leader answers its
// fetches UNKNOWN_LEADER_EPOCH, and runs until its fetch is delayed. It
// returns the state it applied (the other replicas catch up by applying it).
func v7DelayAhead(t *testing.T, c *cluster, follower *Node, key partitionKey) metadata.PartitionState {
	t.Helper()
	p := follower.parts.partitions[key]
	topic, ok := follower.meta.image.TopicByName(key.topic)
	if !ok {
		t.Fatalf("node %d does not know topic %q", follower.id, key.topic)
	}
	state, ok := follower.meta.image.Partition(topic.ID, key.index)
	if !ok {
		t.Fatalf("node %d does not know %v", follower.id, key)
	}
	ahead := state
	ahead.LeaderEpoch++
	ahead.PartitionEpoch++
	follower.parts.applyPartitionState(p, ahead)
	c.waitFor(key.String()+"'s fetch delayed by UNKNOWN_LEADER_EPOCH", 2000, func() bool { return p.fetchBackoff != nil })
	return ahead
}

// v7Victim picks a partition of node 3's fetcher of node 2 other than r-0.
func v7Victim(f *fetcher) partitionKey {
	for _, k := range f.keys {
		if k != (partitionKey{"r", 0}) {
			return k
		}
	}
	return partitionKey{}
}

// TestV7PersistentErrorIsFetchedOncePerBackoff: a partition the leader
// answers with an error on every fetch is asked for at most once per
// replica.fetch.backoff.ms (no hot loop), and is asked for again after
// each delay (never stuck); while delayed it leaves the leader's session.
func TestV7PersistentErrorIsFetchedOncePerBackoff(t *testing.T) {
	c, leader, follower, f := idleSessionCluster(t, 12)
	key := v7Victim(f)
	victim := follower.parts.partitions[key]
	v7DelayAhead(t, c, follower, key)
	c.run(100) // the next fetch forgets it
	s := leader.parts.fetchSessions.get(f.session.id)
	if s == nil {
		t.Fatalf("the leader lost node 3's session %d", f.session.id)
	}
	if s.index[fetchSessionKey{topic: key.topic, partition: key.index}] != nil {
		t.Fatalf("%v is still in the leader's session while its fetch is delayed", key)
	}
	// Each delay is a new timer: a retry that errors again within one
	// millisecond of the delay's end still shows as a new one.
	onsets, last := 0, victim.fetchBackoff
	const windowMs = 6000
	fetchesBefore := leader.FetchSessionStats().IncrementalFetches
	for range windowMs {
		c.run(1)
		if victim.fetchBackoff != nil && victim.fetchBackoff != last {
			onsets++
		}
		last = victim.fetchBackoff
	}
	fetches := leader.FetchSessionStats().IncrementalFetches - fetchesBefore
	t.Logf("%v: %d delays, node 2 answered %d incremental fetches in %d ms", key, onsets, fetches, windowMs)
	// Nodes 1 and 3 long-poll node 2 every 500 ms, and node 3 fetches once
	// more per retry: about 30. A partition fetched at once after each
	// error would make thousands.
	if fetches > 2*windowMs/replicaFetchMaxWaitMs+2*windowMs/replicaFetchBackoffMs+10 {
		t.Fatalf("node 2 answered %d incremental fetches in %d ms while %v errored on every fetch: a hot loop", fetches, windowMs, key)
	}
	// Every retry costs a backoff (1 s) plus at most one long poll of the
	// other partitions (500 ms) before the partition is named again. A hot
	// loop would show hundreds.
	if onsets > windowMs/replicaFetchBackoffMs+1 || onsets < windowMs/(replicaFetchBackoffMs+replicaFetchMaxWaitMs)-1 {
		t.Fatalf("%v errored %d times in %d ms; want about one per %d..%d ms", key, onsets, windowMs, replicaFetchBackoffMs, replicaFetchBackoffMs+replicaFetchMaxWaitMs)
	}
}

// TestV7NewLeaderEpochEndsTheDelayAndFetchesAtOnce: a new leader epoch
// (same leader) ends a partition's delay at once: the next fetch names
// it, and acks=all on it completes well before the delay would have ended.
func TestV7NewLeaderEpochEndsTheDelayAndFetchesAtOnce(t *testing.T) {
	c, _, follower, f := idleSessionCluster(t, 12)
	key := v7Victim(f)
	victim := follower.parts.partitions[key]
	ahead := v7DelayAhead(t, c, follower, key)
	newer := ahead
	newer.LeaderEpoch++
	newer.PartitionEpoch++
	for _, id := range []int32{2, 1, 3} {
		n := c.nodes[id].node
		n.parts.applyPartitionState(n.parts.partitions[key], newer)
	}
	if victim.fetchBackoff != nil {
		t.Fatalf("%v is still delayed after leader epoch %d", key, newer.LeaderEpoch)
	}
	startMs := follower.nowMs()
	if r := c.produce(2, key.topic, key.index, -1, recordBatch("x")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("acks=all produce to %v: error %v offset %d", key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if tookMs := follower.nowMs() - startMs; tookMs >= replicaFetchBackoffMs*3/4 {
		t.Fatalf("acks=all to %v took %d ms after the new epoch ended its delay; want well under %d", key, tookMs, replicaFetchBackoffMs)
	}
}

// TestV7DelayedAloneInItsFetcher: a partition that is the only one its
// fetcher fetches leaves the fetcher idle while delayed (the leader's
// session still holds it, unchanged); when the delay ends the fetcher
// wakes, and the partition replicates once the leader caught up.
func TestV7DelayedAloneInItsFetcher(t *testing.T) {
	c := threeNodes(t)
	c.run(3000)
	lead := c.leaderOf("other", 0)
	if lead == 2 {
		t.Fatalf("other-0 is led by node 2, which also leads r-0; want it alone in a fetcher")
	}
	followerID := int32(3)
	if lead == 3 {
		followerID = 2
	}
	follower := c.nodes[followerID].node
	f := follower.parts.fetchers[lead]
	key := partitionKey{"other", 0}
	if f == nil || len(f.keys) != 1 || f.keys[0] != key || !f.session.incremental() {
		t.Fatalf("node %d's fetcher of node %d: want other-0 alone, in an incremental session", followerID, lead)
	}
	ahead := v7DelayAhead(t, c, follower, key)
	c.run(50)
	if f.inFlight {
		t.Fatalf("node %d's fetcher of node %d has a fetch in flight while its only partition is delayed", followerID, lead)
	}
	if _, held := f.session.asked.find(key); !held || !f.session.incremental() {
		t.Fatalf("node %d's idle fetcher no longer counts other-0 in the leader's session (held %v, incremental %v)", followerID, held, f.session.incremental())
	}
	for _, id := range []int32{1, 2, 3} {
		if id != followerID {
			n := c.nodes[id].node
			n.parts.applyPartitionState(n.parts.partitions[key], ahead)
		}
	}
	startMs := follower.nowMs()
	if r := c.produce(lead, "other", 0, -1, recordBatch("y")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("acks=all produce to other-0: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if tookMs := follower.nowMs() - startMs; tookMs > replicaFetchBackoffMs+replicaFetchMaxWaitMs {
		t.Fatalf("acks=all to other-0 took %d ms; want at most the rest of the delay", tookMs)
	}
	p := follower.parts.partitions[key]
	c.waitFor("the follower's HW of other-0 reaches 1", 2000, func() bool { return p.replica.HighWatermark() == 1 })
}

// TestV7RetiredOrLeadingDuringTheDelay: a delayed partition whose topic is
// deleted, or that becomes leader, has no delay left pending (no timer on
// a retired replica), and the fetcher goes on with the others.
func TestV7RetiredOrLeadingDuringTheDelay(t *testing.T) {
	c, _, follower, f := idleSessionCluster(t, 12)
	key := v7Victim(f)
	victim := follower.parts.partitions[key]
	state := v7DelayAhead(t, c, follower, key)

	// Becomes leader (a newer epoch naming node 3).
	lead := state
	lead.Leader, lead.LeaderEpoch, lead.PartitionEpoch = 3, state.LeaderEpoch+1, state.PartitionEpoch+1
	follower.parts.applyPartitionState(victim, lead)
	if victim.fetchBackoff != nil || follower.parts.fetcherOf(victim) != nil {
		t.Fatalf("%v leads on node 3 but is still delayed (%v) or fetched (%v)", key, victim.fetchBackoff != nil, follower.parts.fetcherOf(victim) != nil)
	}

	// Another partition of the same topic, delayed, then its topic deleted.
	var other *partition
	for _, k := range f.keys {
		if k.topic == key.topic && k != key {
			other = follower.parts.partitions[k]
			break
		}
	}
	if other == nil {
		t.Fatalf("no second partition of %q in node 3's fetcher of node 2", key.topic)
	}
	v7DelayAhead(t, c, follower, other.key)
	c.deleteTopic(1, key.topic)
	c.waitFor("node 3 retires "+other.key.String(), 5000, func() bool { return other.retired })
	if other.fetchBackoff != nil {
		t.Fatalf("retired %v still has its fetch delay pending", other.key)
	}
	for i := range 3 {
		startMs := follower.nowMs()
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to r-0: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		if tookMs := follower.nowMs() - startMs; tookMs >= replicaFetchBackoffMs/2 {
			t.Fatalf("acks=all produce %d to r-0 took %d ms after the deletion", i, tookMs)
		}
	}
}

// TestV7DelayedPartitionLearnsLogStartAndHWWhenNamedAgain: while a
// partition is delayed (and forgotten from the leader's session) the leader
// takes records and moves its log start; named again after the delay, the
// follower gets the records, the HW and the log start.
func TestV7DelayedPartitionLearnsLogStartAndHWWhenNamedAgain(t *testing.T) {
	c, leader, follower, f := idleSessionCluster(t, 12)
	key := v7Victim(f)
	victim := follower.parts.partitions[key]
	for i := range 4 {
		if r := c.produce(2, key.topic, key.index, -1, recordBatch("a", "b")); r.ErrorCode != 0 || r.BaseOffset != int64(2*i) {
			t.Fatalf("acks=all produce %d to %v: error %v offset %d", i, key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	c.waitFor("node 3's HW of "+key.String()+" reaches 8", 3000, func() bool { return victim.replica.HighWatermark() == 8 })
	ahead := v7DelayAhead(t, c, follower, key)
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(2)
	req.TimeoutMillis = 10
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = key.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = key.index, 6
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.request(2, req)
	lp := leader.parts.partitions[key]
	if got := lp.log.LogStartOffset(); got != 6 {
		t.Fatalf("the leader's log start of %v is %d after DeleteRecords; want 6", key, got)
	}
	if r := c.produce(2, key.topic, key.index, 1, recordBatch("c", "d")); r.ErrorCode != 0 || r.BaseOffset != 8 {
		t.Fatalf("acks=1 produce to %v: error %v offset %d", key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	for _, id := range []int32{2, 1} {
		n := c.nodes[id].node
		n.parts.applyPartitionState(n.parts.partitions[key], ahead)
	}
	c.waitFor(key.String()+" converges on node 3", 3000, func() bool {
		return victim.log.LogEndOffset() == 10 && victim.replica.HighWatermark() == 10 && victim.log.LogStartOffset() == 6 &&
			lp.replica.HighWatermark() == 10
	})
}

// TestV7MalformedDivergingEpochDelaysAndResets: an answer with a diverging
// epoch whose end offset is negative (malformed) delays the partition and,
// as the leader's session counts it as told, makes the next fetch full;
// that full fetch leaves the delayed partition out.
func TestV7MalformedDivergingEpochDelaysAndResets(t *testing.T) {
	_, _, follower, f := idleSessionCluster(t, 12)
	_, sent := follower.parts.buildReplicaFetch(f)
	var s sentFetch
	for _, sf := range sent {
		if sf.p.key != (partitionKey{"r", 0}) {
			s = sf
			break
		}
	}
	if s.p == nil {
		t.Fatalf("node 3's fetch of node 2 asks for no idle partition")
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = f.session.id
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = s.p.key.topic
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.HighWatermark, rp.LogStartOffset = s.p.key.index, 0, 0
	rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = s.req.LastFetchedEpoch+5, -5
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	follower.parts.onReplicaFetched(f, sent, resp)
	if s.p.fetchBackoff == nil {
		t.Fatalf("%v is not delayed after a malformed diverging epoch", s.p.key)
	}
	if f.session.incremental() {
		t.Fatalf("after a malformed diverging epoch for %v the next fetch is incremental; want full", s.p.key)
	}
	req, all := follower.parts.buildReplicaFetch(f)
	for _, t2 := range req.Topics {
		for _, p := range t2.Partitions {
			if (partitionKey{t2.Topic, p.Partition}) == s.p.key {
				t.Fatalf("the full fetch after the delay began names delayed %v", s.p.key)
			}
		}
	}
	if _, ok := all.find(s.p.key); ok {
		t.Fatalf("the fetch after the delay began asks for delayed %v", s.p.key)
	}
}

// TestV7DelayWithFlushEveryMessage: with flush.messages=1 a follower
// fetches again only once its log is durable (awaitingSync); a delayed
// partition's flush and its delay do not strand it, nor hold back the
// others: acks=all on r-0 completes at once while the victim is delayed,
// and the victim catches up once the leader knows its epoch.
func TestV7DelayWithFlushEveryMessage(t *testing.T) {
	c := flushEveryMessageCluster(t)
	follower := c.nodes[3].node
	f := follower.parts.fetchers[2]
	if f == nil || !f.session.incremental() {
		t.Fatalf("node 3 has no incremental fetch session with node 2")
	}
	key := v7Victim(f)
	victim := follower.parts.partitions[key]
	if !victim.syncAcks {
		t.Fatalf("%v does not sync every message on node 3", key)
	}
	for i := range 3 {
		if r := c.produce(2, key.topic, key.index, -1, recordBatch("a")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to %v: error %v offset %d", i, key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	ahead := v7DelayAhead(t, c, follower, key)
	for i := range 3 {
		startMs := follower.nowMs()
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to r-0: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		// Under 750 ms, not 500: with flush.messages=1 every acks=all
		// waits out a long poll (TestV7FlushEveryMessageAcksAllNotHeldByTheLongPoll);
		// a fetcher held back by the delay would wait it out (1 s).
		if tookMs := follower.nowMs() - startMs; tookMs >= replicaFetchBackoffMs*3/4 {
			t.Fatalf("acks=all produce %d to r-0 took %d ms while %v was delayed", i, tookMs, key)
		}
	}
	if r := c.produce(2, key.topic, key.index, 1, recordBatch("b", "c")); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("acks=1 produce to %v: error %v offset %d", key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	for _, id := range []int32{2, 1} {
		n := c.nodes[id].node
		n.parts.applyPartitionState(n.parts.partitions[key], ahead)
	}
	lp := c.nodes[2].node.parts.partitions[key]
	c.waitFor(key.String()+" converges on node 3, durably", 3000, func() bool {
		return victim.log.LogEndOffset() == 5 && victim.log.RecoveryPoint() == 5 && victim.replica.HighWatermark() == 5 && lp.replica.HighWatermark() == 5
	})
}

// TestV7FlushEveryMessageAcksAllNotHeldByTheLongPoll (a pre-existing bug
// next to the change, found in review V7): with flush.messages=1 a
// follower leaves a partition out of its next fetch until its Sync
// completes (awaitingSync). When the fetcher also fetches other partitions
// of that leader, that next fetch goes out without it and the leader
// parks it for replica.fetch.wait.max.ms; the Sync completes within a
// millisecond, but onDurable finds that fetch in flight, so the LEO that
// moves the HW is reported only 500 ms later: every acks=all produce takes
// 500 ms (1 ms with the same cluster without the idle topic, or without
// flush.messages=1). Kafka's follower flushes inline before its next fetch.
//
// It failed (501 ms) until the fetcher waited for its partitions' Syncs
// instead of sending a fetch without them (review V7's fix in
// buildReplicaFetch).
func TestV7FlushEveryMessageAcksAllNotHeldByTheLongPoll(t *testing.T) {
	c := flushEveryMessageCluster(t)
	follower := c.nodes[3].node
	for i := range 3 {
		startMs := follower.nowMs()
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to r-0: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		if tookMs := follower.nowMs() - startMs; tookMs >= replicaFetchMaxWaitMs/2 {
			t.Fatalf("acks=all produce %d to r-0 with flush.messages=1 took %d ms; want well under replica.fetch.wait.max.ms (%d): the followers' Syncs take about 1 ms", i, tookMs, replicaFetchMaxWaitMs)
		}
	}
}

// flushEveryMessageCluster is three nodes with log.flush.interval.messages
// 1 (min.insync.replicas 2, RF 3), r-0 led by node 2, and topics "other"
// and "idle" (12 partitions) beside it, run for 3 s.
func flushEveryMessageCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3", "log.flush.interval.messages": "1"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3)
	c.createTopic(3, "r", 1, 3)
	c.createTopic(1, "idle", 12, 3)
	c.run(3000)
	if l := c.leaderOf("r", 0); l != 2 {
		t.Fatalf("leader of r-0 is %d, want 2", l)
	}
	return c
}
