package controller

// CreateAcls (key 30) and DeleteAcls (key 31), as Kafka's
// AclControlManager serves them (SPEC.md §10.7).
//
// The ACLs one request adds, or the ACLs its filters match, become one
// batch of AccessControlEntryRecords or RemoveAccessControlEntryRecords,
// answered once it commits: the request's changes take effect together,
// on every node that applies the batch (the design's commit). A creation
// that does not validate is answered INVALID_REQUEST on its own; the
// others still commit. A binding already held is answered as created
// without a record (Kafka's createAcls is idempotent the same way). An
// ACL matched by several filters of one DeleteAcls is listed under each
// and removed by one record.
//
// Brokers authorize the client (ALTER on the cluster) before forwarding;
// the controller trusts the forwarding broker (CLUSTER_ACTION on a
// secured control plane).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/metadata"
)

// aclRecordsPerRequestMax bounds the ACL records one CreateAcls or
// DeleteAcls commits in its batch, as Kafka bounds the records of one user
// operation (QuorumController's MAX_RECORDS_PER_USER_OP, 10000). A request
// over it changes nothing: every creation or filter is answered
// INVALID_REQUEST naming the limit (TestACLRequestOverTheLimitChangesNothing).
const aclRecordsPerRequestMax = 10_000

func (c *Controller) handleCreateAcls(req *kmsg.CreateACLsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if !c.Active() {
		reply(notControllerResponse(req))
		return
	}
	var adds []acl.Binding
	adding := map[acl.Binding]bool{}
	for _, creation := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		b := acl.BindingOfCreation(creation)
		if err := b.Validate(); err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("invalid ACL: "+err.Error())
		} else if _, held := c.latest.ACLID(b); !held && !adding[b] {
			adding[b] = true
			adds = append(adds, b)
		}
		resp.Results = append(resp.Results, r)
	}
	if len(adds) > aclRecordsPerRequestMax {
		message := fmt.Sprintf("the request adds %d ACLs, more than %d in one batch: split it", len(adds), aclRecordsPerRequestMax)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(message)
		}
		reply(resp)
		return
	}
	t := c.begin()
	for _, b := range adds {
		t.add(metadata.NewAccessControlEntryRecord(c.newACLID(), b))
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

func (c *Controller) handleDeleteAcls(req *kmsg.DeleteACLsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if !c.Active() {
		reply(notControllerResponse(req))
		return
	}
	held := c.latest.ACLs()
	removed := map[acl.ID]bool{}
	var removals []acl.ID // in the order found, so records follow the filters
	for _, rf := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		f := acl.FilterOfDelete(rf)
		if err := f.Validate(); err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("invalid ACL filter: "+err.Error())
			resp.Results = append(resp.Results, r)
			continue
		}
		for _, a := range held {
			if !f.Matches(a.Binding) {
				continue
			}
			r.MatchingACLs = append(r.MatchingACLs, acl.DeleteMatch(a.Binding))
			if !removed[a.ID] {
				removed[a.ID] = true
				removals = append(removals, a.ID)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(removals) > aclRecordsPerRequestMax {
		message := fmt.Sprintf("the filters match %d ACLs, more than %d in one batch: narrow them", len(removals), aclRecordsPerRequestMax)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(message)
			resp.Results[i].MatchingACLs = nil
		}
		reply(resp)
		return
	}
	t := c.begin()
	for _, id := range removals {
		t.add(&metadata.RemoveAccessControlEntryRecord{ID: id})
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// aclIDDrawsMax bounds the draws for one fresh ACL id: a random 128-bit
// source repeats an id in use with negligible probability, so a source
// that keeps repeating is broken.
const aclIDDrawsMax = 64

// newACLID draws a fresh id for an ACL: never zero, never one the latest
// image holds.
func (c *Controller) newACLID() acl.ID {
	for range aclIDDrawsMax {
		id := acl.ID(c.newTopicID())
		if _, used := c.latest.ACL(id); !used && !id.IsZero() {
			return id
		}
	}
	panic(fmt.Sprintf("controller: %d ids drawn for an ACL were all zero or in use: the id source is broken", aclIDDrawsMax))
}
