package broker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/producer"
	"strand/sim/memdisk"
)

// TestAppendedBatchesMatchLogReader checks that a follower's producer-state
// catch-up sees the same batch headers from the fetch answer it just
// appended as from reading the log back (producer.LogReader), from where
// the append started and from anywhere else, and also when the answer is
// not what the log ends with.
func TestAppendedBatchesMatchLogReader(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := log.DefaultConfig()
		cfg.SegmentBytes = rapid.SampledFrom([]int64{600, 1 << 20}).Draw(t, "segmentBytes")
		l, err := log.Open(memdisk.New(memdisk.Options{}), "t-0", cfg, log.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// build encodes a batch at base and returns it with its next offset.
		build := func(base int64, label string) ([]byte, int64) {
			records := make([]batch.Record, rapid.IntRange(1, 4).Draw(t, label+"Records"))
			for i := range records {
				records[i].Value = []byte(label)
			}
			return batch.Build(batch.BuildSpec{BaseOffset: base, Records: records, Idempotent: true,
				ProducerID: rapid.Int64Range(0, 3).Draw(t, label+"Producer"), BaseSequence: int32(base)}), base + int64(len(records))
		}
		for i := rapid.IntRange(0, 5).Draw(t, "before"); i > 0; i-- {
			b, _ := build(l.LogEndOffset(), "before")
			if _, err := l.AppendAsFollower(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		leo := l.LogEndOffset()
		var answer []byte
		for i, next := rapid.IntRange(1, 5).Draw(t, "appended"), leo; i > 0; i-- {
			var b []byte
			b, next = build(next, "appended")
			answer = append(answer, b...)
		}
		if _, err := l.AppendAsFollower(answer, 0); err != nil {
			t.Fatal(err)
		}
		appendedFrom := leo
		if rapid.Bool().Draw(t, "wrongStart") {
			appendedFrom = rapid.Int64Range(0, leo+2).Draw(t, "appendedFrom")
		}
		from := leo
		if rapid.Bool().Draw(t, "behind") {
			from = rapid.Int64Range(0, leo).Draw(t, "from")
		}
		collect := func(read producer.BatchReader) []batch.Header {
			var headers []batch.Header
			if err := read(from, func(h batch.Header) error { headers = append(headers, h); return nil }); err != nil {
				t.Fatal(err)
			}
			return headers
		}
		want := collect(producer.LogReader(l))
		got := collect(appendedBatches(l, answer, appendedFrom))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("catch-up from %d (appended at %d, said %d): headers differ from the log's (-log +answer):\n%s", from, leo, appendedFrom, diff)
		}
	})
}

// The per-partition replica fetch delay (fetcher.go delayFetch): edge
// cases of a delayed partition (partition.fetchBackoff).

// delayFollowerAhead makes node follower's replica of key hold a leader epoch one
// ahead of what the other replicas hold, so that the leader answers its
// fetches UNKNOWN_LEADER_EPOCH, and runs until its fetch is delayed. It
// returns the state it applied (the other replicas catch up by applying it).
func delayFollowerAhead(t *testing.T, c *cluster, follower *Node, key partitionKey) metadata.PartitionState {
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

// delayVictim picks a partition of node 3's fetcher of node 2 other than r-0.
func delayVictim(f *fetcher) partitionKey {
	for _, k := range f.keys {
		if k != (partitionKey{"r", 0}) {
			return k
		}
	}
	return partitionKey{}
}

// TestFetchDelayAsksAPersistentErrorOncePerBackoff: a partition the leader
// answers with an error on every fetch is asked for at most once per
// replica.fetch.backoff.ms (no hot loop), and is asked for again after
// each delay (never stuck); while delayed it leaves the leader's session.
func TestFetchDelayAsksAPersistentErrorOncePerBackoff(t *testing.T) {
	c, leader, follower, f := idleSessionCluster(t, 12)
	key := delayVictim(f)
	victim := follower.parts.partitions[key]
	delayFollowerAhead(t, c, follower, key)
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

// TestFetchDelayEndsAtANewLeaderEpoch: a new leader epoch
// (same leader) ends a partition's delay at once: the next fetch names
// it, and acks=all on it completes well before the delay would have ended.
func TestFetchDelayEndsAtANewLeaderEpoch(t *testing.T) {
	c, _, follower, f := idleSessionCluster(t, 12)
	key := delayVictim(f)
	victim := follower.parts.partitions[key]
	ahead := delayFollowerAhead(t, c, follower, key)
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

// TestFetchDelayOfAFetchersOnlyPartition: a partition that is the only one its
// fetcher fetches leaves the fetcher idle while delayed (the leader's
// session still holds it, unchanged); when the delay ends the fetcher
// wakes, and the partition replicates once the leader caught up.
func TestFetchDelayOfAFetchersOnlyPartition(t *testing.T) {
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
	f := follower.parts.fetchers.byLeader[lead]
	key := partitionKey{"other", 0}
	if f == nil || len(f.keys) != 1 || f.keys[0] != key || !f.session.incremental() {
		t.Fatalf("node %d's fetcher of node %d: want other-0 alone, in an incremental session", followerID, lead)
	}
	ahead := delayFollowerAhead(t, c, follower, key)
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

// TestFetchDelayEndsWhenRetiredOrLeading: a delayed partition whose topic is
// deleted, or that becomes leader, has no delay left pending (no timer on
// a retired replica), and the fetcher goes on with the others.
func TestFetchDelayEndsWhenRetiredOrLeading(t *testing.T) {
	c, _, follower, f := idleSessionCluster(t, 12)
	key := delayVictim(f)
	victim := follower.parts.partitions[key]
	state := delayFollowerAhead(t, c, follower, key)

	// Becomes leader (a newer epoch naming node 3).
	lead := state
	lead.Leader, lead.LeaderEpoch, lead.PartitionEpoch = 3, state.LeaderEpoch+1, state.PartitionEpoch+1
	follower.parts.applyPartitionState(victim, lead)
	if victim.fetchBackoff != nil || follower.parts.fetchers.fetcherOf(victim) != nil {
		t.Fatalf("%v leads on node 3 but is still delayed (%v) or fetched (%v)", key, victim.fetchBackoff != nil, follower.parts.fetchers.fetcherOf(victim) != nil)
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
	delayFollowerAhead(t, c, follower, other.key)
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

// TestFetchDelayedPartitionLearnsLogStartAndHWWhenNamedAgain: while a
// partition is delayed (and forgotten from the leader's session) the leader
// takes records and moves its log start; named again after the delay, the
// follower gets the records, the HW and the log start.
func TestFetchDelayedPartitionLearnsLogStartAndHWWhenNamedAgain(t *testing.T) {
	c, leader, follower, f := idleSessionCluster(t, 12)
	key := delayVictim(f)
	victim := follower.parts.partitions[key]
	for i := range 4 {
		if r := c.produce(2, key.topic, key.index, -1, recordBatch("a", "b")); r.ErrorCode != 0 || r.BaseOffset != int64(2*i) {
			t.Fatalf("acks=all produce %d to %v: error %v offset %d", i, key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	c.waitFor("node 3's HW of "+key.String()+" reaches 8", 3000, func() bool { return victim.replica.HighWatermark() == 8 })
	ahead := delayFollowerAhead(t, c, follower, key)
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

// TestFetchDelayOnAMalformedDivergingEpochResetsTheSession: an answer with a diverging
// epoch whose end offset is negative (malformed) delays the partition and,
// as the leader's session counts it as told, makes the next fetch full;
// that full fetch leaves the delayed partition out.
func TestFetchDelayOnAMalformedDivergingEpochResetsTheSession(t *testing.T) {
	_, _, follower, f := idleSessionCluster(t, 12)
	_, sent := follower.parts.fetchers.buildReplicaFetch(f)
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
	follower.parts.fetchers.onReplicaFetched(f, sent, resp)
	if s.p.fetchBackoff == nil {
		t.Fatalf("%v is not delayed after a malformed diverging epoch", s.p.key)
	}
	if f.session.incremental() {
		t.Fatalf("after a malformed diverging epoch for %v the next fetch is incremental; want full", s.p.key)
	}
	req, all := follower.parts.fetchers.buildReplicaFetch(f)
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

// TestFetchDelayWithFlushEveryMessage: with flush.messages=1 a follower
// fetches again only once its log is durable (awaitingSync); a delayed
// partition's flush and its delay do not strand it, nor hold back the
// others: acks=all on r-0 completes at once while the victim is delayed,
// and the victim catches up once the leader knows its epoch.
func TestFetchDelayWithFlushEveryMessage(t *testing.T) {
	c := flushEveryMessageCluster(t)
	follower := c.nodes[3].node
	f := follower.parts.fetchers.byLeader[2]
	if f == nil || !f.session.incremental() {
		t.Fatalf("node 3 has no incremental fetch session with node 2")
	}
	key := delayVictim(f)
	victim := follower.parts.partitions[key]
	if !victim.syncAcks {
		t.Fatalf("%v does not sync every message on node 3", key)
	}
	for i := range 3 {
		if r := c.produce(2, key.topic, key.index, -1, recordBatch("a")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to %v: error %v offset %d", i, key, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	ahead := delayFollowerAhead(t, c, follower, key)
	for i := range 3 {
		startMs := follower.nowMs()
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to r-0: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		// Under 750 ms, not 500: with flush.messages=1 every acks=all
		// waits out a long poll (TestFlushEveryMessageAcksAllNotHeldByTheLongPoll);
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
