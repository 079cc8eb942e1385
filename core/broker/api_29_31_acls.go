package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// versions 1..3 (Kafka 4.0 dropped v0, KIP-896). SPEC.md §10.7.
//
// With authorizer.class.name set, DescribeAcls is answered from the ACLs
// this broker decides with (DESCRIBE on the cluster required) by the part
// that holds them (aclState), and CreateAcls and DeleteAcls (ALTER on the
// cluster) are forwarded by the controller role to the active controller,
// which commits each request's changes as one batch and answers once it is
// committed; every broker then applies the batch from the metadata log.
// Without an authorizer Strand answers as a Kafka broker without
// authorizer.class.name does (AclApis): SECURITY_DISABLED, for the whole
// DescribeAcls answer and for every creation and deletion filter. Admin
// tools and UIs probe DescribeAcls and treat that answer as "ACLs are
// off"; an unsupported API instead breaks their pages or commands.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
)

// noAuthorizer is Kafka's message for a SECURITY_DISABLED ACL answer.
const noAuthorizer = "No Authorizer is configured on the broker"

func (a *aclState) handleDescribeAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeACLsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	switch f := acl.FilterOfDescribe(req); {
	case a.authorizer == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
	case f.Validate() != nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("invalid ACL filter: "+f.Validate().Error())
	default:
		resp.Resources = acl.DescribeResources(a.authorizer.ACLs().Select(f))
	}
	a.net.Reply(conn, hdr.CorrelationID, resp)
}

func (cr *controllerRole) handleCreateAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreateACLsRequest) {
	if cr.acls.authorizer != nil {
		cr.forwardThen(conn, hdr, req, len(req.Creations) == 0, func(r kmsg.Response) kmsg.Response { return r })
		return
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	cr.net.Reply(conn, hdr.CorrelationID, resp)
}

func (cr *controllerRole) handleDeleteAcls(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteACLsRequest) {
	if cr.acls.authorizer != nil {
		cr.forwardThen(conn, hdr, req, len(req.Filters) == 0, func(r kmsg.Response) kmsg.Response { return r })
		return
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	cr.net.Reply(conn, hdr.CorrelationID, resp)
}
