package models

import (
	"strings"
	"testing"

	"strand/core/acl"
)

func readOrders(principal string) acl.Binding {
	return acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: "orders", PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: principal, Host: "*", Operation: acl.Read, Permission: acl.Allow},
	}
}

func fetchOrders(callNs, returnNs int64) ACLRequest {
	return ACLRequest{What: "Fetch orders-0", Principal: "User:alice", Host: "10.0.0.1",
		Needs:  []acl.Action{{Operation: acl.Read, Type: acl.Topic, Name: "orders"}},
		CallNs: callNs, ReturnNs: returnNs, Succeeded: true}
}

// TestCheckAuthorized: a success needs a state allowing it whose window
// meets the request's, widened by the staleness; a grant counts from its
// change's call, a revoke only from its return.
func TestCheckAuthorized(t *testing.T) {
	h := ACLHistory{Changes: []ACLChange{
		{Add: []acl.Binding{readOrders("User:alice")}, CallNs: 10, ReturnNs: 20},
		{Remove: []acl.Binding{readOrders("User:alice")}, CallNs: 100, ReturnNs: 110},
	}}
	cases := []struct {
		name        string
		req         ACLRequest
		stalenessNs int64
		ok          bool
	}{
		{"before the grant's call", fetchOrders(5, 8), 0, false},
		{"while the grant commits", fetchOrders(15, 16), 0, true},
		{"granted", fetchOrders(50, 60), 0, true},
		{"while the revoke commits", fetchOrders(105, 200), 0, true},
		{"after the revoke", fetchOrders(200, 210), 0, false},
		{"after the revoke, within the staleness", fetchOrders(200, 210), 95, true},
		{"after the revoke, past the staleness", fetchOrders(200, 210), 85, false},
	}
	for _, c := range cases {
		h.Requests = []ACLRequest{c.req}
		vs := CheckAuthorized(h, c.stalenessNs)
		if (len(vs) == 0) != c.ok {
			t.Errorf("%s: violations %v, want ok=%v", c.name, vs, c.ok)
		}
	}
	h.Requests = []ACLRequest{fetchOrders(200, 210)}
	h.Requests[0].Succeeded = false
	if vs := CheckAuthorized(h, 0); len(vs) != 0 {
		t.Errorf("a refused request was checked: %v", vs)
	}
	h.Config.SuperUsers = []string{"User:alice"}
	h.Requests[0].Succeeded = true
	if vs := CheckAuthorized(h, 0); len(vs) != 0 {
		t.Errorf("a super user's request flagged: %v", vs)
	}
}

// TestCheckAuthorizedNeedsEveryOperationAtOnce: one state must allow all
// of a request's operations.
func TestCheckAuthorizedNeedsEveryOperationAtOnce(t *testing.T) {
	group := acl.Binding{
		Pattern: acl.Pattern{Type: acl.Group, Name: "g", PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow},
	}
	h := ACLHistory{Changes: []ACLChange{
		{Add: []acl.Binding{readOrders("User:alice")}, CallNs: 10, ReturnNs: 20},
		{Remove: []acl.Binding{readOrders("User:alice")}, CallNs: 30, ReturnNs: 40},
		{Add: []acl.Binding{group}, CallNs: 50, ReturnNs: 60},
	}}
	commit := fetchOrders(10, 100)
	commit.What = "OffsetCommit g orders-0"
	commit.Needs = append(commit.Needs, acl.Action{Operation: acl.Read, Type: acl.Group, Name: "g"})
	h.Requests = []ACLRequest{commit}
	vs := CheckAuthorized(h, 0)
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "OffsetCommit") {
		t.Fatalf("the topic and the group were never allowed together, yet: %v", vs)
	}
}

func TestCheckACLAgreement(t *testing.T) {
	ctl := []acl.Binding{readOrders("User:alice"), readOrders("User:bob")}
	if vs := CheckACLAgreement(ctl, []BrokerACLs{{Node: 1, ACLs: []acl.Binding{readOrders("User:bob"), readOrders("User:alice")}}}); len(vs) != 0 {
		t.Errorf("the same set in another order: %v", vs)
	}
	vs := CheckACLAgreement(ctl, []BrokerACLs{{Node: 2, ACLs: []acl.Binding{readOrders("User:alice"), readOrders("User:carol")}}})
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "User:carol") || !strings.Contains(vs[0].Detail, "User:bob") {
		t.Errorf("a broker holding a removed ACL and missing one: %v", vs)
	}
}
