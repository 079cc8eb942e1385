package cluster

import (
	"testing"

	"strand/core/group"
	"strand/models"
)

// TestOverBudgetExcusesOnlyLossesThere: over the budget only a loss, and
// only on a partition whose budget was exceeded, is excused; a read of a
// value nobody produced, a group or idempotence violation, and a loss on a
// partition within its budget stand: none of the register, final, group,
// idempotence and churn violations but a loss is excused.
func TestOverBudgetExcusesOnlyLossesThere(t *testing.T) {
	over := models.TopicPartition{Topic: "t0", Partition: 0}
	within := models.TopicPartition{Topic: "t0", Partition: 1}
	vs := []models.Violation{
		{Check: "acked-present", TP: over, Loss: true},
		{Check: "linearizability", TP: over, Detail: "offset 3: a fetch read \"x\", which nobody produced"},
		{Check: "acked-present", TP: within, Loss: true},
		{Check: "idempotence", TP: over},
		{Check: "group-assignment"},
		{Check: "offset-linearizability", TP: over, Group: "g0", Loss: true},
	}
	violations, excused := excuseOverBudget(vs, map[models.TopicPartition]bool{over: true})
	if len(excused) != 1 || excused[0] != vs[0] {
		t.Errorf("excused %v, want only the loss on the over-budget partition", excused)
	}
	if len(violations) != 5 {
		t.Errorf("violations %v, want the other five (the group's commits are its offsets partition's)", violations)
	}
	offsets := models.TopicPartition{Topic: offsetsTopic, Partition: group.PartitionFor("g0", offsetsTopicPartitions)}
	if _, excused := excuseOverBudget(vs[5:], map[models.TopicPartition]bool{offsets: true}); len(excused) != 1 {
		t.Errorf("commits lost on an over-budget offsets partition: excused %v, want it", excused)
	}
}

// TestSafetyCheckedAfterALivenessHalt: a run that halts (here no-fencing
// stalls a partition) still has its history checked, and both verdicts are
// reported: the halt, and what the safety checkers found in what clients
// were told before it, so a bug that stalls a run is caught by the
// safety checkers too, not by liveness alone.
func TestSafetyCheckedAfterALivenessHalt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs seeds until one halts")
	}
	for seed := uint64(1); seed <= 60; seed++ {
		res := Run(Options{Seed: seed, Shape: "mixed", Bug: "no-fencing", DiscardLogs: true})
		if res.Halt == "" || len(res.Violations) < 2 {
			continue
		}
		if res.Violations[0].Check != res.Halt {
			t.Fatalf("seed %d: halted by %s, first violation %v", seed, res.Halt, res.Violations[0])
		}
		t.Logf("seed %d: halted by %s; safety checks %v", seed, res.Halt, Checks(res.Violations[1:]))
		return
	}
	t.Fatal("no seed of 60 halted with safety violations found after the halt")
}
