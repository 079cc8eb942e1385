package models

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckForgeries: a forged request refused as its listener must refuse
// it, or whose outcome is unknown, passes; one answered where the
// connection must close, closed where the answer must be
// CLUSTER_AUTHORIZATION_FAILED, or answered by a handler that ran, is a
// violation naming the request and the listener.
func TestCheckForgeries(t *testing.T) {
	op := func(expect ForgeryRefusal, outcome ForgeryOutcome, code int16) ForgedOp {
		return ForgedOp{Request: "BrokerHeartbeat WantShutdown for broker 2", Node: 1, Listener: "PLAINTEXT",
			Principal: "User:mallory", Expect: expect, Outcome: outcome, ErrorCode: code, CallNs: 1e9, ReturnNs: 2e9}
	}
	unauthorized := kerr.ClusterAuthorizationFailed.Code
	refused := []ForgedOp{
		op(RefuseByClose, ForgeryClosed, 0),
		op(RefuseUnauthorized, ForgeryAnswered, unauthorized),
		op(RefuseByClose, ForgeryUnknown, 0),
		op(RefuseUnauthorized, ForgeryUnknown, 0),
	}
	if vs := CheckForgeries(refused); len(vs) != 0 {
		t.Errorf("refused forgeries reported: %v", vs)
	}
	served := []ForgedOp{
		op(RefuseByClose, ForgeryAnswered, 0),
		op(RefuseByClose, ForgeryAnswered, unauthorized),
		op(RefuseUnauthorized, ForgeryAnswered, 0),
		op(RefuseUnauthorized, ForgeryAnswered, kerr.NotController.Code),
		op(RefuseUnauthorized, ForgeryClosed, 0),
	}
	vs := CheckForgeries(served)
	if len(vs) != len(served) {
		t.Fatalf("%d violations for %d served forgeries: %v", len(vs), len(served), vs)
	}
	for _, v := range vs {
		if v.Check != "forgery" || !strings.Contains(v.Detail, "BrokerHeartbeat WantShutdown for broker 2") ||
			!strings.Contains(v.Detail, "node 1's PLAINTEXT listener") {
			t.Errorf("violation does not say what was forged where: %v", v)
		}
	}
	if !strings.Contains(vs[3].Detail, "NOT_CONTROLLER") {
		t.Errorf("violation does not name the error answered: %v", vs[3])
	}
}
