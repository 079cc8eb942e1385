package realnet

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/broker"
	"strand/core/wire"
)

// TestRestartedBrokerServesOnlyAfterMetadataCatchUp kills a single-node
// cluster's only node and restarts it on the same directories and ports,
// then at once asks it for a topic created before the kill. Before its
// initial metadata catch-up the node's image is empty, so a node serving
// clients then answered UNKNOWN_TOPIC_OR_PARTITION for seconds; and until
// the controller unfenced it, its Metadata named no live broker and
// controller -1, which kafkajs's admin took as "Broker -1 not found".
// realnet now serves the broker listener only once the node is caught up
// and unfenced (as Kafka enables its listeners only after
// initialUnfenceFuture), so the request waits in the listen backlog and
// gets the real answer.
func TestRestartedBrokerServesOnlyAfterMetadataCatchUp(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.createTopic("kept", 2, 1)
	c.nodes[0].Kill()
	c.restart(1)
	n := c.nodes[0]
	ready := true
	n.Call(func(b *broker.Node) { ready = b.InitialUnfenceDone() })
	if ready {
		t.Log("the restarted node was ready before the first look: the race this test covers was not exercised")
	}
	started := time.Now()
	r := dialRaw(t, n.Addr("PLAINTEXT"))
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("kept")
	req.Topics = append(req.Topics, mt)
	r.send(1, req)
	frame, err := r.readFrame(30 * time.Second)
	if err != nil {
		t.Fatalf("no answer to Metadata after the restart: %v", err)
	}
	_, resp, err := wire.ParseResponse(frame, req)
	if err != nil {
		t.Fatal(err)
	}
	meta := resp.(*kmsg.MetadataResponse)
	if len(meta.Brokers) != 1 || meta.Brokers[0].NodeID != 1 || meta.ControllerID != 1 {
		t.Fatalf("Metadata right after the restart: brokers %+v, controller %d; want broker 1, the controller", meta.Brokers, meta.ControllerID)
	}
	topics := meta.Topics
	if len(topics) != 1 || topics[0].ErrorCode != 0 || len(topics[0].Partitions) != 2 {
		code := int16(-1)
		if len(topics) == 1 {
			code = topics[0].ErrorCode
		}
		t.Fatalf("Metadata right after the restart: %d topics, error %v; want topic kept with 2 partitions", len(topics), kerr.ErrorForCode(code))
	}
	n.Call(func(b *broker.Node) { ready = b.InitialUnfenceDone() })
	if !ready {
		t.Fatal("answered a client before the broker was caught up and unfenced")
	}
	t.Logf("answered %v after the restart", time.Since(started).Round(time.Millisecond))
}
