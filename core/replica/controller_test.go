package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHandleAlterPartition(t *testing.T) {
	cur := state(1, 5, 9, []int32{1, 2, 3}, []int32{1, 2})
	healthy := func(id int32) BrokerStatus { return BrokerStatus{Registered: true, Epoch: int64(100 + id)} }
	req := func(edit func(*AlterPartitionRequest)) AlterPartitionRequest {
		r := AlterPartitionRequest{ProposalID: 4, LeaderID: 1, LeaderEpoch: 5, PartitionEpoch: 9, NewISR: []int32{1, 2, 3}, BrokerEpochs: []int64{101, 102, 103}}
		edit(&r)
		return r
	}
	cases := []struct {
		name   string
		req    AlterPartitionRequest
		broker func(int32) BrokerStatus
		want   int16
	}{
		{"valid", req(func(*AlterPartitionRequest) {}), healthy, codeNone},
		{"ahead of the controller", req(func(r *AlterPartitionRequest) { r.PartitionEpoch = 10 }), healthy, codeNotController},
		{"old leader epoch", req(func(r *AlterPartitionRequest) { r.LeaderEpoch = 4 }), healthy, codeFencedLeaderEpoch},
		{"not the leader", req(func(r *AlterPartitionRequest) { r.LeaderID = 2 }), healthy, codeInvalidRequest},
		{"old partition epoch", req(func(r *AlterPartitionRequest) { r.PartitionEpoch = 8 }), healthy, codeInvalidUpdateVersion},
		{"ISR outside replicas", req(func(r *AlterPartitionRequest) { r.NewISR = []int32{1, 4}; r.BrokerEpochs = nil }), healthy, codeInvalidRequest},
		{"ISR without leader", req(func(r *AlterPartitionRequest) { r.NewISR = []int32{2, 3}; r.BrokerEpochs = nil }), healthy, codeInvalidRequest},
		{"epochs misaligned", req(func(r *AlterPartitionRequest) { r.BrokerEpochs = []int64{101} }), healthy, codeInvalidRequest},
		{"stale broker epoch", req(func(r *AlterPartitionRequest) { r.BrokerEpochs[2] = 99 }), healthy, codeIneligibleReplica},
		{"unknown broker epoch skips the check", req(func(r *AlterPartitionRequest) { r.BrokerEpochs[2] = -1 }), healthy, codeNone},
		{"fenced member", req(func(*AlterPartitionRequest) {}), func(id int32) BrokerStatus {
			s := healthy(id)
			s.Fenced = id == 3
			return s
		}, codeIneligibleReplica},
	}
	for _, c := range cases {
		next, resp := HandleAlterPartition(cur, c.req, elrOn, c.broker)
		if resp.Error != c.want || resp.ProposalID != 4 {
			t.Errorf("%s: response %+v, want error %d", c.name, resp, c.want)
			continue
		}
		if c.want != codeNone {
			if !cmp.Equal(next, cur) {
				t.Errorf("%s: a refused request changed the state to %+v", c.name, next)
			}
			continue
		}
		if !cmp.Equal(next.ISR, []int32{1, 2, 3}) || next.PartitionEpoch != 10 || resp.PartitionEpoch != 10 || !cmp.Equal(resp.ISR, next.ISR) {
			t.Errorf("%s: state %+v response %+v, want ISR [1 2 3] at partition epoch 10", c.name, next, resp)
		}
	}
	same, resp := HandleAlterPartition(cur, req(func(r *AlterPartitionRequest) { r.NewISR, r.BrokerEpochs = []int32{2, 1}, nil }), elrOn, healthy)
	if resp.Error != codeNone || same.PartitionEpoch != 9 || resp.PartitionEpoch != 9 {
		t.Errorf("unchanged ISR: %+v at partition epoch %d, want success without a new epoch", resp, same.PartitionEpoch)
	}
}
