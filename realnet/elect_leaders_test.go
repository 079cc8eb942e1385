package realnet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/broker"
	"strand/core/metadata"
)

// TestKadmElectLeaders: kadm's ElectLeaders against three real nodes. Node
// 2 is killed, so the partitions it prefers move to other leaders; once it
// is back in their ISR, a PREFERRED election over every partition (a null
// topic list) elects it again and names only those partitions. Asked for
// every partition by name, the answer is ELECTION_NOT_NEEDED throughout,
// and UNCLEAN on led partitions is ELECTION_NOT_NEEDED too.
func TestKadmElectLeaders(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic, partitions = "elect", 3
	c.createTopic(topic, partitions, 3)
	states := func() []metadata.PartitionState {
		out := make([]metadata.PartitionState, partitions)
		c.nodes[0].Call(func(b *broker.Node) {
			for p := range int32(partitions) {
				out[p], _ = b.Image().PartitionByName(topic, p)
			}
		})
		return out
	}
	var preferredBy2 []int32
	for p, s := range states() {
		if len(s.Replicas) != 3 {
			t.Fatalf("partition %d: replicas %v", p, s.Replicas)
		}
		if s.Replicas[0] == 2 {
			preferredBy2 = append(preferredBy2, int32(p))
		}
	}
	if len(preferredBy2) == 0 {
		t.Fatal("test premise: node 2 is the preferred replica of no partition")
	}

	c.nodes[1].Kill()
	c.waitFor("node 2's partitions led elsewhere", 20*time.Second, func() bool {
		for _, s := range states() {
			if s.Leader == 2 || s.Leader < 0 {
				return false
			}
		}
		return true
	})
	c.restart(2)
	c.waitFor("node 2 back in every ISR", 30*time.Second, func() bool {
		for _, s := range states() {
			if !slices.Contains(s.ISR, 2) {
				return false
			}
		}
		return true
	})
	for _, p := range preferredBy2 {
		if l := states()[p].Leader; l == 2 {
			t.Fatalf("partition %d led by node 2 again before the election", p)
		}
	}

	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	results, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	var elected []int32
	for p, r := range results[topic] {
		if r.Err != nil {
			t.Errorf("partition %d: %v %s", p, r.Err, r.ErrMessage)
		}
		elected = append(elected, p)
	}
	slices.Sort(elected)
	if len(results) != 1 || !slices.Equal(elected, preferredBy2) {
		t.Fatalf("preferred election over every partition answered %v, want only %s partitions %v", results, topic, preferredBy2)
	}
	for p, s := range states() {
		if s.Leader != s.Replicas[0] {
			t.Fatalf("partition %d after the election: leader %d, want preferred replica %d", p, s.Leader, s.Replicas[0])
		}
	}

	all := kadm.TopicsSet{}
	all.Add(topic, 0, 1, 2)
	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		results, err := adm.ElectLeaders(ctx, how, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(results[topic]) != partitions {
			t.Fatalf("election %d by name answered %v, want every partition", how, results)
		}
		for p, r := range results[topic] {
			if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Errorf("election %d, partition %d: %v, want ELECTION_NOT_NEEDED", how, p, r.Err)
			}
		}
	}
}
