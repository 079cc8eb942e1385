package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/core/quorum"
)

// MetadataTopic is the metadata log's topic; its only partition is 0.
const MetadataTopic = quorum.MetadataTopic

// MetadataTopicID is the metadata topic's id, Kafka's Uuid.METADATA_TOPIC_ID
// (0, 1): Fetch v13+ names topics by id.
var MetadataTopicID = quorum.MetadataTopicID

// Quorum is the replicated metadata log as the controller sees it:
// core/quorum's MetadataQuorum over the node's Raft voter.
//
// Contract: Append assigns consecutive offsets from EndOffset() to one
// decision; a decision becomes visible (CommittedOffset passes it) only
// whole, or never (aborted: readers skip it). Committed decisions never
// change. The callbacks given to Listen run on the event loop; onCommit is
// not called for a commit that happens inside Append (the caller reads
// CommittedOffset after Append returns).
type Quorum interface {
	// Listen registers the callbacks: commits, changes of role, epoch or
	// leader, a failure that stopped the node, a snapshot that replaces
	// the state.
	Listen(onCommit, onChange func(), onFailure func(error), onSnapshot func(*quorum.Snapshot))
	// Append appends records as one decision and returns the offset of
	// the first. An error means nothing was appended and this node can no
	// longer append in its epoch (it does not lead, or its disk failed).
	Append(records []metadata.Record) (baseOffset int64, err error)
	// EndOffset is the offset the next appended record will get.
	EndOffset() int64
	// CommittedOffset is the offset after the last committed decision:
	// the high watermark brokers see.
	CommittedOffset() int64
	// LogStartOffset is the first offset still held.
	LogStartOffset() int64
	// ReadCommitted copies whole committed decisions, one batch each, from
	// fetchOffset, at most maxBytes unless the first batch alone is larger.
	ReadCommitted(fetchOffset int64, maxBytes int32) ([]byte, error)
	// CommittedBatches decodes the committed decisions from offset from
	// on, in order.
	CommittedBatches(from int64, fn func(metadata.Batch) error) error
	// TakeSnapshot hands the quorum the committed image's encoding after
	// the decisions below endOffset; the log behind it may then go.
	TakeSnapshot(endOffset int64, data []byte) error
	// LatestSnapshot is the latest snapshot, nil if none: brokers behind
	// the log start read it (FetchSnapshot).
	LatestSnapshot() *quorum.Snapshot
	// Epoch is the quorum epoch this node is in.
	Epoch() int32
	// LeaderID is the quorum leader this node knows, -1 if none.
	LeaderID() int32
	// LeaderEpochStart reports whether this node leads and, if so, the
	// offset of its epoch's leader-change entry.
	LeaderEpochStart() (int64, bool)
	// Describe is the leader's view of the voters' replication, times in
	// the node's monotonic milliseconds; false if this node does not lead.
	Describe() (quorum.Description, bool)
}

// notControllerResponse answers req NOT_CONTROLLER, in every place its
// response has an error code.
func notControllerResponse(req kmsg.Request) kmsg.Response {
	return ErrorResponse(req, codeNotController)
}

// ErrorResponse answers a controller request (Handles(req) is true) with
// code in every place its response has an error code: NOT_CONTROLLER from
// a standby, or a forwarding broker's REQUEST_TIMED_OUT.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.BrokerHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterPartitionRequest:
		resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AllocateProducerIDsRequest:
		resp := r.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeQuorumRequest:
		resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = &name, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ElectLeadersRequest:
		return electLeadersErrorResponse(r, code, "")
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return scramErrorResponse(r, code)
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			rr := kmsg.NewCreateACLsResponseResult()
			rr.ErrorCode = code
			resp.Results = append(resp.Results, rr)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			rr := kmsg.NewDeleteACLsResponseResult()
			rr.ErrorCode = code
			resp.Results = append(resp.Results, rr)
		}
		return resp
	}
	if resp, ok := configsErrorResponse(req, code); ok {
		return resp
	}
	panic(fmt.Sprintf("controller: no error answer for %T", req))
}
