package models

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// SCRAM credentials as metadata (SPEC.md §10.6): the controller decides
// each AlterUserScramCredentials on its latest state and answers once the
// decision has committed, so the credential admin's answers must be
// explainable by one order of its alterations, per (user, mechanism), a
// presence register: an upsert makes the credential present; a deletion
// answered OK needs it present and removes it; one answered
// RESOURCE_NOT_FOUND needs it absent. An alteration without a definite
// answer (a timeout, a connection error, NOT_CONTROLLER, which a later
// controller may still commit past) takes effect where it can, any time
// after its call. And once the cluster has converged, every broker holds
// the active controller's credentials and hands its environment exactly
// what it applied (CheckScramAgreement).

// ScramOpKind is an alteration of one credential.
type ScramOpKind string

// The alterations.
const (
	ScramUpsert ScramOpKind = "upsert"
	ScramDelete ScramOpKind = "delete"
)

// ScramOp is one AlterUserScramCredentials exchange altering one
// credential, as the admin client saw it.
type ScramOp struct {
	Client    int
	Kind      ScramOpKind
	User      string
	Mechanism int8
	// Iterations is what an upsert set.
	Iterations int32
	// CallNs and ReturnNs as for Produce (NeverReturnedNs: no answer).
	CallNs, ReturnNs int64
	// ErrorCode is the user's result; Error a connection error.
	ErrorCode int16
	Error     string
}

// scramDefinite reports whether the answer is one the model learns from.
func scramDefinite(op ScramOp) bool {
	if op.ReturnNs == NeverReturnedNs || op.Error != "" {
		return false
	}
	return op.ErrorCode == 0 || (op.Kind == ScramDelete && op.ErrorCode == kerr.ResourceNotFound.Code)
}

// scramInput is one alteration for the model.
type scramInput struct {
	op       ScramOp
	definite bool
}

var scramModel = porcupine.Model{
	Init: func() interface{} { return false },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		present, in := state.(bool), input.(scramInput)
		switch {
		case !in.definite && in.op.Kind == ScramUpsert:
			return true, true
		case !in.definite:
			return true, false // a deletion where it can, a no-op elsewhere: absent either way
		case in.op.Kind == ScramUpsert:
			return true, true
		case in.op.ErrorCode == 0:
			return present, false
		}
		return !present, false // RESOURCE_NOT_FOUND
	},
	Equal: func(a, b interface{}) bool { return a.(bool) == b.(bool) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(scramInput)
		if !in.definite {
			return fmt.Sprintf("%s → unknown", in.op.Kind)
		}
		return fmt.Sprintf("%s → %v", in.op.Kind, kerr.ErrorForCode(in.op.ErrorCode))
	},
	DescribeState: func(state interface{}) string {
		if state.(bool) {
			return "present"
		}
		return "absent"
	},
}

// CheckScramRegisters checks the credential admin's alterations against
// the presence register of each (user, mechanism), within timeout per
// register.
func CheckScramRegisters(ops []ScramOp, timeout time.Duration) []Violation {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	type key struct {
		user      string
		mechanism int8
	}
	byKey := map[key][]porcupine.Operation{}
	for i, op := range ops {
		in := scramInput{op: op, definite: scramDefinite(op)}
		ret := op.ReturnNs
		if !in.definite {
			ret = NeverReturnedNs
		}
		k := key{op.User, op.Mechanism}
		byKey[k] = append(byKey[k], porcupine.Operation{ClientId: i, Input: in, Call: op.CallNs, Return: ret})
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey { // order-independent: sorted below
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].user != keys[j].user {
			return keys[i].user < keys[j].user
		}
		return keys[i].mechanism < keys[j].mechanism
	})
	var vs []Violation
	for _, k := range keys {
		if v, bad := checkRegister(scramModel, byKey[k], timeout); bad {
			vs = append(vs, Violation{Check: "metadata-scram", TP: TopicPartition{Partition: -1},
				Detail: fmt.Sprintf("SCRAM credential %s/%d: AlterUserScramCredentials answers %s", k.user, k.mechanism, v)})
		}
	}
	return vs
}

// ScramView is one node's SCRAM credentials at the end of a run: what its
// metadata image holds and what it handed its environment, each as a
// canonical text (user, mechanism, iterations, salt and keys).
type ScramView struct {
	Node int32
	// Image is the credentials of the node's applied metadata.
	Image string
	// Published is what the node last handed env.Network; Matches says
	// whether it is the image's very set.
	Matches bool
}

// CheckScramAgreement checks converged nodes: every node's credentials are
// the active controller's (controller, the committed image's), and every
// node hands its environment the set it applied.
func CheckScramAgreement(controller string, views []ScramView) []Violation {
	var vs []Violation
	for _, v := range views {
		if v.Image != controller {
			vs = append(vs, Violation{Check: "metadata-scram-agreement", TP: TopicPartition{Partition: -1},
				Detail: fmt.Sprintf("broker %d holds SCRAM credentials [%s], the controller [%s]", v.Node, abbreviate(v.Image), abbreviate(controller))})
		}
		if !v.Matches {
			vs = append(vs, Violation{Check: "metadata-scram-agreement", TP: TopicPartition{Partition: -1},
				Detail: fmt.Sprintf("broker %d authenticates with SCRAM credentials other than those it applied", v.Node)})
		}
	}
	return vs
}

// abbreviate shortens a credential text for a message.
func abbreviate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return strings.TrimSpace(s)
}
