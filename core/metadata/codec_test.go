package metadata

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func genIDs(t *rapid.T, label string) []int32 {
	ids := rapid.SliceOfN(rapid.Int32Range(-1, 20), 0, 5).Draw(t, label)
	if len(ids) == 0 {
		return nil // the canonical decoding of an empty list
	}
	return ids
}

func genChange(t *rapid.T, label string) IDsChange {
	if !rapid.Bool().Draw(t, label+".changed") {
		return IDsChange{}
	}
	return Change(genIDs(t, label))
}

func genString(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-zA-Z0-9._-]{0,12}`).Draw(t, label)
}

func genRecord(t *rapid.T) Record {
	switch rapid.IntRange(0, 13).Draw(t, "type") {
	case 0:
		r := &RegisterBrokerRecord{
			BrokerID: rapid.Int32().Draw(t, "id"), BrokerEpoch: rapid.Int64().Draw(t, "epoch"),
			Fenced: rapid.Bool().Draw(t, "fenced"), InControlledShutdown: rapid.Bool().Draw(t, "ics"),
		}
		copy(r.IncarnationID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "incarnation"))
		for i := range rapid.IntRange(0, 3).Draw(t, "endpoints") {
			r.Endpoints = append(r.Endpoints, Endpoint{
				Listener: genString(t, "listener"), Host: genString(t, "host"),
				Port: rapid.Uint16().Draw(t, "port"), SecurityProtocol: int16(i),
			})
		}
		return r
	case 1:
		return &UnregisterBrokerRecord{BrokerID: rapid.Int32().Draw(t, "id"), BrokerEpoch: rapid.Int64().Draw(t, "epoch")}
	case 2:
		return &BrokerRegistrationChangeRecord{
			BrokerID: rapid.Int32().Draw(t, "id"), BrokerEpoch: rapid.Int64().Draw(t, "epoch"),
			Fenced:               FenceChange(rapid.Int8Range(-1, 1).Draw(t, "fenced")),
			InControlledShutdown: rapid.Bool().Draw(t, "ics"),
		}
	case 3:
		return &TopicRecord{Name: genString(t, "name"), ID: genTopicID(t)}
	case 4:
		return &PartitionRecord{
			TopicID: genTopicID(t), PartitionID: rapid.Int32().Draw(t, "p"),
			Replicas: genIDs(t, "replicas"), ISR: genIDs(t, "isr"), ELR: genIDs(t, "elr"), LastKnownELR: genIDs(t, "lkelr"),
			Leader: rapid.Int32().Draw(t, "leader"), LeaderEpoch: rapid.Int32().Draw(t, "le"), PartitionEpoch: rapid.Int32().Draw(t, "pe"),
		}
	case 5:
		return &PartitionChangeRecord{
			TopicID: genTopicID(t), PartitionID: rapid.Int32().Draw(t, "p"), Leader: rapid.Int32().Draw(t, "leader"),
			ISR: genChange(t, "isr"), ELR: genChange(t, "elr"), LastKnownELR: genChange(t, "lkelr"),
		}
	case 6:
		return &RemoveTopicRecord{TopicID: genTopicID(t)}
	case 7:
		r := &ConfigRecord{ResourceType: ConfigResourceType(rapid.Int8().Draw(t, "rt")),
			ResourceName: genString(t, "rn"), Name: genString(t, "key")}
		if rapid.Bool().Draw(t, "set") {
			v := genString(t, "value")
			r.Value = &v
		}
		return r
	case 8:
		return &ProducerIdsRecord{BrokerID: rapid.Int32().Draw(t, "id"), BrokerEpoch: rapid.Int64().Draw(t, "epoch"),
			NextProducerID: rapid.Int64().Draw(t, "next")}
	case 10:
		return genScramRecord(t)
	case 11:
		return &RemoveUserScramCredentialRecord{Name: genString(t, "name"), Mechanism: ScramMechanism(rapid.Int8().Draw(t, "mech"))}
	case 12:
		r := &AccessControlEntryRecord{
			ResourceType: rapid.Int8().Draw(t, "rt"), ResourceName: genString(t, "rn"),
			PatternType: rapid.Int8().Draw(t, "pt"), Principal: genString(t, "principal"), Host: genString(t, "host"),
			Operation: rapid.Int8().Draw(t, "op"), Permission: rapid.Int8().Draw(t, "perm"),
		}
		copy(r.ID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "aclID"))
		return r
	case 13:
		r := &RemoveAccessControlEntryRecord{}
		copy(r.ID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "aclID"))
		return r
	}
	return &NoOpRecord{}
}

func genTopicID(t *rapid.T) TopicID {
	var id TopicID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "topicID"))
	return id
}

func TestRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := genRecord(t)
		value := EncodeRecord(rec)
		got, err := DecodeRecord(value)
		if err != nil {
			t.Fatalf("decode %T: %v", rec, err)
		}
		if diff := cmp.Diff(rec, got); diff != "" {
			t.Fatalf("round trip changed the record (-want +got):\n%s", diff)
		}
		// Every strict prefix is rejected, never decoded as something else.
		cut := rapid.IntRange(0, len(value)-1).Draw(t, "cut")
		if _, err := DecodeRecord(value[:cut]); err == nil {
			t.Fatalf("decoding the first %d of %d bytes of %T succeeded", cut, len(value), rec)
		}
		if _, err := DecodeRecord(append(value, 0)); err == nil {
			t.Fatalf("decoding %T with a trailing byte succeeded", rec)
		}
	})
}

func TestBatchRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var all []byte
		var want [][]Record
		for range rapid.IntRange(1, 3).Draw(t, "batches") {
			records := rapid.SliceOfN(rapid.Custom(genRecord), 1, 6).Draw(t, "records")
			all = append(all, EncodeBatch(records, 1000)...)
			want = append(want, records)
		}
		batches, err := DecodeBatches(all)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) != len(want) {
			t.Fatalf("decoded %d batches, want %d", len(batches), len(want))
		}
		for i, b := range batches {
			if diff := cmp.Diff(want[i], b.Records); diff != "" {
				t.Fatalf("batch %d (-want +got):\n%s", i, diff)
			}
			if b.NextOffset-b.BaseOffset != int64(len(want[i])) {
				t.Fatalf("batch %d spans [%d, %d) for %d records", i, b.BaseOffset, b.NextOffset, len(want[i]))
			}
		}
	})
}

func TestEncodingIsDeterministic(t *testing.T) {
	rec := &PartitionRecord{TopicID: TopicID{1}, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2, 3}, Leader: 3}
	a, b := EncodeBatch([]Record{rec}, 5), EncodeBatch([]Record{rec}, 5)
	if !cmp.Equal(a, b) {
		t.Fatal("two encodings of one batch differ")
	}
}

func TestDecodeGarbageNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "bytes")
		_, _ = DecodeRecord(b)
		_, _ = DecodeBatches(b)
	})
}

func TestDecodeRejectsNonCanonical(t *testing.T) {
	value := EncodeRecord(&RegisterBrokerRecord{BrokerID: 1, Fenced: true})
	value[len(value)-2] = 2 // Fenced: a bool must be 0 or 1
	if _, err := DecodeRecord(value); err == nil {
		t.Fatal("a bool encoded as 2 was accepted")
	}
	unknown := []byte{0x7f, 0x00, 0, 0}
	if _, err := DecodeRecord(unknown); err == nil {
		t.Fatal("unknown record type accepted")
	}
	version := EncodeRecord(&NoOpRecord{})
	version[3] = 1
	if _, err := DecodeRecord(version); err == nil {
		t.Fatal("unknown record version accepted")
	}
}
