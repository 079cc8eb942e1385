package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDecisionCutShortByStorageFailure: the metadata log's disk fills, so
// the next decision's write fails at once and stops the quorum inside the
// Append. The controller stops deciding and answers the request
// NOT_CONTROLLER, and later requests too, instead of following the
// decision to the image it dropped, which would panic (in DeleteTopics,
// AlterPartition and BrokerHeartbeat alike).
func TestDecisionCutShortByStorageFailure(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 1, 3, nil)
	h.disk.SetFull(true)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	name := "a"
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}}
	if code := h.send(del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != kerr.NotController.Code {
		t.Fatalf("DeleteTopics on a failed metadata log: %v, want NOT_CONTROLLER", kerr.ErrorForCode(code))
	}
	if h.c.Active() {
		t.Fatal("the controller is still active after its quorum's storage failed")
	}
	if code := h.heartbeat(1, epochs[0], false).ErrorCode; code != kerr.NotController.Code {
		t.Fatalf("heartbeat after the failure: %v, want NOT_CONTROLLER", kerr.ErrorForCode(code))
	}
	h.advance(20_000) // session expiries must not fire on a stopped controller
}
