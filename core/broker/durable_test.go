package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
