package cluster

import (
	"strings"
	"testing"

	"strand/core/metadata"
	"strand/models"
	"strand/sim/workload"
)

// TestChurnRecordsCheckedPerIncarnation: acknowledged produces on a
// churned topic are attributed to the incarnation the broker answered them
// in, and checked as registers per incarnation: two acknowledged at offset
// 0 of one incarnation are a violation (an offset reused), one in each of
// two incarnations is not (each starts at 0), even when the earlier
// answer reaches its client only with the later one (matched by the
// latest answer before the return, both would be taken for the later
// incarnation's). The final incarnation keeps the topic's own name;
// a deleted one is named by its id.
func TestChurnRecordsCheckedPerIncarnation(t *testing.T) {
	tp := models.TopicPartition{Topic: "c0", Partition: 0}
	old, final := metadata.TopicID{1}, metadata.TopicID{2}
	produce := func(value string, callNs, returnNs int64) workload.ChurnProduce {
		return workload.ChurnProduce{Leader: 1, Produce: models.Produce{TP: tp, Acks: -1, Values: []string{value},
			CallNs: callNs, ReturnNs: returnNs, Acked: true, BaseOffset: 0}}
	}
	c := &Cluster{churnTopics: map[string]bool{"c0": true}, churnAcks: []churnAck{
		{node: 1, tp: tp, first: "a", baseOffset: 0, topicID: old, atNs: 100},
		{node: 1, tp: tp, first: "b", baseOffset: 0, topicID: final, atNs: 200},
		{node: 1, tp: tp, first: "c", baseOffset: 0, topicID: final, atNs: 300},
	}}
	finalIDs := map[string]metadata.TopicID{"c0": final}

	for _, late := range []bool{false, true} {
		aReturn := int64(105)
		if late {
			aReturn = 205 // answered at 100, delivered with b's answer
		}
		h, names := c.churnHistory([]workload.ChurnProduce{produce("a", 95, aReturn), produce("b", 195, 205)}, finalIDs)
		if len(h.Produces) != 2 || h.Produces[1].TP != tp || h.Produces[0].TP == tp || names[h.Produces[0].TP] != tp {
			t.Fatalf("attributed %+v, want a to the deleted incarnation and b to c0", h.Produces)
		}
		if vs, _ := models.CheckRegisters(h, models.RegisterOptions{}); len(vs) != 0 {
			t.Fatalf("one record at offset 0 of each incarnation: %v", vs)
		}
	}

	h, _ := c.churnHistory([]workload.ChurnProduce{produce("b", 195, 205), produce("c", 295, 305)}, finalIDs)
	vs, _ := models.CheckRegisters(h, models.RegisterOptions{})
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "different values") {
		t.Fatalf("two records acknowledged at offset 0 of one incarnation: %v, want a linearizability violation", vs)
	}
}

// TestDeletedIncarnationsRecordsHeldUntilDeletion: an acks=all record
// acknowledged in an incarnation deleted since must have been held at its
// offset by a replica until the deletion (what the brokers' deleted files
// held); one that was not is a loss.
func TestDeletedIncarnationsRecordsHeldUntilDeletion(t *testing.T) {
	tp := models.TopicPartition{Topic: "c0", Partition: 0}
	deleted := models.TopicPartition{Topic: "c0@01", Partition: 0}
	held := &models.HeldRecords{}
	held.Add(0, "a")
	r := &run{c: &Cluster{churnTopics: map[string]bool{"c0": true}, held: map[models.TopicPartition]*models.HeldRecords{tp: held}}}
	h := models.History{Produces: []models.Produce{
		{TP: deleted, Acks: -1, Acked: true, BaseOffset: 0, Values: []string{"a", "b"}, ReturnNs: 10},
	}}
	vs := r.checkChurnDeleted(h, map[models.TopicPartition]models.TopicPartition{deleted: tp})
	if len(vs) != 1 || !vs[0].Loss || !strings.Contains(vs[0].Detail, "record b acknowledged at offset 1") {
		t.Fatalf("violations %v, want one loss: b at offset 1, which no replica held", vs)
	}
}
