package broker

// Authorization, decided before a request's handler runs (SPEC.md §10.7).
//
// Every entry of the API table names what its requests require (access):
// the requirements that answer the whole request (CLUSTER_ACTION of the
// control plane, a group's READ, ALTER on the cluster...) are decided in
// HandleRequest, and a request that fails one is answered with the API's
// authorization error at once: no side effect, nothing decompressed, no
// wait in a purgatory. The requirements on each topic or group a request
// names are decided by the handler through the request's grants, before
// it touches that resource, and answered per resource
// (TOPIC_AUTHORIZATION_FAILED per partition, GROUP_AUTHORIZATION_FAILED
// per group). Every decision of one request uses the ACLs the node held
// when the request arrived (grants keeps that immutable authorizer).
//
// With authorizer.class.name unset there is no authorizer: every request
// its listener serves is allowed, but CLUSTER_ACTION, which only members
// of the cluster have, still holds on a secured plane: the controller
// listeners when any controller listener's protocol is not PLAINTEXT, the
// broker listeners when the inter-broker listener's is not. A member is
// then a super user. With the authorizer on, CLUSTER_ACTION is the
// authorizer's decision on every listener, as in Kafka.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
)

// grants is one request's authorization: who asks, on which kind of
// listener, and the authorizer as it was when the request arrived.
type grants struct {
	// acls is the node's authorization state, which audits denials.
	acls *aclState
	kind listenerKind
	hdr  env.RequestHeader
	// authorizer is nil when authorization is off.
	authorizer *acl.Authorizer
	who        acl.Requester
}

// grantsFor is the authorization of a request with hdr on a listener of
// kind, with the node's current ACLs.
func (a *aclState) grantsFor(kind listenerKind, hdr env.RequestHeader) grants {
	return grants{acls: a, kind: kind, hdr: hdr, authorizer: a.authorizer,
		who: acl.Requester{Principal: hdr.Principal, Host: strings.TrimPrefix(hdr.ClientHost, "/")}}
}

// allows decides op on the resource of type t named name, logging a denial
// (the request named the resource).
func (g grants) allows(op acl.Operation, t acl.ResourceType, name string) bool {
	return g.decide(op, t, name, true)
}

// allowsQuietly decides as allows without logging a denial: for filters
// that leave out what the principal may not see (Metadata of every topic,
// ListGroups), as Kafka logs those only at trace level.
func (g grants) allowsQuietly(op acl.Operation, t acl.ResourceType, name string) bool {
	return g.decide(op, t, name, false)
}

func (g grants) decide(op acl.Operation, t acl.ResourceType, name string, audit bool) bool {
	if g.authorizer == nil {
		return true
	}
	x := acl.Action{Operation: op, Type: t, Name: name}
	d := g.authorizer.Authorize(g.who, x)
	if !d.Allowed && audit {
		g.acls.auditDenial(g.who, x, kmsg.NameForKey(g.hdr.APIKey), d)
	}
	return d.Allowed
}

// topic decides op on a topic.
func (g grants) topic(op acl.Operation, name string) bool { return g.allows(op, acl.Topic, name) }

// group decides op on a group.
func (g grants) group(op acl.Operation, name string) bool { return g.allows(op, acl.Group, name) }

// cluster decides op on the cluster.
func (g grants) cluster(op acl.Operation) bool { return g.allows(op, acl.Cluster, acl.ClusterName) }

// clusterQuietly decides op on the cluster without logging a denial: a
// request that falls back to a narrower permission (CreateTopics,
// ListGroups, InitProducerId).
func (g grants) clusterQuietly(op acl.Operation) bool {
	return g.allowsQuietly(op, acl.Cluster, acl.ClusterName)
}

// onSomeTopic decides op on at least one topic (Kafka's
// authorizeByResourceType).
func (g grants) onSomeTopic(op acl.Operation) bool {
	return g.authorizer == nil || g.authorizer.AllowedOnSome(g.who, op, acl.Topic)
}

// clusterAction decides CLUSTER_ACTION, what only members of the cluster
// may do. With the authorizer on it is the authorizer's; without, a
// secured plane admits super users only and an open one everyone.
func (g grants) clusterAction() bool {
	e := g.acls.nodeEnv
	if e.cfg.Bugs.ControlPlaneAnyPrincipal && e.planeSecured(g.kind) {
		return true
	}
	if g.authorizer != nil {
		return g.cluster(acl.ClusterAction)
	}
	return !e.planeSecured(g.kind) || e.cfg.Broker.IsSuperUser(g.hdr.Principal)
}

// needsACLs reports whether a decision for this request may read the ACLs:
// the authorizer is on and the principal is not a super user.
func (g grants) needsACLs() bool {
	return g.authorizer != nil && !g.authorizer.IsSuperUser(g.who.Principal)
}

// planeSecured reports whether the plane a listener of kind belongs to is
// secured: the control plane (every controller listener) when any
// controller listener is, the broker plane (every broker listener) when
// the inter-broker listener is. Deciding by plane, not by the one
// listener, leaves no PLAINTEXT side door into a secured plane.
func (e *nodeEnv) planeSecured(kind listenerKind) bool {
	if kind == controllerListener {
		return e.cfg.Broker.ControllerPlaneSecured()
	}
	return e.cfg.Broker.InterBrokerPlaneSecured()
}

// access is what an API's requests require: the API table's slot for
// authorization.
type access struct {
	// text says it for SPEC.md §10.7's table.
	text string
	// acls is false for the APIs that need no decision at all
	// (ApiVersions, the SASL exchange): a node whose ACLs are stale still
	// serves them.
	acls bool
	// whole decides what answers the whole request and returns the error
	// code to answer it with, 0 to go on to the handler; nil decides
	// nothing up front.
	whole func(g grants, req kmsg.Request) int16
}

func (a *access) String() string { return a.text }

// authorize decides a request's whole-request requirements. It reports
// whether the handler may run; if not, the request has been answered (or
// its connection closed). A node whose ACLs may be stale still refuses
// what they refuse (refusing is safe), but lets nothing through on them:
// it closes the connection instead, as a node that is down would look, so
// that the client tries another.
func (a *aclState) authorize(conn env.ConnID, g grants, api *apiEntry, req kmsg.Request) bool {
	rule := api.requires
	if rule.whole != nil {
		if code := rule.whole(g, req); code != 0 {
			a.net.Reply(conn, g.hdr.CorrelationID, authorizationFailed(req, code))
			return false
		}
	}
	if rule.acls && g.kind == brokerListener && g.needsACLs() && !a.fresh() {
		a.net.Close(conn, g.hdr.CorrelationID)
		return false
	}
	return true
}

// Error codes of refused requests.
var (
	codeTopicAuthorization   = kerr.TopicAuthorizationFailed.Code
	codeGroupAuthorization   = kerr.GroupAuthorizationFailed.Code
	codeClusterAuthorization = kerr.ClusterAuthorizationFailed.Code
	codeTxnIDAuthorization   = kerr.TransactionalIDAuthorizationFailed.Code
)

// fetchReplicaID is the replica a Fetch is sent for, -1 for a consumer's.
func fetchReplicaID(f *kmsg.FetchRequest) int32 {
	if f.Version >= 15 {
		return f.ReplicaState.ID
	}
	return f.ReplicaID
}

// authorizedOperations is the bitfield of the operations the principal may
// perform on a resource (bit i for the operation with id i), as Kafka's
// Metadata and DescribeGroups tell them: the operations kafka-acls.sh
// supports on that type of resource, decided without auditing.
func (g grants) authorizedOperations(t acl.ResourceType, name string) int32 {
	var bits int32
	for _, op := range acl.SupportedOperations(t)[1:] { // ALL aside
		if g.allowsQuietly(op, t, name) {
			bits |= 1 << op
		}
	}
	return bits
}
