package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/metadata"
)

func topicACL(topic, principal string, op acl.Operation, permission acl.Permission) acl.Binding {
	return acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: topic, PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: principal, Host: "*", Operation: op, Permission: permission},
	}
}

func (h *harness) createACLs(bindings ...acl.Binding) *kmsg.CreateACLsResponse {
	h.t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	for _, b := range bindings {
		req.Creations = append(req.Creations, acl.Creation(b))
	}
	return h.send(req).(*kmsg.CreateACLsResponse)
}

func (h *harness) deleteACLs(filters ...acl.Filter) *kmsg.DeleteACLsResponse {
	h.t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	for _, f := range filters {
		req.Filters = append(req.Filters, acl.DeleteFilter(f))
	}
	return h.send(req).(*kmsg.DeleteACLsResponse)
}

// batchesAfter counts the committed batches holding records after offset.
func (h *harness) batchesAfter(offset int64) (batches int, records []metadata.Record) {
	h.t.Helper()
	err := h.c.quorum.CommittedBatches(h.c.quorum.LogStartOffset(), func(b metadata.Batch) error {
		if b.BaseOffset > offset && len(b.Records) > 0 {
			batches++
			records = append(records, b.Records...)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return batches, records
}

func bindingsOf(acls []acl.ACL) []acl.Binding {
	var out []acl.Binding
	for _, a := range acls {
		out = append(out, a.Binding)
	}
	return out
}

// TestCreateACLsCommitsOneBatch: the creations of one request are one
// batch; an invalid creation is refused on its own, a held binding is
// answered as created without a record.
func TestCreateACLsCommitsOneBatch(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	read := topicACL("orders", "User:alice", acl.Read, acl.Allow)
	write := topicACL("orders", "User:alice", acl.Write, acl.Allow)
	invalid := topicACL("orders", "alice", acl.Read, acl.Allow) // no principal type
	before := h.c.Image().Offset()
	resp := h.createACLs(read, invalid, write, read)
	for i, want := range []int16{0, kerr.InvalidRequest.Code, 0, 0} {
		if got := resp.Results[i].ErrorCode; got != want {
			t.Errorf("creation %d: error %v, want %v", i, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	if msg := resp.Results[1].ErrorMessage; msg == nil || !strings.Contains(*msg, "Principal") {
		t.Errorf("the invalid creation's message %v does not name the field", msg)
	}
	batches, records := h.batchesAfter(before)
	if batches != 1 || len(records) != 2 {
		t.Fatalf("%d batches of %d records, want the two new ACLs in one batch", batches, len(records))
	}
	if got := bindingsOf(h.c.Image().ACLs()); len(got) != 2 || got[0] != read || got[1] != write {
		t.Fatalf("ACLs %v, want read and write", got)
	}
	offset := h.c.Image().Offset()
	if resp := h.createACLs(read); resp.Results[0].ErrorCode != 0 || h.c.Image().Offset() != offset {
		t.Fatalf("creating a held ACL: error %d, offset %d→%d; want success and no record", resp.Results[0].ErrorCode, offset, h.c.Image().Offset())
	}
}

// TestDeleteACLsCommitsOneBatch: the filters of one request remove what
// they match in one batch; an ACL two filters match is listed under both
// and removed once.
func TestDeleteACLsCommitsOneBatch(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	read := topicACL("orders", "User:alice", acl.Read, acl.Allow)
	write := topicACL("orders", "User:alice", acl.Write, acl.Allow)
	bob := topicACL("orders", "User:bob", acl.Read, acl.Deny)
	h.createACLs(read, write, bob)
	before := h.c.Image().Offset()
	alice := "User:alice"
	byAlice := acl.MatchAll
	byAlice.Principal = &alice
	reads := acl.MatchAll
	reads.Operation = acl.Read
	bad := acl.MatchAll
	bad.Operation = 0
	resp := h.deleteACLs(byAlice, reads, bad)
	if got := len(resp.Results[0].MatchingACLs); got != 2 {
		t.Errorf("alice's filter matched %d ACLs, want 2", got)
	}
	if got := len(resp.Results[1].MatchingACLs); got != 2 {
		t.Errorf("the READ filter matched %d ACLs, want 2", got)
	}
	if resp.Results[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("an unknown operation filter: error %d, want INVALID_REQUEST", resp.Results[2].ErrorCode)
	}
	batches, records := h.batchesAfter(before)
	if batches != 1 || len(records) != 3 {
		t.Fatalf("%d batches of %d records, want three removals in one batch", batches, len(records))
	}
	if got := h.c.Image().ACLs(); len(got) != 0 {
		t.Fatalf("ACLs left: %v", got)
	}
}

// TestACLRequestOverTheLimitChangesNothing: one request adding more than
// aclRecordsPerRequestMax ACLs is refused whole; at the limit it commits.
func TestACLRequestOverTheLimitChangesNothing(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	var many []acl.Binding
	for i := range aclRecordsPerRequestMax + 1 {
		many = append(many, topicACL(fmt.Sprintf("t%d", i), "User:alice", acl.Read, acl.Allow))
	}
	offset := h.c.Image().Offset()
	resp := h.createACLs(many...)
	if code, msg := resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage; code != kerr.InvalidRequest.Code || msg == nil || !strings.Contains(*msg, "10000") {
		t.Fatalf("over the limit: error %d %v, want INVALID_REQUEST naming 10000", code, msg)
	}
	if h.c.Image().Offset() != offset {
		t.Fatal("a refused request changed the metadata")
	}
	if resp := h.createACLs(many[:aclRecordsPerRequestMax]...); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("at the limit: error %d", resp.Results[0].ErrorCode)
	}
	if got := len(h.c.Image().ACLs()); got != aclRecordsPerRequestMax {
		t.Fatalf("%d ACLs, want %d", got, aclRecordsPerRequestMax)
	}
	h.createACLs(many[aclRecordsPerRequestMax])
	if resp := h.deleteACLs(acl.MatchAll); resp.Results[0].ErrorCode != kerr.InvalidRequest.Code || len(h.c.Image().ACLs()) != aclRecordsPerRequestMax+1 {
		t.Fatalf("deleting %d ACLs at once: error %d, %d left; want INVALID_REQUEST and none removed",
			aclRecordsPerRequestMax+1, resp.Results[0].ErrorCode, len(h.c.Image().ACLs()))
	}
}

// TestACLsSurviveRestartAndSnapshot: ACLs replay from the log and from a
// snapshot; ids stay as committed.
func TestACLsSurviveRestartAndSnapshot(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.SnapshotIntervalRecords = 3
	h := newHarness(t, cfg)
	h.createACLs(topicACL("a", "User:alice", acl.Read, acl.Allow), topicACL("b", "User:bob", acl.Write, acl.Deny))
	h.deleteACLs(acl.ExactFilter(topicACL("a", "User:alice", acl.Read, acl.Allow)))
	h.createACLs(topicACL("c", "User:carol", acl.All, acl.Allow))
	h.advance(10)
	if h.node.Raft().LatestSnapshot() == nil {
		t.Fatal("no snapshot taken")
	}
	want := h.c.Image().ACLs()
	h.restart()
	got := h.c.Image().ACLs()
	if len(got) != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a restart ACLs are %v, want %v", got, want)
	}
}

func TestACLRequestsOnAStandby(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.stop()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{acl.Creation(topicACL("a", "User:alice", acl.Read, acl.Allow))}
	if got := h.send(req).(*kmsg.CreateACLsResponse).Results[0].ErrorCode; got != kerr.NotController.Code {
		t.Fatalf("CreateAcls on a stopped controller: error %d, want NOT_CONTROLLER", got)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{acl.DeleteFilter(acl.MatchAll)}
	if got := h.send(del).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode; got != kerr.NotController.Code {
		t.Fatalf("DeleteAcls on a stopped controller: error %d, want NOT_CONTROLLER", got)
	}
}
