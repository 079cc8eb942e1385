package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReplicaFetcherDelaysOnlyTheFailingPartition: a partition whose fetch
// the leader answers with an error of its own (here UNKNOWN_LEADER_EPOCH:
// the follower applied a leader epoch the leader has not) waits out
// replica.fetch.backoff.ms alone, as Kafka's delayed partitions do: the
// fetcher leaves it out of its requests and goes on replicating the other
// partitions it fetches from that leader at once, so acks=all on them does
// not wait for the backoff. When the delay ends, the partition is fetched
// again, and replicates once the leader has caught up with its epoch.
func TestReplicaFetcherDelaysOnlyTheFailingPartition(t *testing.T) {
	c, _, follower, f := idleSessionCluster(t, 12)
	r0 := partitionKey{"r", 0}
	victimKey := f.keys[0]
	if victimKey == r0 {
		victimKey = f.keys[1]
	}
	victim := follower.parts.partitions[victimKey]
	topic, ok := follower.meta.image.TopicByName(victimKey.topic)
	if !ok {
		t.Fatalf("node 3 does not know topic %q", victimKey.topic)
	}
	state, ok := follower.meta.image.Partition(topic.ID, victimKey.index)
	if !ok || state.Leader != 2 {
		t.Fatalf("%v: state %+v (known %v); want led by node 2", victimKey, state, ok)
	}
	ahead := state
	ahead.LeaderEpoch++
	ahead.PartitionEpoch++
	follower.parts.applyPartitionState(victim, ahead)
	c.waitFor(victimKey.String()+"'s fetch delayed by UNKNOWN_LEADER_EPOCH", 2000, func() bool { return victim.fetchBackoff != nil })
	if f.backoff != nil {
		t.Fatalf("one partition's error holds back node 3's whole fetcher of node 2")
	}
	if _, fetched, _ := requestedPartitions(f, follower); fetched != len(f.keys)-1 {
		t.Fatalf("while %v is delayed a fetch asks for %d partitions; want the %d others", victimKey, fetched, len(f.keys)-1)
	}

	// The other partitions replicate at once: acks=all on r-0 needs node
	// 3's next fetches.
	for i := range 3 {
		startMs := follower.nowMs()
		if r := c.produce(2, "r", 0, -1, recordBatch("v")); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d to r-0: error %v offset %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		if tookMs := follower.nowMs() - startMs; tookMs >= replicaFetchBackoffMs/2 {
			t.Fatalf("acks=all produce %d to r-0 took %d ms while %v was delayed; want well under replica.fetch.backoff.ms (%d)", i, tookMs, victimKey, replicaFetchBackoffMs)
		}
	}

	// The leader (and the third replica) catch up with the epoch; when the
	// delay ends the partition is fetched again and replicates.
	for _, id := range []int32{2, 1} {
		n := c.nodes[id].node
		n.parts.applyPartitionState(n.parts.partitions[victimKey], ahead)
	}
	if r := c.produce(2, victimKey.topic, victimKey.index, -1, recordBatch("after")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("acks=all produce to %v after the leader caught up: error %v offset %d", victimKey, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if victim.fetchBackoff != nil || victim.log.LogEndOffset() != 1 {
		t.Fatalf("%v after the produce: delayed %v, follower LEO %d; want fetched, 1", victimKey, victim.fetchBackoff != nil, victim.log.LogEndOffset())
	}
}

// TestReplicaAnswerOfARetiredPartitionResetsTheSession: an answer for a
// partition whose topic was deleted while the fetch ran is not applied,
// but the leader's session counts it as told; the next fetch is full, so
// that nothing the leader holds back as told can concern a new topic of
// the same name.
func TestReplicaAnswerOfARetiredPartitionResetsTheSession(t *testing.T) {
	_, _, follower, f := idleSessionCluster(t, 12)
	_, sent := follower.parts.fetchers.buildReplicaFetch(f)
	if len(sent) == 0 {
		t.Fatalf("node 3's fetcher of node 2 fetches nothing")
	}
	gone := sent[0].p
	follower.parts.retirePartition(gone)
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = gone.key.topic
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.HighWatermark, rp.LogStartOffset = gone.key.index, 7, 0
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	follower.parts.fetchers.onReplicaFetched(f, sent, resp)
	if f.session.incremental() {
		t.Fatalf("after an answer for retired %v the next fetch is incremental (session %d epoch %d); want full", gone.key, f.session.id, f.session.epoch)
	}
}
