package metadata

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"strand/core/acl"
)

// allFields lets go-cmp look inside the Image's unexported fields.
var allFields = cmp.Exporter(func(reflect.Type) bool { return true })

// applier applies records at consecutive offsets and fails the test on error.
type applier struct {
	t  *testing.T
	im *Image
}

func (a applier) ok(records ...Record) {
	a.t.Helper()
	for _, r := range records {
		if err := a.im.Apply(a.im.Offset()+1, r); err != nil {
			a.t.Fatalf("apply %T: %v", r, err)
		}
	}
}

// rejected checks that rec is refused with an error mentioning want and
// leaves the image exactly as it was.
func (a applier) rejected(rec Record, want string) {
	a.t.Helper()
	before := a.im.Clone()
	err := a.im.Apply(a.im.Offset()+1, rec)
	if err == nil || !strings.Contains(err.Error(), want) {
		a.t.Fatalf("apply %T: error %v, want one mentioning %q", rec, err, want)
	}
	if diff := cmp.Diff(before, a.im, allFields); diff != "" {
		a.t.Fatalf("rejected %T changed the image:\n%s", rec, diff)
	}
}

var topicA = TopicID{0xa}

func threeBrokersOneTopic(t *testing.T) applier {
	a := applier{t: t, im: NewImage()}
	for id := int32(0); id < 3; id++ {
		a.ok(&RegisterBrokerRecord{BrokerID: id, BrokerEpoch: a.im.Offset() + 1,
			Endpoints: []Endpoint{{Listener: "BROKER", Host: "h", Port: uint16(9092 + id)}}})
	}
	a.ok(&TopicRecord{Name: "a", ID: topicA},
		&PartitionRecord{TopicID: topicA, PartitionID: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}, Leader: 0},
		&PartitionRecord{TopicID: topicA, PartitionID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	return a
}

func TestApplyBuildsTheImage(t *testing.T) {
	a := threeBrokersOneTopic(t)
	im := a.im
	if got := im.BrokerIDs(); !cmp.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("BrokerIDs %v", got)
	}
	if e, ok := im.BrokerEndpoint(2, "BROKER"); !ok || e.Port != 9094 {
		t.Fatalf("BrokerEndpoint(2) = %v, %v", e, ok)
	}
	if _, ok := im.BrokerEndpoint(2, "CONTROLLER"); ok {
		t.Fatal("found an endpoint for a listener never registered")
	}
	if tp, ok := im.TopicByName("a"); !ok || tp.ID != topicA || tp.Partitions != 2 {
		t.Fatalf("TopicByName(a) = %+v, %v", tp, ok)
	}
	if got := im.PartitionsOf(0); len(got) != 1 || got[0].Partition != 0 {
		t.Fatalf("PartitionsOf(0) = %v", got)
	}
	if got := im.PartitionsOf(2); len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 1 {
		t.Fatalf("PartitionsOf(2) = %v", got)
	}
	a.ok(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: 1, ISR: Change([]int32{2, 1})})
	s, _ := im.Partition(topicA, 0)
	want := PartitionState{Replicas: []int32{0, 1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Fatalf("after a leader change (-want +got):\n%s", diff)
	}
	// An ISR-only change bumps the partition epoch, not the leader epoch.
	a.ok(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: NoLeaderChange, ISR: Change([]int32{0, 1, 2})})
	if leader, epoch, _ := im.Leader("a", 0); leader != 1 || epoch != 1 {
		t.Fatalf("Leader = %d epoch %d, want 1 epoch 1", leader, epoch)
	}
	if s, _ := im.Partition(topicA, 0); s.PartitionEpoch != 2 {
		t.Fatalf("partition epoch %d, want 2", s.PartitionEpoch)
	}
	v := "2"
	a.ok(&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "a", Name: "min.insync.replicas", Value: &v})
	if got, _ := im.Config(ConfigResource{ConfigResourceTopic, "a"}, "min.insync.replicas"); got != "2" {
		t.Fatalf("config %q", got)
	}
	a.ok(&RemoveTopicRecord{TopicID: topicA})
	if _, ok := im.TopicByName("a"); ok {
		t.Fatal("topic survived RemoveTopicRecord")
	}
	if len(im.ConfigResources()) != 0 {
		t.Fatal("topic configs survived RemoveTopicRecord")
	}
}

func TestApplyRejectsRecordsThatDoNotFit(t *testing.T) {
	a := threeBrokersOneTopic(t)
	a.rejected(&TopicRecord{Name: "a", ID: TopicID{0xb}}, "topic exists")
	a.rejected(&TopicRecord{Name: "b", ID: topicA}, "topic id in use")
	a.rejected(&TopicRecord{Name: "b/c", ID: TopicID{0xb}}, "only ASCII")
	a.rejected(&PartitionRecord{TopicID: TopicID{0xb}, Replicas: []int32{0}}, "no such topic")
	a.rejected(&PartitionRecord{TopicID: topicA, PartitionID: 5, Replicas: []int32{0}}, "the next partition is 2")
	a.rejected(&PartitionRecord{TopicID: topicA, PartitionID: 2, Replicas: []int32{0, 0}}, "repeats")
	a.rejected(&PartitionRecord{TopicID: topicA, PartitionID: 2, Replicas: []int32{0, 1}, ISR: []int32{1}, Leader: 0}, "not in ISR")
	a.rejected(&PartitionRecord{TopicID: topicA, PartitionID: 2, Replicas: []int32{0, 1}, ISR: []int32{1, 2}, Leader: 1}, "not in Replicas")
	a.rejected(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: NoLeaderChange, ISR: Change([]int32{1, 2})}, "Leader 0 is not in ISR")
	a.rejected(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: NoLeaderChange, ELR: Change([]int32{1})}, "both ISR")
	a.rejected(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: -3}, "must be a broker id")
	a.rejected(&PartitionChangeRecord{TopicID: topicA, PartitionID: 2, Leader: NoLeaderChange}, "has 2 partitions")
	a.rejected(&RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 0}, "not above its current epoch")
	a.rejected(&BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 7, Fenced: FenceFence}, "registered with epoch 1")
	a.rejected(&BrokerRegistrationChangeRecord{BrokerID: 9, Fenced: FenceFence}, "not registered")
	a.rejected(&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "zz", Name: "k"}, "no such topic")
	a.rejected(&ProducerIdsRecord{BrokerID: 0, BrokerEpoch: 0, NextProducerID: 0}, "not above")
	before := a.im.Clone()
	if err := a.im.Apply(a.im.Offset(), &NoOpRecord{}); err == nil {
		t.Fatal("applying at an offset already applied succeeded")
	}
	if diff := cmp.Diff(before, a.im, allFields); diff != "" {
		t.Fatalf("rejected offset changed the image:\n%s", diff)
	}
}

func TestAccessorsReturnSnapshots(t *testing.T) {
	a := threeBrokersOneTopic(t)
	before, _ := a.im.Partition(topicA, 0)
	isr := before.ISR
	a.ok(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: NoLeaderChange, ISR: Change([]int32{0})})
	if !cmp.Equal(isr, []int32{0, 1, 2}) {
		t.Fatalf("Apply modified a slice handed out earlier: %v", isr)
	}
	clone := a.im.Clone()
	a.ok(&PartitionChangeRecord{TopicID: topicA, PartitionID: 0, Leader: 0})
	if s, _ := clone.Partition(topicA, 0); s.LeaderEpoch != 0 {
		t.Fatalf("applying to the image changed its clone: leader epoch %d", s.LeaderEpoch)
	}
}

// TestApplyKeepsInvariants applies random records, most of which do not
// fit, to an image: Apply never panics, a rejected record changes nothing,
// and after every accepted one every partition is valid and no epoch went
// back.
func TestApplyKeepsInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		im := NewImage()
		ids := []TopicID{{1}, {2}}
		epochs := map[[2]int64][2]int32{}
		for range rapid.IntRange(1, 100).Draw(t, "records") {
			rec := genSmallRecord(t, ids)
			before := im.Clone()
			if err := im.Apply(im.Offset()+1, rec); err != nil {
				if diff := cmp.Diff(before, im, allFields); diff != "" {
					t.Fatalf("rejected %T (%v) changed the image:\n%s", rec, err, diff)
				}
				continue
			}
			im.EachPartition(func(tp TopicPartition, s PartitionState) {
				if err := s.Validate(); err != nil {
					t.Fatalf("after %T: %s-%d: %v", rec, tp.Topic, tp.Partition, err)
				}
				key := [2]int64{int64(tp.TopicID[0]), int64(tp.Partition)}
				if prev, ok := epochs[key]; ok && (s.LeaderEpoch < prev[0] || s.PartitionEpoch < prev[1]) {
					t.Fatalf("after %T: %s-%d epochs went back from %v to (%d, %d)", rec, tp.Topic, tp.Partition, prev, s.LeaderEpoch, s.PartitionEpoch)
				}
				epochs[key] = [2]int32{s.LeaderEpoch, s.PartitionEpoch}
			})
			if _, ok := rec.(*RemoveTopicRecord); ok {
				// A recreated topic starts its epochs again.
				for key := range epochs { // order-independent: deleting entries
					if _, exists := im.TopicByID(TopicID{byte(key[0])}); !exists {
						delete(epochs, key)
					}
				}
			}
		}
	})
}

// genSmallRecord draws records over a few brokers, topics and partitions,
// so that many of them fit the image.
func genSmallRecord(t *rapid.T, ids []TopicID) Record {
	smallIDs := func(label string) []int32 {
		out := rapid.SliceOfNDistinct(rapid.Int32Range(0, 3), 0, 3, rapid.ID[int32]).Draw(t, label)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	change := func(label string) IDsChange {
		if !rapid.Bool().Draw(t, label+".changed") {
			return IDsChange{}
		}
		return Change(smallIDs(label))
	}
	id := rapid.SampledFrom(ids).Draw(t, "topic")
	switch rapid.IntRange(0, 8).Draw(t, "kind") {
	case 6, 7:
		return genSmallScramRecord(t)
	case 0:
		return &TopicRecord{Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), ID: id}
	case 1:
		// Mostly valid: the ISR a subset of the replicas, led by a member.
		replicas := []int32{0, 1, 2, 3}[:rapid.IntRange(1, 4).Draw(t, "rf")]
		var isr []int32
		for _, r := range replicas {
			if rapid.Bool().Draw(t, "inISR") {
				isr = append(isr, r)
			}
		}
		leader := NoLeader
		if len(isr) > 0 && rapid.IntRange(0, 3).Draw(t, "leaderless") > 0 {
			leader = rapid.SampledFrom(isr).Draw(t, "leader")
		}
		return &PartitionRecord{TopicID: id, PartitionID: rapid.Int32Range(0, 2).Draw(t, "p"), Replicas: replicas,
			ISR: isr, Leader: leader}
	case 2, 3:
		leader := NoLeaderChange
		if rapid.Bool().Draw(t, "newLeader") {
			leader = rapid.Int32Range(-3, 3).Draw(t, "leader")
		}
		return &PartitionChangeRecord{TopicID: id, PartitionID: rapid.Int32Range(0, 2).Draw(t, "p"),
			Leader: leader, ISR: change("isr"), ELR: change("elr"), LastKnownELR: change("lkelr")}
	case 4:
		return &RemoveTopicRecord{TopicID: id}
	case 5:
		// A few ids and bindings, so that adds collide and removals hit.
		b := acl.Binding{
			Pattern: acl.Pattern{Type: acl.Topic, Name: rapid.SampledFrom([]string{"a", "b", ""}).Draw(t, "aclName"),
				PatternType: rapid.SampledFrom([]acl.PatternType{acl.Literal, acl.Prefixed}).Draw(t, "aclPattern")},
			Entry: acl.Entry{Principal: "User:alice", Host: "*", Operation: acl.Read,
				Permission: rapid.SampledFrom([]acl.Permission{acl.Allow, acl.Deny}).Draw(t, "aclPermission")},
		}
		aclID := acl.ID{rapid.ByteRange(0, 3).Draw(t, "aclID")}
		if rapid.Bool().Draw(t, "aclRemove") {
			return &RemoveAccessControlEntryRecord{ID: aclID}
		}
		return NewAccessControlEntryRecord(aclID, b)
	}
	return &RegisterBrokerRecord{BrokerID: rapid.Int32Range(-1, 3).Draw(t, "broker"), BrokerEpoch: rapid.Int64Range(0, 200).Draw(t, "epoch")}
}

func TestApplyBatchSkipsRecordsAlreadyApplied(t *testing.T) {
	im := NewImage()
	b := Batch{BaseOffset: 0, NextOffset: 3, Records: []Record{
		&RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 0},
		&TopicRecord{Name: "a", ID: TopicID{1}},
		&PartitionRecord{TopicID: TopicID{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	}}
	if err := im.Apply(0, b.Records[0]); err != nil {
		t.Fatal(err)
	}
	if err := im.ApplyBatch(b); err != nil {
		t.Fatalf("applying a batch that starts before the image's offset: %v", err)
	}
	if im.Offset() != 2 {
		t.Fatalf("offset %d, want 2", im.Offset())
	}
	if leader, _, ok := im.Leader("a", 0); !ok || leader != 1 {
		t.Fatalf("Leader(a, 0) = %d, %v", leader, ok)
	}
}

func TestAccessControlEntries(t *testing.T) {
	im := NewImage()
	readOrders := acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: "orders", PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow},
	}
	writeOrders := readOrders
	writeOrders.Operation = acl.Write
	if err := im.Apply(0, NewAccessControlEntryRecord(acl.ID{1}, readOrders)); err != nil {
		t.Fatal(err)
	}
	if err := im.Apply(1, NewAccessControlEntryRecord(acl.ID{2}, writeOrders)); err != nil {
		t.Fatal(err)
	}
	bad := writeOrders
	bad.Operation = acl.AnyOperation
	for name, rec := range map[string]Record{
		"reused id":         NewAccessControlEntryRecord(acl.ID{1}, bad),
		"zero id":           NewAccessControlEntryRecord(acl.ID{}, writeOrders),
		"duplicate binding": NewAccessControlEntryRecord(acl.ID{3}, readOrders),
		"invalid binding":   NewAccessControlEntryRecord(acl.ID{3}, bad),
		"unknown removal":   &RemoveAccessControlEntryRecord{ID: acl.ID{9}},
	} {
		before := im.Clone()
		if err := im.Apply(im.Offset()+1, rec); err == nil {
			t.Errorf("%s: applied", name)
		}
		if diff := cmp.Diff(before, im, allFields); diff != "" {
			t.Errorf("%s: a refused record changed the image:\n%s", name, diff)
		}
	}
	if err := im.Apply(2, &RemoveAccessControlEntryRecord{ID: acl.ID{1}}); err != nil {
		t.Fatal(err)
	}
	got := im.ACLs()
	if len(got) != 1 || got[0].ID != (acl.ID{2}) || got[0].Binding != writeOrders {
		t.Fatalf("ACLs after the removal: %v, want only %v", got, writeOrders)
	}
	if err := im.Apply(3, NewAccessControlEntryRecord(acl.ID{1}, readOrders)); err != nil {
		t.Fatalf("a removed ACL could not be added again: %v", err)
	}
	if id, ok := im.ACLID(readOrders); !ok || id != (acl.ID{1}) {
		t.Fatalf("ACLID(read) = %x, %v", id, ok)
	}
	snap, err := DecodeSnapshot(im.EncodeSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(im.ACLs(), snap.ACLs()); diff != "" {
		t.Fatalf("the snapshot lost ACLs:\n%s", diff)
	}
}
