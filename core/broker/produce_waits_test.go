package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/replica"
)

// TestProduceTimeoutsShareOnePartitionTimer: acks=all produces waiting on
// one partition, sent with timeouts out of order, are each answered
// REQUEST_TIMED_OUT once their own TimeoutMillis has passed, never before,
// in deadline order; meanwhile the partition has one timer, armed for the
// earliest deadline the replica holds (produce_waits.go).
func TestProduceTimeoutsShareOnePartitionTimer(t *testing.T) {
	c := threeNodes(t)
	c.produce(2, "r", 0, -1, recordBatch("committed"))
	leader := c.nodes[2].nn.Host()
	for _, id := range []int32{1, 3} {
		c.net.Block(leader, c.nodes[id].nn.Host())
		c.net.Block(c.nodes[id].nn.Host(), leader)
	}
	type answer struct {
		timeoutMs int32
		code      int16
		waitedMs  int64
	}
	var answers []answer
	start := c.s.NowNs()
	for _, timeoutMs := range []int32{300, 100, 200} {
		req := produceReq("r", 0, -1, recordBatch(fmt.Sprint("waits ", timeoutMs)))
		req.TimeoutMillis = timeoutMs
		// A connection each: answers on one leave in request order.
		cc, err := c.client.Dial(2, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.Send(req, func(r kmsg.Response, err error) {
			if err != nil {
				t.Errorf("produce with timeout %d ms: %v", timeoutMs, err)
				return
			}
			code := r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
			answers = append(answers, answer{timeoutMs, code, (c.s.NowNs() - start) / 1e6})
		})
	}
	p := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("three produces waiting", 1000, func() bool { return p.replica.AckWaiters() == 3 })
	next, _ := p.replica.NextAckDeadlineMs()
	if p.produceExpiry == nil || p.produceExpiryAtMs != next {
		t.Fatalf("partition timer armed %v at %d ms, earliest deadline %d ms", p.produceExpiry != nil, p.produceExpiryAtMs, next)
	}
	c.run(600)
	if len(answers) != 3 {
		t.Fatalf("answered %d of 3 produces: %+v", len(answers), answers)
	}
	for i, a := range answers {
		if want := int32(100 * (i + 1)); a.timeoutMs != want {
			t.Errorf("answer %d is the produce with timeout %d ms, want %d (deadline order): %+v", i, a.timeoutMs, want, answers)
		}
		if a.code != kerr.RequestTimedOut.Code || a.waitedMs < int64(a.timeoutMs) || a.waitedMs > int64(a.timeoutMs)+50 {
			t.Errorf("produce with timeout %d ms: error %v after %d ms", a.timeoutMs, kerr.ErrorForCode(a.code), a.waitedMs)
		}
	}
	if p.replica.AckWaiters() != 0 || p.produceExpiry != nil {
		t.Fatalf("after the timeouts: %d waiters, timer armed %v", p.replica.AckWaiters(), p.produceExpiry != nil)
	}
}

// TestDurableWaitKeepsTheRequestsDeadline: an acks=all produce on a
// flush.messages=1 topic waits for the HW and then for its leader's Sync,
// under one deadline, its TimeoutMillis: with the HW passed after 400 ms
// and the Sync held, it is answered REQUEST_TIMED_OUT 1000 ms after it was
// sent, not a whole timeout after the HW passed it.
func TestDurableWaitKeepsTheRequestsDeadline(t *testing.T) {
	c := newCluster(t, 3, nil)
	tn := c.nodes[2] // restarted at once on a disk whose Syncs of d-0 can be held
	tn.proc.Crash()
	tn.proc.Restart()
	disk := &heldSyncDisk{Disk: tn.disk, match: "d-0"}
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{disk}, c.ids)
	if err != nil {
		t.Fatal(err)
	}
	tn.node = node
	tn.nn.SetHandler(node)
	c.waitRegistered()
	c.createAssigned("d", []int32{2, 3}, map[string]string{"flush.messages": "1"})
	p := node.parts.partitions[partitionKey{"d", 0}]
	c.waitFor("node 2 leads d-0", 5000, func() bool { return p.replica.Role() == replica.RoleLeader })
	if r := c.produce(2, "d", 0, -1, recordBatch("d0")); r.ErrorCode != 0 {
		t.Fatalf("first produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	leader, follower := c.nodes[2].nn.Host(), c.nodes[3].nn.Host()
	c.net.Block(leader, follower)
	c.net.Block(follower, leader)
	disk.hold = true
	req := produceReq("d", 0, -1, recordBatch("d1"))
	req.TimeoutMillis = 1000
	start := c.s.NowNs()
	wait := c.send(2, req)
	c.run(400)
	c.net.Unblock(leader, follower)
	c.net.Unblock(follower, leader)
	c.waitFor("the HW passes the batch", 500, func() bool { return p.replica.HighWatermark() == 2 })
	if len(p.durableWaits) != 1 {
		t.Fatalf("%d produces wait for the leader's Sync, want 1", len(p.durableWaits))
	}
	r, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	code := r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	if waited := (c.s.NowNs() - start) / 1e6; code != kerr.RequestTimedOut.Code || waited < 1000 || waited > 1050 {
		t.Fatalf("acks=all on a held Sync: error %v after %d ms, want REQUEST_TIMED_OUT after 1000", kerr.ErrorForCode(code), waited)
	}
	disk.hold = false
	for _, sync := range disk.held {
		sync()
	}
}
