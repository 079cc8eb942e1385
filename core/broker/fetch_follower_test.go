package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// followerWithLaggingHW returns threeNodes' cluster (topic "r" led by node
// 2) with records a, b committed and c appended on the leader and fetched
// by follower 3, whose HW stays at 2 because follower 1 is cut off from
// the leader (the leader's HW waits for it). Follower 3: LEO 3, HW 2.
func followerWithLaggingHW(t *testing.T) *cluster {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("acks=all produce: error %d", r.ErrorCode)
	}
	follower := c.nodes[3].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("follower 3 learns HW 2", 5000, func() bool { return follower.replica.HighWatermark() == 2 })
	leader, one := c.nodes[2].nn.Host(), c.nodes[1].nn.Host()
	c.net.Block(leader, one)
	c.net.Block(one, leader)
	if r := c.produce(2, "r", 0, 1, recordBatch("c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=1 produce: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	c.waitFor("follower 3 appends c", 5000, func() bool { return follower.log.LogEndOffset() == 3 })
	c.run(100)
	if hw := follower.replica.HighWatermark(); hw != 2 {
		t.Fatalf("follower 3's HW %d, want 2 (the leader's waits for follower 1)", hw)
	}
	return c
}

// TestConsumerFetchFromFollower: a consumer's Fetch v11+ (KIP-392) to a
// follower is served from the follower's log up to the follower's own HW,
// as Kafka serves it (FetchParams.fetchOnlyLeader is false for a consumer
// with client metadata, which every v11+ request has): the answer carries
// the follower's HW, last stable offset and log start; an offset between
// its HW and LEO reads nothing, one past its LEO is OFFSET_OUT_OF_RANGE;
// a newer leader epoch than the follower's is UNKNOWN_LEADER_EPOCH
// (TestFollowerFencesAConsumersOlderLeaderEpoch: an older one). Below v11
// a follower still answers NOT_LEADER_OR_FOLLOWER.
func TestConsumerFetchFromFollower(t *testing.T) {
	c := followerWithLaggingHW(t)
	epoch := c.leaderEpochOf("r", 0)
	fetch := func(version int16, offset int64, leaderEpoch int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := fetchReq("r", 0, offset, 0)
		req.SetVersion(version)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = leaderEpoch
		return c.request(3, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	for _, version := range []int16{11, 12} {
		f := fetch(version, 0, epoch)
		if f.ErrorCode != 0 || joined(values(t, f.RecordBatches)) != "a,b" {
			t.Fatalf("v%d from follower 3: error %d values %q; want a,b (below its HW)", version, f.ErrorCode, joined(values(t, f.RecordBatches)))
		}
		if f.HighWatermark != 2 || f.LastStableOffset != 2 || f.LogStartOffset != 0 || f.PreferredReadReplica != -1 {
			t.Fatalf("v%d from follower 3: HW %d LSO %d log start %d preferred replica %d; want 2, 2, 0, -1",
				version, f.HighWatermark, f.LastStableOffset, f.LogStartOffset, f.PreferredReadReplica)
		}
	}
	if f := fetch(10, 0, epoch); f.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("v10 from follower 3: error %d, want NOT_LEADER_OR_FOLLOWER", f.ErrorCode)
	}
	if f := fetch(12, 2, epoch); f.ErrorCode != 0 || len(f.RecordBatches) != 0 || f.HighWatermark != 2 {
		t.Fatalf("between the follower's HW and LEO: error %d, %d bytes, HW %d; want nothing, HW 2", f.ErrorCode, len(f.RecordBatches), f.HighWatermark)
	}
	if f := fetch(12, 4, epoch); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the follower's LEO: error %d, want OFFSET_OUT_OF_RANGE", f.ErrorCode)
	}
	if f := fetch(12, 0, -1); f.ErrorCode != 0 || joined(values(t, f.RecordBatches)) != "a,b" {
		t.Fatalf("without a leader epoch: error %d values %q; want a,b", f.ErrorCode, joined(values(t, f.RecordBatches)))
	}
	if f := fetch(12, 0, epoch+1); f.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("a newer leader epoch: error %d, want UNKNOWN_LEADER_EPOCH", f.ErrorCode)
	}
	// The leader itself still serves up to its own HW (2 as well).
	if f := c.fetch(2, "r", 0, 0); f.ErrorCode != 0 || f.HighWatermark != 2 || joined(values(t, f.RecordBatches)) != "a,b" {
		t.Fatalf("from the leader: error %d HW %d values %q", f.ErrorCode, f.HighWatermark, joined(values(t, f.RecordBatches)))
	}
}

// TestConsumerFetchParkedOnFollowerWakesWithItsHW: a consumer's fetch
// waiting on a follower (nothing below its HW past the fetch offset) is
// parked, not answered at once because the partition is not led here, and
// is answered with the new record as soon as the follower learns the HW
// that covers it, well before MaxWaitMillis.
func TestConsumerFetchParkedOnFollowerWakesWithItsHW(t *testing.T) {
	c := followerWithLaggingHW(t)
	start := c.s.NowNs()
	wait := c.send(3, fetchReq("r", 0, 2, 5000))
	c.run(200)
	if len(c.nodes[3].node.parts.fetchWaiters) != 1 {
		t.Fatalf("%d fetches parked on follower 3, want the consumer's", len(c.nodes[3].node.parts.fetchWaiters))
	}
	// Follower 3 appends another record: its LEO moves and wakes the
	// parked fetch, but its HW does not, so the fetch stays parked.
	if r := c.produce(2, "r", 0, 1, recordBatch("d")); r.ErrorCode != 0 {
		t.Fatalf("acks=1 produce: error %d", r.ErrorCode)
	}
	follower := c.nodes[3].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("follower 3 appends d", 5000, func() bool { return follower.log.LogEndOffset() == 4 })
	if len(c.nodes[3].node.parts.fetchWaiters) != 1 {
		t.Fatal("the consumer's fetch left the purgatory when follower 3 appended below no new HW")
	}
	c.net.Heal() // follower 1 catches up, the leader's HW moves, then follower 3's
	r, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	f := r.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	want := []string{"c", "d"}[:max(0, min(2, f.HighWatermark-2))]
	if f.ErrorCode != 0 || f.HighWatermark < 3 || joined(values(t, f.RecordBatches)) != joined(want) {
		t.Fatalf("woken fetch: error %d HW %d values %q; want the records from 2 below an HW of 3 or 4", f.ErrorCode, f.HighWatermark, joined(values(t, f.RecordBatches)))
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited >= 5000 {
		t.Fatalf("answered after %d ms: at MaxWaitMillis, not when the follower's HW moved", waited)
	}
}

// TestFetchSessionOnFollower: a consumer's fetch session (KIP-227) lives
// on a follower as on a leader: the full fetch creates it, an incremental
// fetch with nothing new answers no partition, and one after the
// follower's HW moved answers the partition with the new HW and record.
func TestFetchSessionOnFollower(t *testing.T) {
	c := followerWithLaggingHW(t)
	full := c.request(3, sessionFetchReq(12, 0, 0, 0, "r", [16]byte{}, []at{{0, 2, 0}}, nil)).(*kmsg.FetchResponse)
	if full.ErrorCode != 0 || full.SessionID == 0 || len(full.Topics) != 1 || full.Topics[0].Partitions[0].HighWatermark != 2 {
		t.Fatalf("full fetch on follower 3: %+v, want a session and HW 2", full)
	}
	quiet := c.request(3, sessionFetchReq(12, full.SessionID, 1, 0, "r", [16]byte{}, nil, nil)).(*kmsg.FetchResponse)
	if quiet.ErrorCode != 0 || len(quiet.Topics) != 0 {
		t.Fatalf("incremental fetch with nothing new: error %d, %d topics; want none", quiet.ErrorCode, len(quiet.Topics))
	}
	c.net.Heal()
	follower := c.nodes[3].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("follower 3 learns HW 3", 5000, func() bool { return follower.replica.HighWatermark() == 3 })
	moved := c.request(3, sessionFetchReq(12, full.SessionID, 2, 0, "r", [16]byte{}, nil, nil)).(*kmsg.FetchResponse)
	if moved.ErrorCode != 0 || len(moved.Topics) != 1 {
		t.Fatalf("incremental fetch after the HW moved: error %d, %d topics; want the partition", moved.ErrorCode, len(moved.Topics))
	}
	if p := moved.Topics[0].Partitions[0]; p.HighWatermark != 3 || joined(values(t, p.RecordBatches)) != "c" {
		t.Fatalf("incremental answer: HW %d values %q; want 3 and c", p.HighWatermark, joined(values(t, p.RecordBatches)))
	}
}

// TestFollowerFencesAConsumersOlderLeaderEpoch: after the leader of "r"
// is cut off and another replica leads in a new epoch, the remaining
// follower answers a consumer whose metadata still names the old epoch
// FENCED_LEADER_EPOCH (so it refreshes its metadata, as Kafka's
// Partition.checkCurrentLeaderEpoch makes it), and serves one with the new
// epoch.
func TestFollowerFencesAConsumersOlderLeaderEpoch(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("a")); r.ErrorCode != 0 {
		t.Fatalf("acks=all produce: error %d", r.ErrorCode)
	}
	old := c.leaderEpochOf("r", 0)
	c.isolate(2)
	c.waitFor("a new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	follower := int32(1)
	if c.leaderOf("r", 0) == 1 {
		follower = 3
	}
	epoch := c.leaderEpochOf("r", 0)
	p := c.nodes[follower].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("the follower in the new epoch with HW 1", 5000, func() bool {
		return p.replica.LeaderEpoch() == epoch && p.replica.HighWatermark() == 1
	})
	fetch := func(leaderEpoch int32) kmsg.FetchResponseTopicPartition {
		req := fetchReq("r", 0, 0, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = leaderEpoch
		return c.request(follower, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	if f := fetch(old); f.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("follower %d with the old epoch %d (now %d): error %d, want FENCED_LEADER_EPOCH", follower, old, epoch, f.ErrorCode)
	}
	if f := fetch(epoch); f.ErrorCode != 0 || joined(values(t, f.RecordBatches)) != "a" {
		t.Fatalf("follower %d with the new epoch: error %d values %q; want a", follower, f.ErrorCode, joined(values(t, f.RecordBatches)))
	}
}
