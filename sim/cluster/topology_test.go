package cluster

import (
	"reflect"
	"testing"

	"strand/models"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/workload"
)

// TestTopologyDrawsEverySizeAndReplication: the shape topology draws 1, 3
// and 5 brokers, each topic a replication factor of 1, 2, 3 or 5 no larger
// than the brokers and a min.insync.replicas from 1 to it, every
// combination within 300 seeds; the other shapes are not drawn at all, so
// their seeds run as before.
func TestTopologyDrawsEverySizeAndReplication(t *testing.T) {
	brokers := map[int]bool{}
	combos := map[[2]int]bool{}
	for seed := uint64(1); seed <= 300; seed++ {
		s, err := ShapeFor("topology", seed)
		if err != nil {
			t.Fatal(err)
		}
		brokers[s.Brokers] = true
		if len(s.TopicReplication) != s.Topics {
			t.Fatalf("seed %d: %d topics replicated, want %d", seed, len(s.TopicReplication), s.Topics)
		}
		for _, tr := range s.TopicReplication {
			rf, minISR := int(tr.ReplicationFactor), tr.MinInsyncReplicas
			if rf > s.Brokers || minISR < 1 || minISR > rf {
				t.Fatalf("seed %d: %d brokers, a topic with RF %d and min.insync.replicas %d", seed, s.Brokers, rf, minISR)
			}
			combos[[2]int{rf, minISR}] = true
		}
		for _, name := range ShapeNames() {
			if name == "topology" {
				continue
			}
			if got, _ := ShapeFor(name, seed); !reflect.DeepEqual(got, Shapes[name]) {
				t.Fatalf("seed %d: shape %s drawn as %+v", seed, name, got)
			}
		}
	}
	if len(brokers) != 3 {
		t.Errorf("cluster sizes drawn: %v, want 1, 3 and 5", brokers)
	}
	for _, rf := range []int{1, 2, 3, 5} {
		for minISR := 1; minISR <= rf; minISR++ {
			if !combos[[2]int{rf, minISR}] {
				t.Errorf("RF %d with min.insync.replicas %d never drawn", rf, minISR)
			}
		}
	}
}

// TestBudgetIsEachPartitionsOwn: the fault budget of a partition is its
// own topic's min.insync.replicas − 1 unrecovered replicas, the
// min.insync.replicas capped at its replication factor as Kafka caps it.
// On three brokers, a topic with min.insync.replicas 3 lets two of its
// replicas lose unsynced data and refuses the third; one with 1 refuses
// the first. On two, min.insync.replicas 3 acts as 2: one. Without the
// cap a churned topic of one replica under the brokers' default of 2 had a
// budget that allowed its only replica a power loss, and the records it
// acknowledged alone were lost unexcused.
func TestBudgetIsEachPartitionsOwn(t *testing.T) {
	shape := Shapes["small"]
	shape.Topics = 2
	shape.TopicReplication = []workload.TopicReplication{
		{ReplicationFactor: 3, MinInsyncReplicas: 3}, {ReplicationFactor: 3, MinInsyncReplicas: 1}}
	for _, tc := range []struct {
		topic             string
		brokers, admitted int
	}{{"t0", 3, 2}, {"t1", 3, 0}, {"t0", 2, 1}} {
		s := sched.New(sched.Options{})
		c := &Cluster{S: s, shape: shape}
		for id := int32(1); id <= int32(tc.brokers); id++ {
			c.Nodes = append(c.Nodes, &Node{ID: id, Proc: s.NewNode(id), Disk: memdisk.New(memdisk.Options{})})
		}
		c.members = c.Nodes
		tp := models.TopicPartition{Topic: tc.topic, Partition: 0}
		f := &faults{c: c, budgeted: []models.TopicPartition{tp}, budgetExceeded: map[models.TopicPartition]bool{},
			acked: func() []models.Produce {
				// Acknowledged up to offset 1: no replica's empty log holds
				// it, so none recovers during the test.
				return []models.Produce{{TP: tp, Acks: -1, Acked: true, Values: []string{"v"}}}
			}}
		admitted := 0
		for _, n := range c.Nodes {
			if f.admitLoss(n, "fault.crash_refused") {
				admitted++
			}
		}
		if admitted != tc.admitted {
			t.Errorf("%s (min.insync.replicas %d) on %d brokers: %d crashes admitted within budget, want %d",
				tc.topic, shape.minInsync(tc.topic), tc.brokers, admitted, tc.admitted)
		}
	}
}

// TestBrokersJoinAndLeave: in the shape topology brokers join (and are
// given replicas of topics created after) and are removed for good (fenced,
// leading nothing, the runs converging without them: the topology check),
// and the runs pass.
func TestBrokersJoinAndLeave(t *testing.T) {
	hits := map[string]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		res := Run(Options{Seed: seed, Shape: "topology", DiscardLogs: true})
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations)
		}
		for _, h := range res.Hits {
			hits[h]++
		}
	}
	for _, want := range []string{"broker_joined", "joined_broker_replicas", "broker_removed"} {
		if hits[want] == 0 {
			t.Errorf("no seed of 20 hit %s: %v", want, hits)
		}
	}
}
