package models

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func scramOp(kind ScramOpKind, callMs, returnMs int64, code int16) ScramOp {
	ret := returnMs * 1e6
	if returnMs < 0 {
		ret = NeverReturnedNs
	}
	return ScramOp{Kind: kind, User: "u", Mechanism: 1, CallNs: callMs * 1e6, ReturnNs: ret, ErrorCode: code}
}

// TestScramRegisters: hand-built histories of one credential, each
// explainable by an order of its alterations or not.
func TestScramRegisters(t *testing.T) {
	missing := kerr.ResourceNotFound.Code
	cases := []struct {
		name string
		ops  []ScramOp
		ok   bool
	}{
		{"upsert then delete", []ScramOp{scramOp(ScramUpsert, 0, 1, 0), scramOp(ScramDelete, 2, 3, 0)}, true},
		{"a delete of nothing", []ScramOp{scramOp(ScramDelete, 0, 1, 0)}, false},
		{"two deletes of one upsert", []ScramOp{scramOp(ScramUpsert, 0, 1, 0), scramOp(ScramDelete, 2, 3, 0), scramOp(ScramDelete, 4, 5, 0)}, false},
		{"not found after an upsert", []ScramOp{scramOp(ScramUpsert, 0, 1, 0), scramOp(ScramDelete, 2, 3, missing)}, false},
		{"not found at the start", []ScramOp{scramOp(ScramDelete, 0, 1, missing), scramOp(ScramUpsert, 2, 3, 0)}, true},
		{"overlapping: either order", []ScramOp{scramOp(ScramUpsert, 0, 10, 0), scramOp(ScramDelete, 1, 9, missing)}, true},
		{"an unanswered upsert explains a later delete", []ScramOp{scramOp(ScramUpsert, 0, -1, 0), scramOp(ScramDelete, 5, 6, 0)}, true},
		{"NOT_CONTROLLER may still commit", []ScramOp{scramOp(ScramUpsert, 0, 1, kerr.NotController.Code), scramOp(ScramDelete, 5, 6, 0)}, true},
		{"an unanswered delete does not excuse a second delete's success",
			[]ScramOp{scramOp(ScramUpsert, 0, 1, 0), scramOp(ScramDelete, 2, -1, 0), scramOp(ScramDelete, 4, 5, 0), scramOp(ScramDelete, 6, 7, 0)}, false},
	}
	for _, c := range cases {
		vs := CheckScramRegisters(c.ops, 0)
		if (len(vs) == 0) != c.ok {
			t.Errorf("%s: violations %v, want ok=%v", c.name, vs, c.ok)
		}
	}
}

func TestScramAgreement(t *testing.T) {
	if vs := CheckScramAgreement("a ", []ScramView{{Node: 1, Image: "a ", Matches: true}, {Node: 2, Image: "a ", Matches: true}}); len(vs) != 0 {
		t.Fatalf("agreeing nodes: %v", vs)
	}
	vs := CheckScramAgreement("a ", []ScramView{{Node: 1, Image: "b ", Matches: true}, {Node: 2, Image: "a ", Matches: false}})
	if len(vs) != 2 || !strings.Contains(vs[0].Detail, "broker 1 holds") || !strings.Contains(vs[1].Detail, "broker 2 authenticates") {
		t.Fatalf("disagreeing nodes: %v", vs)
	}
}
