package workload

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

func joinMember(id string, topics ...string) kmsg.JoinGroupResponseMember {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.ProtocolMetadata = id, meta.AppendTo(nil)
	return m
}

func partitions(topic string, n int32) []models.TopicPartition {
	var out []models.TopicPartition
	for p := int32(0); p < n; p++ {
		out = append(out, models.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func TestAssignPartitionsRange(t *testing.T) {
	tps := append(partitions("a", 5), partitions("b", 2)...)
	members := []kmsg.JoinGroupResponseMember{joinMember("m2", "a", "b"), joinMember("m1", "a", "b"), joinMember("m3", "a")}
	got := assignPartitions(assignorRange, members, tps)
	tp := func(topic string, p int32) models.TopicPartition {
		return models.TopicPartition{Topic: topic, Partition: p}
	}
	want := map[string][]models.TopicPartition{
		// a: 5 partitions over m1, m2, m3 (sorted): 2, 2, 1; b over m1, m2.
		"m1": {tp("a", 0), tp("a", 1), tp("b", 0)},
		"m2": {tp("a", 2), tp("a", 3), tp("b", 1)},
		"m3": {tp("a", 4)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("range assignment (-want +got):\n%s", diff)
	}
}

func TestAssignPartitionsRoundRobinGivesEachPartitionOnce(t *testing.T) {
	tps := append(partitions("a", 3), partitions("b", 4)...)
	for n := 1; n <= 5; n++ {
		var members []kmsg.JoinGroupResponseMember
		for i := 0; i < n; i++ {
			members = append(members, joinMember(fmt.Sprintf("m%d", i), "a", "b"))
		}
		got := assignPartitions(assignorRoundRobin, members, tps)
		seen := map[models.TopicPartition]string{}
		for id, list := range got {
			if len(list) < len(tps)/n || len(list) > (len(tps)+n-1)/n {
				t.Errorf("%d members: %s got %d partitions of %d", n, id, len(list), len(tps))
			}
			for _, tp := range list {
				if other, dup := seen[tp]; dup {
					t.Errorf("%d members: %s given to %s and %s", n, tp, other, id)
				}
				seen[tp] = id
			}
		}
		if len(seen) != len(tps) {
			t.Errorf("%d members: %d of %d partitions assigned", n, len(seen), len(tps))
		}
	}
}

func TestAssignmentEncodingRoundTrips(t *testing.T) {
	tps := append(partitions("a", 2), partitions("b", 3)...)
	got, err := decodeAssignment(encodeAssignment(tps))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tps, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if got, err := decodeAssignment(nil); err != nil || got != nil {
		t.Fatalf("an empty assignment: %v, %v", got, err)
	}
}

func TestCommitOutcome(t *testing.T) {
	for code, want := range map[int16]models.CommitOutcome{
		0:  models.CommitAccepted,
		22: models.CommitRejected, // ILLEGAL_GENERATION
		25: models.CommitRejected, // UNKNOWN_MEMBER_ID
		27: models.CommitRejected, // REBALANCE_IN_PROGRESS
		15: models.CommitUnknown,  // COORDINATOR_NOT_AVAILABLE: may follow an append
		16: models.CommitUnknown,  // NOT_COORDINATOR: may follow an append
		7:  models.CommitUnknown,  // REQUEST_TIMED_OUT
	} {
		if got := commitOutcome(code); got != want {
			t.Errorf("code %d: %v, want %v", code, got, want)
		}
	}
}
