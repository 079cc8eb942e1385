package models

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"strand/core/acl"
)

// Authorization (SPEC.md §10.7) as clients see it. The ACL churn client
// changes the cluster's ACLs one request at a time, retrying each until it
// is answered, and records each as an ACLChange; the ACL probe clients,
// whose principals those ACLs name, record every request that needed an
// authorization as an ACLRequest. CheckAuthorized demands that each
// request that succeeded was allowed by some ACL state the cluster had
// committed between its call (less the staleness SPEC allows a broker) and
// its return.
//
// The states are known in order: the churn's changes are serialized, each
// committed as one batch at an unknown time between its first attempt and
// its answer (a retry of a change that committed already commits nothing;
// an attempt left behind by a failover can no longer commit once a later
// attempt has been answered, since the log that answered it goes on
// without it). So state k (after change k) was the committed one during
// [commit k, commit k+1), a window that lies within
// [change k's call, change k+1's return).

// ACLChange is one change of the ACL churn: the ACLs it added (one
// CreateAcls) or removed (one DeleteAcls of exact filters).
type ACLChange struct {
	Add    []acl.Binding
	Remove []acl.Binding
	// CallNs is the first attempt's call, ReturnNs the answered attempt's
	// return (NeverReturnedNs if none was answered before the run ended).
	CallNs, ReturnNs int64
}

func (c ACLChange) String() string {
	var parts []string
	for _, b := range c.Add {
		parts = append(parts, "+"+bindingShort(b))
	}
	for _, b := range c.Remove {
		parts = append(parts, "-"+bindingShort(b))
	}
	return fmt.Sprintf("[%s] at %s", strings.Join(parts, " "), span(c.CallNs, c.ReturnNs))
}

// bindingShort renders an ACL on one line: PERMISSION OP principal@host
// TYPE:PATTERN:name.
func bindingShort(b acl.Binding) string {
	return fmt.Sprintf("%v %v %s@%s %v:%v:%s", b.Permission, b.Operation, b.Principal, b.Host, b.Type, b.PatternType, b.Name)
}

func span(callNs, returnNs int64) string {
	if returnNs == NeverReturnedNs {
		return fmt.Sprintf("%d..never ns", callNs)
	}
	return fmt.Sprintf("%d..%d ns", callNs, returnNs)
}

// ACLRequest is one request of an ACL probe client.
type ACLRequest struct {
	Client int
	// What names the request ("Produce acl-t0-1", "Fetch acl-t1-0 returning
	// 3 records").
	What      string
	Principal string
	// Host is the client's address, as ACLs name it.
	Host string
	// Needs are the operations its success required, all at once (an
	// OffsetCommit needs READ on the group and on the topic).
	Needs []acl.Action
	// CallNs and ReturnNs bound the request.
	CallNs, ReturnNs int64
	// Succeeded: the answer came back without an error for it. A Fetch
	// that returned records succeeded.
	Succeeded bool
}

// ACLHistory is what the ACL clients saw.
type ACLHistory struct {
	// Config is the brokers' super users and allow.everyone setting.
	Config  acl.Config
	Changes []ACLChange
	// Requests are the probe clients'.
	Requests []ACLRequest
}

// aclState is one committed ACL set and the window it may have been the
// committed one in: from fromNs (inclusive) to untilNs (exclusive).
type aclState struct {
	authorizer      *acl.Authorizer
	fromNs, untilNs int64
	// after names the change that made it, -1 for the empty set.
	after int
}

// aclStates replays the changes into states with their windows.
func aclStates(h ACLHistory) []aclState {
	var held []acl.Binding
	build := func() *acl.Authorizer {
		acls := make([]acl.ACL, len(held))
		for i, b := range held {
			acls[i] = acl.ACL{ID: acl.ID{0: 1, 14: byte(i >> 8), 15: byte(i)}, Binding: b}
		}
		return acl.New(h.Config, acl.NewSet(acls))
	}
	states := []aclState{{authorizer: build(), fromNs: math.MinInt64, after: -1}}
	for i, c := range h.Changes {
		for _, b := range c.Add {
			if !slices.Contains(held, b) {
				held = append(held, b)
			}
		}
		held = slices.DeleteFunc(held, func(b acl.Binding) bool { return slices.Contains(c.Remove, b) })
		states[len(states)-1].untilNs = c.ReturnNs
		states = append(states, aclState{authorizer: build(), fromNs: c.CallNs, after: i})
	}
	states[len(states)-1].untilNs = NeverReturnedNs
	return states
}

// CheckAuthorized checks every successful probe request against the ACL
// states whose window meets [CallNs − stalenessNs, ReturnNs]: at least one
// must allow every operation it needed. stalenessNs is how far behind the
// committed ACLs SPEC allows a broker to decide.
func CheckAuthorized(h ACLHistory, stalenessNs int64) []Violation {
	states := aclStates(h)
	var vs []Violation
	for _, r := range h.Requests {
		if !r.Succeeded {
			continue
		}
		earliest := r.CallNs - stalenessNs
		allowedBy := -2
		for _, s := range states {
			if s.fromNs > r.ReturnNs || s.untilNs <= earliest {
				continue
			}
			if allowsAll(s.authorizer, r) {
				allowedBy = s.after
				break
			}
		}
		if allowedBy != -2 {
			continue
		}
		vs = append(vs, Violation{Check: "authorized", Detail: fmt.Sprintf(
			"client %d (%s from %s): %s at %s succeeded, but no ACL state committed from %d ns on (its call less %d ns of staleness) allowed %v; changes: %s",
			r.Client, r.Principal, r.Host, r.What, span(r.CallNs, r.ReturnNs), earliest, stalenessNs, r.Needs, changesAround(h.Changes, earliest, r.ReturnNs))})
	}
	return vs
}

func allowsAll(a *acl.Authorizer, r ACLRequest) bool {
	who := acl.Requester{Principal: r.Principal, Host: r.Host}
	for _, x := range r.Needs {
		if !a.Allowed(who, x) {
			return false
		}
	}
	return true
}

// changesAround lists the changes whose span meets [fromNs, toNs], and the
// last one before, for a violation's detail.
func changesAround(changes []ACLChange, fromNs, toNs int64) string {
	var parts []string
	for i, c := range changes {
		before := c.ReturnNs < fromNs
		next := i+1 < len(changes) && changes[i+1].ReturnNs < fromNs
		if c.CallNs > toNs || (before && next) {
			continue
		}
		parts = append(parts, fmt.Sprintf("#%d %v", i, c))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// BrokerACLs is the ACL set one broker decides with after the run went
// quiet.
type BrokerACLs struct {
	Node int32
	ACLs []acl.Binding
}

// CheckACLAgreement demands that, once the cluster is quiet, every running
// broker holds exactly the ACLs the controller's log committed.
func CheckACLAgreement(controller []acl.Binding, brokers []BrokerACLs) []Violation {
	want := slices.Clone(controller)
	slices.SortFunc(want, acl.Compare)
	var vs []Violation
	for _, b := range brokers {
		got := slices.Clone(b.ACLs)
		slices.SortFunc(got, acl.Compare)
		if slices.Equal(got, want) {
			continue
		}
		var extra, missing []string
		for _, x := range got {
			if !slices.Contains(want, x) {
				extra = append(extra, bindingShort(x))
			}
		}
		for _, x := range want {
			if !slices.Contains(got, x) {
				missing = append(missing, bindingShort(x))
			}
		}
		vs = append(vs, Violation{Check: "acl-agreement", Detail: fmt.Sprintf(
			"broker %d holds %d ACLs, the controller's log %d: extra %v, missing %v", b.Node, len(got), len(want), extra, missing)})
	}
	return vs
}
