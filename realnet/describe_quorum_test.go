package realnet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/controller"
)

// TestKgoDescribeQuorum: kafka-metadata-quorum.sh's request, DescribeQuorum
// v2, sent by kgo to three real nodes (node 1 the only voter, nodes 2 and
// 3 brokers). kgo sends it to the controller Metadata names, a broker
// listener, which forwards it to the active controller; sent straight to
// the controller listener (--bootstrap-controller), the controller answers
// itself. Both describe voter 1 leading, the brokers as observers with
// their log end offsets, and wall-clock timestamps of the last seconds.
// (kadm in this franz-go version has no DescribeQuorum.)
func TestKgoDescribeQuorum(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createTopic("q", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(2)
	topic := kmsg.NewDescribeQuorumRequestTopic()
	topic.Topic = controller.MetadataTopic
	topic.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, topic)

	direct, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[0].Addr("CONTROLLER").String()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, via := range []struct {
		name string
		send func() (kmsg.Response, error)
	}{
		{"a broker listener", func() (kmsg.Response, error) { return req.RequestWith(ctx, c.client()) }},
		{"the controller listener", func() (kmsg.Response, error) { return direct.SeedBrokers()[0].Request(ctx, req) }},
	} {
		var p kmsg.DescribeQuorumResponseTopicPartition
		// The brokers' first fetches may still be on their way.
		c.waitFor("both brokers described as observers via "+via.name, 10*time.Second, func() bool {
			resp, err := via.send()
			if err != nil {
				t.Fatalf("via %s: %v", via.name, err)
			}
			r := resp.(*kmsg.DescribeQuorumResponse)
			if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				t.Fatalf("via %s: %v %+v", via.name, kerr.ErrorForCode(r.ErrorCode), r.Topics)
			}
			p = r.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.LeaderID != 1 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 {
				t.Fatalf("via %s: %v leader %d voters %+v", via.name, kerr.ErrorForCode(p.ErrorCode), p.LeaderID, p.CurrentVoters)
			}
			if len(r.Nodes) != 1 || r.Nodes[0].NodeID != 1 || len(r.Nodes[0].Listeners) != 1 ||
				r.Nodes[0].Listeners[0].Name != "CONTROLLER" {
				t.Fatalf("via %s: v2 nodes %+v, want voter 1's CONTROLLER listener", via.name, r.Nodes)
			}
			var ids []int32
			for _, o := range p.Observers {
				ids = append(ids, o.ReplicaID)
			}
			return slices.Equal(ids, []int32{2, 3})
		})
		nowMs := time.Now().UnixMilli()
		if p.HighWatermark <= 0 || p.LeaderEpoch <= 0 {
			t.Errorf("via %s: high watermark %d, epoch %d", via.name, p.HighWatermark, p.LeaderEpoch)
		}
		for _, s := range append(slices.Clone(p.CurrentVoters), p.Observers...) {
			if s.LogEndOffset <= 0 || s.LogEndOffset > p.HighWatermark && s.ReplicaID != 1 {
				t.Errorf("via %s: replica %d log end offset %d (high watermark %d)", via.name, s.ReplicaID, s.LogEndOffset, p.HighWatermark)
			}
			if s.LastFetchTimestamp > nowMs || s.LastFetchTimestamp < nowMs-10_000 || s.LastCaughtUpTimestamp > s.LastFetchTimestamp ||
				s.LastCaughtUpTimestamp < nowMs-10_000 {
				t.Errorf("via %s: replica %d last fetch %d, caught up %d; want within the last 10 s of %d", via.name, s.ReplicaID,
					s.LastFetchTimestamp, s.LastCaughtUpTimestamp, nowMs)
			}
		}
	}
}
