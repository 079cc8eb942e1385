package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
)

// TestMetadataAndDescribeClusterReportTheClusterID checks that Metadata
// (v2+) and DescribeCluster carry the cluster id, as Kafka's brokers do
// (kafka-go's Client.Metadata and sarama show it; kafka-go's interop test
// failed on the nil id): the id derived from the quorum voters when the
// node is given none, Config.ClusterID once it is (a restart with the id
// its directories were formatted with).
func TestMetadataAndDescribeClusterReportTheClusterID(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	check := func(node int32, want string) {
		t.Helper()
		for _, v := range []int16{2, 9, 12} {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			resp := c.request(node, req).(*kmsg.MetadataResponse)
			if resp.ClusterID == nil || *resp.ClusterID != want {
				t.Fatalf("node %d Metadata v%d: cluster id %v; want %s", node, v, resp.ClusterID, want)
			}
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.SetVersion(1)
		dc.EndpointType = 1
		if resp := c.request(node, dc).(*kmsg.DescribeClusterResponse); resp.ClusterID != want {
			t.Fatalf("node %d DescribeCluster: cluster id %q; want %s", node, resp.ClusterID, want)
		}
	}
	derived := config.DeriveClusterID(c.nodes[1].cfg.Broker.QuorumVoters)
	if config.ValidateClusterID(derived) != nil {
		t.Fatalf("test premise: derived id %q is not a cluster id", derived)
	}
	check(1, derived)
	check(2, derived)

	formatted := config.NewClusterID([16]byte{7, 1, 2, 3})
	tn := c.nodes[2]
	tn.proc.Crash()
	c.run(100)
	tn.cfg.ClusterID = formatted
	tn.proc.Restart()
	c.start(tn)
	c.waitFor("node 2 serving again", 20000, func() bool {
		return tn.node.InitialCatchUpDone()
	})
	check(2, formatted)
}
