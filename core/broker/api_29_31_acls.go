package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// versions 1..3 (Kafka 4.0 dropped v0, KIP-896).
//
// Strand has no authorizer, so it answers as a Kafka broker without
// authorizer.class.name does (AclApis): SECURITY_DISABLED, for the whole
// DescribeAcls answer and for every creation and deletion filter. Admin
// tools and UIs probe DescribeAcls and treat that answer as "ACLs are off";
// an unsupported API instead breaks their pages or commands.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// noAuthorizer is Kafka's message for a SECURITY_DISABLED ACL answer.
const noAuthorizer = "No Authorizer is configured on the broker"

func (n *Node) handleDescribeAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeACLsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

func (n *Node) handleCreateAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreateACLsRequest) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

func (n *Node) handleDeleteAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteACLsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	n.net.Reply(conn, hdr.CorrelationID, resp)
}
