package models

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func adminOp(kind AdminKind, callMs, returnMs int64, code int16, id byte) AdminOp {
	op := AdminOp{Kind: kind, Topic: "c0", CallNs: callMs * 1e6, ReturnNs: returnMs * 1e6, ErrorCode: code}
	if returnMs < 0 {
		op.ReturnNs = NeverReturnedNs
	}
	op.TopicID[0] = id
	return op
}

// TestTopicRegister: the admin answers on one topic must fit one order of
// creations and deletions; an answer without a definite outcome may have
// taken effect.
func TestTopicRegister(t *testing.T) {
	missing, exists := kerr.UnknownTopicOrPartition.Code, kerr.TopicAlreadyExists.Code
	for _, tc := range []struct {
		name string
		ops  []AdminOp
		bad  bool
	}{
		{"delete, create, delete", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 30, 0, 1), adminOp(AdminDeleteTopic, 40, 50, 0, 0)}, false},
		{"created twice without a deletion", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 30, 0, 1), adminOp(AdminCreateTopic, 40, 50, 0, 2)}, true},
		{"two concurrent creations both succeed", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 50, 0, 1), adminOp(AdminCreateTopic, 30, 60, 0, 2)}, true},
		{"two concurrent creations, one told it exists", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 50, 0, 1), adminOp(AdminCreateTopic, 30, 60, exists, 0)}, false},
		{"deleted, then unknown to a deletion that follows a definite creation", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 30, 0, 1), adminOp(AdminDeleteTopic, 40, 50, missing, 0)}, true},
		{"a timed-out creation explains a later deletion", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, -1, 0, 0), adminOp(AdminDeleteTopic, 40, 50, 0, 0)}, false},
		{"NOT_CONTROLLER may still take effect", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreateTopic, 20, 25, kerr.NotController.Code, 0), adminOp(AdminDeleteTopic, 40, 50, 0, 0)}, false},
		{"without it the deletion has nothing to delete", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminDeleteTopic, 40, 50, 0, 0)}, true},
		{"CreatePartitions on a deleted topic succeeds", []AdminOp{
			adminOp(AdminDeleteTopic, 0, 10, 0, 0), adminOp(AdminCreatePartitions, 20, 30, 0, 0)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := CheckMetadataRegisters(tc.ops, nil, 0)
			if bad := len(vs) > 0; bad != tc.bad {
				t.Fatalf("violations %v, want a violation: %v", vs, tc.bad)
			}
		})
	}
}

func alter(callMs, returnMs int64, reqLE, reqPE, le, pe int32) AlterPartitionOp {
	return AlterPartitionOp{TopicID: [16]byte{1}, Partition: 0, Broker: 1, CallNs: callMs * 1e6, ReturnNs: returnMs * 1e6,
		ReqLeaderEpoch: reqLE, ReqPartitionEpoch: reqPE, LeaderEpoch: le, PartitionEpoch: pe}
}

// TestPartitionRegister: accepted AlterPartitions are compare-and-sets on
// the partition epoch; the controller's own changes may move it forward
// unseen, never back.
func TestPartitionRegister(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []AlterPartitionOp
		bad  bool
	}{
		{"a chain", []AlterPartitionOp{alter(0, 10, 1, 5, 1, 6), alter(20, 30, 1, 6, 1, 7)}, false},
		{"unseen changes in between", []AlterPartitionOp{alter(0, 10, 1, 5, 1, 6), alter(20, 30, 2, 9, 2, 10)}, false},
		{"an accepted change from an epoch already passed", []AlterPartitionOp{alter(0, 10, 1, 5, 1, 6), alter(20, 30, 1, 5, 1, 6)}, true},
		{"two concurrent changes accepted from one epoch", []AlterPartitionOp{alter(0, 30, 1, 5, 1, 6), alter(10, 40, 1, 5, 1, 6)}, true},
		{"one version, two leader epochs", []AlterPartitionOp{alter(0, 10, 1, 5, 1, 6), alter(20, 30, 2, 6, 2, 7)}, true},
		{"rejected and unanswered ones teach nothing", []AlterPartitionOp{alter(0, 10, 1, 5, 1, 6),
			{TopicID: [16]byte{1}, CallNs: 20e6, ReturnNs: 30e6, ReqLeaderEpoch: 1, ReqPartitionEpoch: 6, ErrorCode: kerr.InvalidUpdateVersion.Code},
			{TopicID: [16]byte{1}, CallNs: 20e6, ReturnNs: NeverReturnedNs, ReqLeaderEpoch: 1, ReqPartitionEpoch: 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := CheckMetadataRegisters(nil, tc.ops, 0)
			if bad := len(vs) > 0; bad != tc.bad {
				t.Fatalf("violations %v, want a violation: %v", vs, tc.bad)
			}
		})
	}
}
