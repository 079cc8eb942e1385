package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/env"
	"strand/core/replica"
)

// TestFollowerLogFailureAnswersAParkedConsumerFetch: a consumer's Fetch
// v12 long-polling on a follower (KIP-392) at the follower's HW is
// answered KAFKA_STORAGE_ERROR as soon as the follower's log directory
// goes offline, as on a leader, not at its MaxWait; and a new one is
// refused at once. The follower's parked fetch is woken by the failure
// listener's re-check, which the role check alone would not do.
func TestFollowerLogFailureAnswersAParkedConsumerFetch(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	key := partitionKey{"r", 0}
	follower := c.nodes[1].node.parts.partitions[key]
	c.waitFor("follower 1 learns HW 2", 5000, func() bool { return follower.replica.HighWatermark() == 2 })
	if follower.replica.Role() != replica.RoleFollower {
		t.Fatalf("test premise: node 1 is not a follower of r-0")
	}
	fetch := c.sendAlone(1, fetchReq("r", 0, 2, 30000))
	c.run(200)
	if fetch.done {
		t.Fatalf("test premise: a fetch at the follower's HW waits; answered %v", fetch.resp)
	}
	failedAtMs := c.s.NowNs() / 1e6
	c.nodes[1].node.parts.managers[0].Fail(fmt.Errorf("injected: a checkpoint sync failed: %w", env.ErrIO))
	c.run(20)
	if !fetch.done {
		t.Fatalf("20 ms after the follower's directory went offline, its parked consumer fetch is not answered")
	}
	if code := fetchCode(t, fetch); code != kerr.KafkaStorageError.Code || fetch.atMs-failedAtMs > 5 {
		t.Errorf("parked fetch answered %v after %d ms, want KAFKA_STORAGE_ERROR at once", kerr.ErrorForCode(code), fetch.atMs-failedAtMs)
	}
	again := c.sendAlone(1, fetchReq("r", 0, 0, 30000))
	c.run(20)
	if !again.done || fetchCode(t, again) != kerr.KafkaStorageError.Code {
		t.Errorf("a new consumer fetch on the failed follower: answered %v, want KAFKA_STORAGE_ERROR at once", again.done)
	}
}
