package broker

// What each API requires (Kafka's KafkaApis and ControllerApis are the
// reference; SPEC.md §10.7 renders the table from these texts), and the
// answer of a request refused whole.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/controller"
	"strand/core/quorum"
)

// wholeCluster refuses the request unless op on the cluster is allowed.
func wholeCluster(op acl.Operation) func(g grants, req kmsg.Request) int16 {
	return func(g grants, _ kmsg.Request) int16 {
		if !g.cluster(op) {
			return codeClusterAuthorization
		}
		return 0
	}
}

// wholeGroup refuses the request unless op on its group is allowed.
func wholeGroup(op acl.Operation, groupOf func(kmsg.Request) (string, bool)) func(g grants, req kmsg.Request) int16 {
	return func(g grants, req kmsg.Request) int16 {
		if name, ok := groupOf(req); ok && !g.group(op, name) {
			return codeGroupAuthorization
		}
		return 0
	}
}

var (
	// noAccess needs no decision: ApiVersions and the SASL exchange, which
	// every connection must be able to make first.
	noAccess = &access{text: "—"}
	// clusterAccess is the control plane's: only members of the cluster.
	clusterAccess = &access{text: "CLUSTER_ACTION", acls: true, whole: func(g grants, _ kmsg.Request) int16 {
		if !g.clusterAction() {
			return codeClusterAuthorization
		}
		return 0
	}}
	produceAccess = &access{text: "WRITE on each topic; WRITE on the transactional id, if one", acls: true,
		whole: func(g grants, req kmsg.Request) int16 {
			var txn *string
			switch r := req.(type) {
			case *kmsg.ProduceRequest:
				txn = r.TransactionID
			case *PrecheckedProduce:
				txn = r.TransactionID
			}
			if txn != nil && !g.allows(acl.Write, acl.TransactionalID, *txn) {
				return codeTxnIDAuthorization
			}
			return 0
		}}
	fetchAccess = &access{text: "READ on each topic; a replica's fetch: CLUSTER_ACTION", acls: true,
		whole: func(g grants, req kmsg.Request) int16 {
			if f, ok := req.(*kmsg.FetchRequest); ok && fetchReplicaID(f) >= 0 && !g.clusterAction() {
				return codeClusterAuthorization
			}
			return 0
		}}
	listOffsetsAccess     = &access{text: "DESCRIBE on each topic", acls: true}
	metadataAccess        = &access{text: "DESCRIBE on each topic (unnamed ones left out); auto-creation: CREATE on the cluster or the topic", acls: true}
	offsetsForEpochAccess = &access{text: "DESCRIBE on each topic; a replica's: CLUSTER_ACTION", acls: true,
		whole: func(g grants, req kmsg.Request) int16 {
			if r, ok := req.(*kmsg.OffsetForLeaderEpochRequest); ok && r.Version >= 3 && r.ReplicaID >= 0 && !g.clusterAction() {
				return codeClusterAuthorization
			}
			return 0
		}}
	offsetCommitAccess = &access{text: "READ on the group and on each topic", acls: true,
		whole: wholeGroup(acl.Read, func(req kmsg.Request) (string, bool) {
			r, ok := req.(*kmsg.OffsetCommitRequest)
			return r.Group, ok
		})}
	offsetFetchAccess = &access{text: "DESCRIBE on the group and on each topic (unnamed ones left out)", acls: true,
		whole: wholeGroup(acl.Describe, func(req kmsg.Request) (string, bool) {
			r, ok := req.(*kmsg.OffsetFetchRequest)
			return r.Group, ok && r.Version < batchedOffsetFetchVersion
		})}
	findCoordinatorAccess = &access{text: "DESCRIBE on the group (transaction keys: on the transactional id)", acls: true}
	groupReadAccess       = &access{text: "READ on the group", acls: true, whole: wholeGroup(acl.Read, groupOfMemberRequest)}
	describeGroupsAccess  = &access{text: "DESCRIBE on each group", acls: true}
	listGroupsAccess      = &access{text: "DESCRIBE on the cluster, else each group's DESCRIBE (the others left out)", acls: true}
	createTopicsAccess    = &access{text: "CREATE on the cluster or on each topic; DESCRIBE on an existing one to be told it exists", acls: true}
	deleteTopicsAccess    = &access{text: "DELETE on each topic", acls: true}
	deleteRecordsAccess   = &access{text: "DELETE on each topic", acls: true}
	initProducerIDAccess  = &access{text: "IDEMPOTENT_WRITE on the cluster or WRITE on some topic; a transactional id: WRITE on it", acls: true,
		whole: func(g grants, req kmsg.Request) int16 {
			r, ok := req.(*kmsg.InitProducerIDRequest)
			switch {
			case !ok:
				return 0
			case r.TransactionalID != nil && *r.TransactionalID != "":
				if !g.allows(acl.Write, acl.TransactionalID, *r.TransactionalID) {
					return codeTxnIDAuthorization
				}
			case !g.clusterQuietly(acl.IdempotentWrite) && !g.onSomeTopic(acl.Write):
				g.cluster(acl.IdempotentWrite) // audits the denial
				return codeClusterAuthorization
			}
			return 0
		}}
	describeACLsAccess = &access{text: "DESCRIBE on the cluster", acls: true, whole: wholeCluster(acl.Describe)}
	alterACLsAccess    = &access{text: "ALTER on the cluster", acls: true, whole: wholeCluster(acl.Alter)}
	// describeScramAccess and alterScramAccess are SCRAM credentials'
	// (KIP-554), as Kafka requires them.
	describeScramAccess   = &access{text: "DESCRIBE on the cluster", acls: true, whole: wholeCluster(acl.Describe)}
	alterScramAccess      = &access{text: "ALTER on the cluster", acls: true, whole: wholeCluster(acl.Alter)}
	describeConfigsAccess = &access{text: "DESCRIBE_CONFIGS on each topic (a broker: on the cluster)", acls: true}
	alterConfigsAccess    = &access{text: "ALTER_CONFIGS on each topic (a broker: on the cluster)", acls: true}
	describeLogDirsAccess = &access{text: "DESCRIBE on the cluster", acls: true, whole: wholeCluster(acl.Describe)}
	describeQuorumAccess  = &access{text: "DESCRIBE on the cluster", acls: true, whole: wholeCluster(acl.Describe)}
	// describeQuorumOnControllerAccess: a client asking a controller
	// directly (--bootstrap-controller) needs DESCRIBE on the cluster, as
	// in Kafka; a broker forwarding a client's request, which it has
	// authorized, holds CLUSTER_ACTION (Kafka wraps it in an Envelope and
	// the controller decides on the client's principal; Strand forwards
	// plainly, as it does the other admin requests).
	describeQuorumOnControllerAccess = &access{text: "DESCRIBE on the cluster, or CLUSTER_ACTION (a broker forwarding)", acls: true,
		whole: func(g grants, req kmsg.Request) int16 {
			if g.authorizer != nil && g.clusterQuietly(acl.ClusterAction) {
				return 0
			}
			return wholeCluster(acl.Describe)(g, req)
		}}
	createPartitionsAccess = &access{text: "ALTER on each topic", acls: true}
	deleteGroupsAccess     = &access{text: "DELETE on each group", acls: true}
	electLeadersAccess     = &access{text: "ALTER on the cluster", acls: true, whole: wholeCluster(acl.Alter)}
	offsetDeleteAccess     = &access{text: "DELETE on the group, READ on each topic", acls: true,
		whole: wholeGroup(acl.Delete, func(req kmsg.Request) (string, bool) {
			r, ok := req.(*kmsg.OffsetDeleteRequest)
			return r.Group, ok
		})}
	// describeClusterAccess: Kafka serves DescribeCluster to everyone, as
	// Metadata names the brokers to everyone; DESCRIBE on the cluster
	// only decides whether its authorized operations are told.
	describeClusterAccess = &access{text: "— (DESCRIBE on the cluster to be told its authorized operations)", acls: true}
)

// groupOfMemberRequest is the group of a JoinGroup, Heartbeat, LeaveGroup
// or SyncGroup.
func groupOfMemberRequest(req kmsg.Request) (string, bool) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return r.Group, true
	case *kmsg.HeartbeatRequest:
		return r.Group, true
	case *kmsg.LeaveGroupRequest:
		return r.Group, true
	case *kmsg.SyncGroupRequest:
		return r.Group, true
	}
	return "", false
}

// authorizationFailed is req's answer when a whole-request requirement is
// refused with code, as Kafka's getErrorResponse gives it: the top-level
// error code where the response has one, and every partition's, group's,
// creation's or filter's.
func authorizationFailed(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *PrecheckedProduce:
		return authorizationFailed(r.ProduceRequest, code)
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p.Partition, code, -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.FetchRequest:
		resp := fetchError(r, code)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetForLeaderEpochRequest:
		resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		return offsetCommitFailed(r, code)
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = code, -1
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.DescribeACLsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode = code
		for _, u := range r.Users {
			rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			rr.User, rr.ErrorCode = u.Name, code
			resp.Results = append(resp.Results, rr)
		}
		return resp
	case *kmsg.DescribeLogDirsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.ElectLeadersRequest:
		return controller.ErrorResponse(req, code)
	}
	if resp := quorum.ErrorAnswer(req, code); resp != nil {
		return resp
	}
	if controller.Handles(req) {
		return controller.ErrorResponse(req, code)
	}
	panic(fmt.Sprintf("broker: no authorization error answer for %T", req))
}

// offsetCommitFailed answers every partition of r with code.
func offsetCommitFailed(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
