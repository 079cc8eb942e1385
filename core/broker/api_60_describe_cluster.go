package broker

// DescribeCluster (key 60), versions 0..1 (KIP-700, KIP-919's EndpointType).
//
// Served: the unfenced brokers with their endpoint on the first advertised
// listener, and the controller id chosen as Metadata chooses it
// (api_03_metadata.go), and the cluster id as Metadata reports it.
// EndpointType 2 (controllers) is refused with UNSUPPORTED_ENDPOINT_TYPE.
//
// Anyone may ask, as in Kafka; the cluster's authorized operations are
// told when asked, to a principal that may DESCRIBE the cluster (0
// otherwise).
//
// Skipped: racks, fenced brokers (v2).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
)

func (mf *metadataFollower) handleDescribeCluster(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeClusterRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		mf.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	brokers, controllerID := mf.liveBrokers(mf.clientListener(hdr))
	resp.ControllerID = controllerID
	resp.ClusterID = mf.clusterID()
	for _, b := range brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.NodeID, b.Host, b.Port
		resp.Brokers = append(resp.Brokers, rb)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0
		if g := mf.acls.current; g.cluster(acl.Describe) {
			resp.ClusterAuthorizedOperations = g.authorizedOperations(acl.Cluster, acl.ClusterName)
		}
	}
	mf.net.Reply(conn, hdr.CorrelationID, resp)
}
