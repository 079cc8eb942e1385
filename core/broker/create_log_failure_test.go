package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/sim/memdisk"
)

// mkdirFailingDisk fails MkdirAll of paths containing match with err, as a
// full or failing device fails creating a partition's directory.
type mkdirFailingDisk struct {
	*memdisk.Disk
	match string
	err   error
}

func (d mkdirFailingDisk) MkdirAll(dir string) error {
	if strings.Contains(dir, d.match) {
		return fmt.Errorf("mkdirall %s: %w", dir, d.err)
	}
	return d.Disk.MkdirAll(dir)
}

// TestCreateLogFailureFencesTheBrokerAndMovesLeadership: a broker that
// cannot create a new partition's log (its disk is full) takes the log
// directory offline, as Kafka's getOrCreateLog does on an IOException, so
// it asks to be fenced and the partitions it was to lead move to replicas
// that could create them: every partition of the new topic takes acks=all
// produces. Unfenced, the broker would keep leading a partition it could
// not host, which would answer KAFKA_STORAGE_ERROR for good.
func TestCreateLogFailureFencesTheBrokerAndMovesLeadership(t *testing.T) {
	c := threeNodes(t)
	tn := c.nodes[3]
	tn.proc.Crash()
	tn.proc.Restart()
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{mkdirFailingDisk{Disk: tn.disk, match: "fresh-", err: env.ErrNoSpace}}, c.ids)
	if err != nil {
		t.Fatal(err)
	}
	tn.node = node
	tn.nn.SetHandler(node)
	c.waitFor("the restarted broker 3 unfenced", 20000, tn.node.InitialUnfenceDone)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fresh", 3, 3
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create fresh: %v", kerr.ErrorForCode(code))
	}
	c.waitFor("broker 3, which cannot create fresh's logs, fenced", 10000, func() bool {
		b, ok := c.nodes[1].node.controllerRole.ctrl.Image().Broker(3)
		return ok && b.Fenced
	})
	if err := tn.node.parts.managers[0].Err(); err == nil {
		t.Fatal("broker 3's log directory is online after a log creation failed for ENOSPC")
	}
	for p := range int32(3) {
		c.waitFor(fmt.Sprintf("fresh-%d led by a broker hosting it", p), 10000, func() bool {
			l := c.leaderOf("fresh", p)
			return l > 0 && l != 3 && c.nodes[l].node.parts.partitions[partitionKey{"fresh", p}] != nil
		})
		if r := c.produce(c.leaderOf("fresh", p), "fresh", p, -1, recordBatch("v")); r.ErrorCode != 0 {
			t.Errorf("acks=all to fresh-%d: %v", p, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
