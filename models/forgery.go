package models

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The control plane belongs to the cluster (SPEC.md §10): a host outside
// it that forges control-plane requests (a broker's registration or
// heartbeat, an ISR change, Raft votes, a replica's fetch) changes
// nothing. The simulator's forger records each request it sent as a
// ForgedOp; CheckForgeries demands that every one whose outcome came back
// was refused the way its listener refuses it, before any handler ran.

// ForgeryRefusal is how a node must refuse a forged request.
type ForgeryRefusal uint8

const (
	// RefuseByClose: the listener does not serve the API (a control-plane
	// RPC on a client listener), so the connection closes unanswered.
	RefuseByClose ForgeryRefusal = iota + 1
	// RefuseUnauthorized: the listener serves the API on a secured plane,
	// to cluster members only; the forger is none, so the answer is
	// CLUSTER_AUTHORIZATION_FAILED.
	RefuseUnauthorized
)

func (r ForgeryRefusal) String() string {
	switch r {
	case RefuseByClose:
		return "the connection closed"
	case RefuseUnauthorized:
		return "CLUSTER_AUTHORIZATION_FAILED"
	}
	return fmt.Sprintf("ForgeryRefusal(%d)", uint8(r))
}

// ForgeryOutcome is what the forger got back.
type ForgeryOutcome uint8

const (
	// ForgeryUnknown: nothing came back (the connection broke, the node
	// was down, the forger's timeout passed): the request may or may not
	// have been executed, and other checks must catch any effect.
	ForgeryUnknown ForgeryOutcome = iota
	// ForgeryClosed: the node closed the connection without answering.
	ForgeryClosed
	// ForgeryAnswered: the node answered, with ForgedOp.ErrorCode.
	ForgeryAnswered
)

// ForgedOp is one forged request and what came of it.
type ForgedOp struct {
	// Request says what was forged, in whose name ("BrokerHeartbeat
	// WantShutdown for broker 2 epoch 5").
	Request string
	// Node and Listener are where it was sent; Principal is what the
	// forger authenticated as there.
	Node      int32
	Listener  string
	Principal string
	// Expect is how the listener must refuse it.
	Expect           ForgeryRefusal
	CallNs, ReturnNs int64
	Outcome          ForgeryOutcome
	// ErrorCode is the answer's top-level error code (a Fetch v4..v6
	// without one: its first partition's).
	ErrorCode int16
}

// CheckForgeries reports each forged request that came back otherwise than
// refused as its listener must refuse it: answered where the connection
// must close, or answered with anything but CLUSTER_AUTHORIZATION_FAILED
// (success, or an error from a handler that ran: NOT_CONTROLLER,
// STALE_BROKER_EPOCH) where the plane admits only members.
func CheckForgeries(ops []ForgedOp) []Violation {
	var vs []Violation
	for _, op := range ops {
		var got string
		switch {
		case op.Outcome == ForgeryUnknown:
			continue
		case op.Expect == RefuseByClose && op.Outcome == ForgeryClosed:
			continue
		case op.Expect == RefuseUnauthorized && op.Outcome == ForgeryAnswered && op.ErrorCode == kerr.ClusterAuthorizationFailed.Code:
			continue
		case op.Outcome == ForgeryClosed:
			got = "the connection closed"
		default:
			got = fmt.Sprintf("an answer with error %s", forgeryErrorName(op.ErrorCode))
		}
		vs = append(vs, Violation{Check: "forgery", Detail: fmt.Sprintf(
			"%s, sent as %s to node %d's %s listener at %d ms, got %s at %d ms; want %s",
			op.Request, op.Principal, op.Node, op.Listener, op.CallNs/1e6, got, op.ReturnNs/1e6, op.Expect)})
	}
	return vs
}

// forgeryErrorName names a Kafka error code, NONE for 0.
func forgeryErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}
