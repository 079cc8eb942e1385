package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// subscriptionMetadata encodes a ConsumerProtocol subscription (v1) as kgo's
// cooperative-sticky balancer sends it: topics, user data, owned
// partitions.
func subscriptionMetadata(topics []string, userData string, owned map[string][]int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = topics
	m.UserData = []byte(userData)
	for topic, partitions := range owned { // order-independent: tests pass one topic
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = topic, partitions
		m.OwnedPartitions = append(m.OwnedPartitions, o)
	}
	return m.AppendTo(nil)
}

// TestStaticConsumerRestartKeepsGeneration: a restarted static consumer
// (found with the real-process interop test, realnet
// TestKgoConsumerGroupStaticMemberRestart) rejoins with no owned partitions
// and fresh user data, but the same topics: that must not rebalance, or
// KIP-345 buys nothing with kgo's (and Java's) cooperative-sticky
// assignor. The same rejoin with another topic list must rebalance.
func TestStaticConsumerRestartKeepsGeneration(t *testing.T) {
	h := newHarness(t, testConfig())
	running := subscriptionMetadata([]string{"b", "a"}, "gen-1", map[string][]int32{"a": {0, 1}})
	restarted := subscriptionMetadata([]string{"a", "b"}, "", nil)
	resubscribed := subscriptionMetadata([]string{"a", "c"}, "", nil)
	protocols := func(metadata []byte) []kmsg.JoinGroupRequestProtocol {
		return []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", string(metadata))}
	}

	joinA := h.join("g", joinOpts{instanceID: "i1", protocols: protocols(running)})
	_, joinB := h.joinNew("g", joinOpts{protocols: protocols(running)})
	h.clock.advance(0)
	ra, rb := joinResp(t, joinA), joinResp(t, joinB)
	a, b := ra.MemberID, rb.MemberID
	h.sync("g", b, 1, nil)
	h.sync("g", a, 1, map[string]string{a: "pa", b: "pb"})
	h.store.commitAll()

	rejoin := h.join("g", joinOpts{instanceID: "i1", protocols: protocols(restarted)})
	h.store.commitAll()
	rr := joinResp(t, rejoin)
	if rr.ErrorCode != 0 || rr.Generation != 1 {
		t.Fatalf("static restart with the same topics: error %d generation %d, want generation 1", rr.ErrorCode, rr.Generation)
	}
	if code := h.heartbeat("g", b, 1); code != 0 {
		t.Fatalf("other member's heartbeat after the static restart: %d, want none (no rebalance)", code)
	}
	if s := syncResp(t, h.sync("g", rr.MemberID, 1, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "pa" {
		t.Errorf("restarted static member's sync: error %d assignment %q, want its old assignment pa", s.ErrorCode, s.MemberAssignment)
	}

	h.join("g", joinOpts{instanceID: "i1", protocols: protocols(resubscribed)})
	if code := h.heartbeat("g", b, 1); code != kerr.RebalanceInProgress.Code {
		t.Errorf("heartbeat after a static restart with other topics: %d, want REBALANCE_IN_PROGRESS", code)
	}
}

func TestSameSubscription(t *testing.T) {
	base := subscriptionMetadata([]string{"a", "b"}, "x", map[string][]int32{"a": {0}})
	rack := kmsg.NewConsumerMemberMetadata()
	rack.Version, rack.Topics, rack.Rack = 3, []string{"a", "b"}, kmsg.StringPtr("r1")
	for _, c := range []struct {
		name         string
		protocolType string
		a, b         []byte
		want         bool
	}{
		{"owned partitions and user data ignored", "consumer", base, subscriptionMetadata([]string{"b", "a"}, "", nil), true},
		{"another topic", "consumer", base, subscriptionMetadata([]string{"a"}, "x", nil), false},
		{"another rack", "consumer", base, rack.AppendTo(nil), false},
		{"unparsable consumer metadata compares bytes", "consumer", []byte("m"), []byte("m"), true},
		{"unparsable and different", "consumer", []byte("m"), []byte("other"), false},
		{"other protocol types compare bytes", "connect", base, subscriptionMetadata([]string{"b", "a"}, "", nil), false},
	} {
		if got := sameSubscription(c.protocolType, c.a, c.b); got != c.want {
			t.Errorf("%s: sameSubscription = %v, want %v", c.name, got, c.want)
		}
	}
}
