package broker

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// TestFetchReadyWokenPartitionFirstAgrees: fetchReady told which partition
// woke it looks at that one first, and must answer exactly as the walk in
// request order does, whatever the partition, the fetch offsets, MinBytes
// (sums across partitions) and partitions named twice or moved to another
// leader epoch.
func TestFetchReadyWokenPartitionFirstAgrees(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	const partitions = 5
	c.createTopic(1, "t", partitions, 1)
	n := c.nodes[1].node
	rng := rand.New(rand.NewPCG(6, 6))
	batchBytes := int32(len(recordBatch("v")))
	var hosted []*partition
	for i := range int32(partitions) {
		hosted = append(hosted, n.parts.partitions[partitionKey{"t", i}])
	}
	checked, ready, notReady := 0, 0, 0
	for step := range 40 {
		c.produce(1, "t", rng.Int32N(partitions), 1, recordBatch("v"))
		for range 30 {
			w := &fetchWaiter{req: kmsg.NewPtrFetchRequest()}
			w.req.ReplicaID = -1
			if rng.IntN(2) == 0 {
				w.req.ReplicaID = 2 // bound by the LEO
			}
			w.req.MinBytes = 1 + rng.Int32N(3*batchBytes)
			for range 1 + rng.IntN(partitions+1) { // may name one twice
				p := hosted[rng.IntN(partitions)]
				pp := parkedPartition{p: p, leaderEpoch: p.replica.LeaderEpoch(), role: p.replica.Role(), maxBytes: 1 << 20}
				pp.fetchOffset = max(0, p.log.LogEndOffset()-rng.Int64N(3))
				if rng.IntN(20) == 0 {
					pp.leaderEpoch-- // parked in an older epoch
				}
				w.parts = append(w.parts, pp)
			}
			want := n.parts.fetchReady(w, nil)
			if want {
				ready++
			} else {
				notReady++
			}
			for _, woken := range hosted {
				if got := n.parts.fetchReady(w, woken); got != want {
					t.Fatalf("step %d: fetchReady woken by %s = %v, walk in order = %v (MinBytes %d, parts %+v)",
						step, woken.key, got, want, w.req.MinBytes, w.parts)
				}
				checked++
			}
		}
	}
	if ready == 0 || notReady == 0 {
		t.Fatalf("the cases drawn were %d ready and %d not: both answers must be checked", ready, notReady)
	}
	t.Logf("%d comparisons, %d fetches ready, %d not", checked, ready, notReady)
}

// TestFollowerFetchThatMovesTheHWWakesConsumers: a follower's fetch wakes
// the parked fetches of a partition only when it moved the HW; a consumer
// waiting below the HW of an acks=1 produce must then be answered as soon
// as the followers have fetched, not at MaxWaitMillis.
func TestFollowerFetchThatMovesTheHWWakesConsumers(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 3)
	leader := c.leaderOf("t", 0)
	start := c.s.NowNs()
	wait := c.send(leader, fetchReq("t", 0, 0, 5000))
	c.run(50) // parked
	consumers := 0
	for _, w := range c.nodes[leader].node.parts.fetchWaiters {
		if w.req.ReplicaID < 0 {
			consumers++
		}
	}
	if consumers != 1 {
		t.Fatalf("%d consumer fetches parked on the leader, want 1", consumers)
	}
	other, err := c.client.Dial(env.NodeID(leader), nil)
	if err != nil {
		t.Fatal(err)
	}
	produced := false
	other.Send(produceReq("t", 0, 1, recordBatch("hw")), func(kmsg.Response, error) { produced = true })
	r, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if !produced {
		t.Fatal("the consumer was answered before the produce")
	}
	// The followers fetch again within a few ms of the append; without
	// the wake, the consumer waited for another partition event (about
	// replicaFetchMaxWaitMs, 490 ms here).
	if waited := (c.s.NowNs() - start) / 1e6; waited > 250 {
		t.Fatalf("the consumer was answered after %d ms: the HW move did not wake it", waited)
	}
	if got := joined(values(t, r.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)); got != "hw" {
		t.Fatalf("woken fetch returned %q, want the record below the new HW", got)
	}
}
