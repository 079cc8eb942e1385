package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/memdisk"
	"strand/sim/simnet"
)

// TestFlushEveryMessageSurvivesTotalPowerLoss: with flush.messages=1 an
// acknowledged record is durable on every ISR member, so a power loss of
// every broker at once loses none (CLARIFICATIONS.md, "Syncing every
// batch"). The same run on a default topic loses them, which shows the
// scenario can catch a broken promise. Unclean election is on so that the
// partition gets a leader again after every replica restarted uncleanly.
func TestFlushEveryMessageSurvivesTotalPowerLoss(t *testing.T) {
	for _, tc := range []struct {
		flushMessages string
		wantKept      bool
	}{{"1", true}, {"", false}} {
		t.Run("flush.messages="+tc.flushMessages, func(t *testing.T) {
			c := newClusterRoles(t, 4, "controller", map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
			c.waitRegistered()
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(7)
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "f", 1, 3
			if tc.flushMessages != "" {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = "flush.messages", &tc.flushMessages
				rt.Configs = append(rt.Configs, cfg)
			}
			req.Topics = append(req.Topics, rt)
			if r := c.request(2, req).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
				t.Fatalf("create: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
			}
			c.waitFor("topic hosted", 5000, func() bool {
				for id := int32(2); id <= 4; id++ {
					if c.nodes[id].node.parts.partitions[partitionKey{"f", 0}] == nil {
						return false
					}
				}
				return true
			})
			leader := c.leaderOf("f", 0)
			var acked []string
			for i := range 5 {
				v := fmt.Sprint("d", i)
				if r := c.produce(leader, "f", 0, -1, recordBatch(v)); r.ErrorCode == 0 {
					acked = append(acked, v)
				}
			}
			if len(acked) != 5 {
				t.Fatalf("acks=all: %d of 5 acknowledged", len(acked))
			}
			for id := int32(2); id <= 4; id++ {
				tn := c.nodes[id]
				tn.proc.Crash()
				tn.disk.Crash(c.streams.Get("disk"), memdisk.CrashLoseAll)
			}
			for id := int32(2); id <= 4; id++ {
				tn := c.nodes[id]
				tn.proc.Restart()
				c.start(tn)
			}
			c.conns = map[int32]*simnet.ClientConn{}
			c.waitFor("a leader again", 60000, func() bool {
				l := c.leaderOf("f", 0)
				if l < 2 {
					return false
				}
				p := c.nodes[l].node.parts.partitions[partitionKey{"f", 0}]
				return p != nil && p.replica.LeaderEpoch() == c.leaderEpochOf("f", 0)
			})
			// The new leader's HW moves once the ISR is back to
			// min.insync.replicas.
			c.waitFor("ISR of two", 60000, func() bool {
				s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("f", 0)
				return len(s.ISR) >= 2
			})
			c.run(2000)
			leader = c.leaderOf("f", 0)
			got := joined(values(t, c.fetch(leader, "f", 0, 0).RecordBatches))
			if kept := got == joined(acked); kept != tc.wantKept {
				t.Fatalf("after a total power loss the log holds %q (acknowledged %q); want kept=%v", got, joined(acked), tc.wantKept)
			}
		})
	}
}

// TestFlushEveryMessageAcksAllNotHeldByTheLongPoll: with flush.messages=1 a
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
// instead of sending a fetch without them (buildReplicaFetch).
func TestFlushEveryMessageAcksAllNotHeldByTheLongPoll(t *testing.T) {
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

// heldSyncDisk holds the Syncs of files whose path contains match while
// hold is set, so that a test can keep a partition's flush pending.
type heldSyncDisk struct {
	env.Disk
	match string
	hold  bool
	held  []func()
}

// heldSyncFile is a file of a heldSyncDisk.
type heldSyncFile struct {
	env.File
	d    *heldSyncDisk
	path string
}

// Open wraps the file so that its Syncs can be held.
func (d *heldSyncDisk) Open(path string, opts env.OpenOptions) (env.File, error) {
	f, err := d.Disk.Open(path, opts)
	if err != nil {
		return f, err
	}
	return &heldSyncFile{File: f, d: d, path: path}, nil
}

// Sync holds the Sync while the disk holds Syncs of this path.
func (f *heldSyncFile) Sync(done func(error)) {
	if f.d.hold && strings.Contains(f.path, f.d.match) {
		f.d.held = append(f.d.held, func() { f.File.Sync(done) })
		return
	}
	f.File.Sync(done)
}

// TestFetcherNotStalledWhenASyncingPartitionLeaves: a follower's fetcher
// skips a round while one of its flush.messages=1 partitions awaits its
// Sync, and the Sync's completion runs the fetcher the partition is in
// then (onDurable: fetcherOf). If the partition left the fetcher meanwhile
// (its topic deleted, or its leader moved), nothing runs the old fetcher
// again: its other partitions stop replicating until some metadata change
// of theirs (an ISR shrink, replica.lag.time.max.ms later) calls follow:
// 31.9 s for one record before the fix. follow and unfollow now run the
// fetcher a partition leaves.
func TestFetcherNotStalledWhenASyncingPartitionLeaves(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	tn := c.nodes[2]
	tn.proc.Crash()
	c.run(100)
	tn.proc.Restart()
	disk := &heldSyncDisk{Disk: tn.disk, match: "synced-0"}
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{disk}, c.ids)
	if err != nil {
		t.Fatal(err)
	}
	tn.node = node
	tn.nn.SetHandler(node)
	c.waitRegistered()

	c.createAssigned("q", []int32{1, 2}, nil)
	c.createAssigned("synced", []int32{1, 2}, map[string]string{"flush.messages": "1"})
	c.run(2000)
	q := partitionKey{"q", 0}
	if r := c.produce(1, "q", 0, -1, recordBatch("q0")); r.ErrorCode != 0 {
		t.Fatalf("produce q: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	disk.hold = true
	if r := c.produce(1, "synced", 0, 1, recordBatch("s0")); r.ErrorCode != 0 {
		t.Fatalf("produce synced: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitFor("the follower's Sync of synced-0 held", 5000, func() bool { return len(disk.held) > 0 })
	c.run(200)

	c.deleteTopic(1, "synced")
	c.waitFor("synced retired on the follower", 10000, func() bool {
		return node.parts.partitions[partitionKey{"synced", 0}] == nil
	})
	disk.hold = false
	for _, sync := range disk.held {
		sync()
	}
	disk.held = nil
	c.run(200)

	if r := c.produce(1, "q", 0, 1, recordBatch("q1")); r.ErrorCode != 0 {
		t.Fatalf("produce q: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	startMs := node.nowMs()
	c.waitFor("q-0 replicated to the follower", 60000, func() bool { return node.parts.partitions[q].log.LogEndOffset() == 2 })
	if tookMs := node.nowMs() - startMs; tookMs > 2000 {
		t.Fatalf("the follower replicated q-0 %d ms after the produce: its fetcher stalled after synced-0 left it mid-Sync", tookMs)
	}
}
