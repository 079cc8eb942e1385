package broker

// Authorization, decided once per request before its handler runs (SPEC.md
// §10): a request its principal may not make is answered at once with the
// API's CLUSTER_AUTHORIZATION_FAILED, before any side effect, without
// decompressing anything and without waiting in a purgatory.
//
// So far the table requires one thing, CLUSTER_ACTION on the cluster: what
// only members of the cluster may do (register and heartbeat a broker,
// change an ISR, allocate producer ids, vote and replicate the metadata
// log, forward admin requests to the controller, fetch as a replica). It
// is enforced where the plane the request arrived on is secured: on the
// controller listeners when any controller listener's protocol is not
// PLAINTEXT, on the broker listeners when the inter-broker listener's is
// not. A member is a super user (super.users); CLUSTER_ACTION granted by
// an ACL arrives with the ACL issue (aclAllows). A PLAINTEXT plane
// authenticates nobody, so, as Kafka without an authorizer, it admits
// every request its listener serves.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/controller"
	"strand/core/env"
)

// aclOperation is one of Kafka's ACL operations (AclOperation).
type aclOperation uint8

const (
	// opClusterAction is acting as a member of the cluster.
	opClusterAction aclOperation = iota + 1
	// opAlter and opDescribe are Kafka's ALTER and DESCRIBE (on the
	// cluster: SCRAM credentials).
	opAlter
	opDescribe
)

func (o aclOperation) String() string {
	switch o {
	case opClusterAction:
		return "CLUSTER_ACTION"
	case opAlter:
		return "ALTER"
	case opDescribe:
		return "DESCRIBE"
	}
	return fmt.Sprintf("aclOperation(%d)", uint8(o))
}

// resourceType is one of Kafka's ACL resource types (ResourceType).
type resourceType uint8

const (
	// resourceCluster is the cluster itself (Kafka's kafka-cluster).
	resourceCluster resourceType = iota + 1
)

func (r resourceType) String() string {
	if r == resourceCluster {
		return "CLUSTER"
	}
	return fmt.Sprintf("resourceType(%d)", uint8(r))
}

// requirement is one operation on one resource that a request must be
// allowed.
type requirement struct {
	operation aclOperation
	resource  resourceType
}

func (r requirement) String() string { return r.operation.String() + " on the " + r.resource.String() }

// clusterActionOnCluster is what the control plane requires.
var clusterActionOnCluster = []requirement{{opClusterAction, resourceCluster}}

// alterOnCluster and describeOnCluster are what altering and describing
// SCRAM credentials require, as in Kafka.
var (
	alterOnCluster    = []requirement{{opAlter, resourceCluster}}
	describeOnCluster = []requirement{{opDescribe, resourceCluster}}
)

// accessRule is what an API's requests must be allowed: the API table's
// slot for authorization, which the ACL issue extends with the topic,
// group and cluster operations of the client APIs.
type accessRule uint8

const (
	// openAccess requires nothing yet.
	openAccess accessRule = iota
	// clusterAccess requires CLUSTER_ACTION on the cluster: the control
	// plane's APIs.
	clusterAccess
	// replicaFetchAccess requires CLUSTER_ACTION of a replica's Fetch
	// (ReplicaID, from v15 ReplicaState.ID, of 0 or more), which acts for
	// the cluster; a consumer's Fetch requires nothing yet (the ACL issue:
	// READ on each topic).
	replicaFetchAccess
	// clusterAlterAccess and clusterDescribeAccess require ALTER and
	// DESCRIBE on the cluster (SCRAM credentials). Until ACLs are
	// enforced they are granted to everyone, as by Kafka without an
	// authorizer (allowed).
	clusterAlterAccess
	clusterDescribeAccess
)

// String describes the rule as SPEC.md §10's table does.
func (a accessRule) String() string {
	switch a {
	case openAccess:
		return "—"
	case clusterAccess:
		return "CLUSTER_ACTION"
	case replicaFetchAccess:
		return "CLUSTER_ACTION for a replica's fetch"
	case clusterAlterAccess:
		return "ALTER on the cluster"
	case clusterDescribeAccess:
		return "DESCRIBE on the cluster"
	}
	return fmt.Sprintf("accessRule(%d)", uint8(a))
}

// requirements are what req must be allowed under the rule.
func (a accessRule) requirements(req kmsg.Request) []requirement {
	switch a {
	case clusterAccess:
		return clusterActionOnCluster
	case replicaFetchAccess:
		if f, ok := req.(*kmsg.FetchRequest); ok && fetchReplicaID(f) >= 0 {
			return clusterActionOnCluster
		}
	case clusterAlterAccess:
		return alterOnCluster
	case clusterDescribeAccess:
		return describeOnCluster
	}
	return nil
}

// fetchReplicaID is the replica a Fetch is sent for, -1 for a consumer's.
func fetchReplicaID(f *kmsg.FetchRequest) int32 {
	if f.Version >= 15 {
		return f.ReplicaState.ID
	}
	return f.ReplicaID
}

// authorized reports whether the principal of a request that arrived on a
// listener of kind may make it: every requirement of its entry allowed.
func (n *Node) authorized(kind listenerKind, hdr env.RequestHeader, api *apiEntry, req kmsg.Request) bool {
	for _, r := range api.requires.requirements(req) {
		if !n.allowed(kind, hdr, r) {
			return false
		}
	}
	return true
}

// allowed decides one requirement.
func (n *Node) allowed(kind listenerKind, hdr env.RequestHeader, r requirement) bool {
	switch r.operation {
	case opClusterAction:
		if !n.planeSecured(kind) || n.cfg.Bugs.ControlPlaneAnyPrincipal {
			return true
		}
		return n.cfg.Broker.IsSuperUser(hdr.Principal) || n.aclAllows(hdr, r)
	case opAlter, opDescribe:
		// No authorizer yet (authorizer.class.name refuses the start):
		// everyone is allowed, as in Kafka without one. The ACL issue
		// decides these with the ACLs of the metadata log.
		return true
	}
	panic(fmt.Sprintf("broker: no rule for requirement %v", r))
}

// planeSecured reports whether the plane a listener of kind belongs to is
// secured: the control plane (every controller listener) when any
// controller listener is, the broker plane (every broker listener) when
// the inter-broker listener is. Deciding by plane, not by the one
// listener, leaves no PLAINTEXT side door into a secured plane.
func (n *Node) planeSecured(kind listenerKind) bool {
	if kind == controllerListener {
		return n.cfg.Broker.ControllerPlaneSecured()
	}
	return n.cfg.Broker.InterBrokerPlaneSecured()
}

// aclAllows is where ACLs grant what super.users does not: Kafka's
// StandardAuthorizer answering for the principal and host. Until the ACL
// issue stores ACLs in the metadata log nothing is granted here, so a
// secured plane admits only super users.
func (n *Node) aclAllows(hdr env.RequestHeader, r requirement) bool { return false }

// clusterAuthorizationFailed is req's answer when the cluster action it
// requires is refused, as Kafka's getErrorResponse gives it: the
// top-level error code, and for Fetch every partition's too (v4..v6 have
// no top-level code).
func clusterAuthorizationFailed(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		resp := fetchError(r, code)
		resp.ErrorCode = code
		return resp
	case *kmsg.VoteRequest:
		resp := r.ResponseKind().(*kmsg.VoteResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.BeginQuorumEpochRequest:
		resp := r.ResponseKind().(*kmsg.BeginQuorumEpochResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndQuorumEpochRequest:
		resp := r.ResponseKind().(*kmsg.EndQuorumEpochResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.FetchSnapshotRequest:
		resp := r.ResponseKind().(*kmsg.FetchSnapshotResponse)
		resp.ErrorCode = code
		return resp
	}
	return controller.ErrorResponse(req, code)
}
