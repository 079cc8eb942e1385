package metadata

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// TestSnapshotRoundTrip: any image reachable by records decodes from its
// snapshot to the same image (offset and next producer id included), and
// encodes again to the same bytes.
func TestSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		im := NewImage()
		ids := []TopicID{{1}, {2}}
		for range rapid.IntRange(0, 100).Draw(t, "records") {
			_ = im.Apply(im.Offset()+1, genSmallRecord(t, ids)) // refused records change nothing
		}
		data := im.EncodeSnapshot()
		got, err := DecodeSnapshot(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(im, got, allFields, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("decoded image differs (-encoded +decoded):\n%s", diff)
		}
		if again := got.EncodeSnapshot(); !bytes.Equal(again, data) {
			t.Fatal("the decoded image encodes to other bytes")
		}
	})
}

func TestSnapshotKeepsProducerIDsAndConfigs(t *testing.T) {
	a := threeBrokersOneTopic(t)
	value := "2"
	a.ok(&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "a", Name: "min.insync.replicas", Value: &value},
		&ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: 1000},
		&UnregisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1})
	got, err := DecodeSnapshot(a.im.EncodeSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got.NextProducerID() != 1000 || got.Offset() != a.im.Offset() {
		t.Fatalf("next producer id %d offset %d, want 1000 and %d", got.NextProducerID(), got.Offset(), a.im.Offset())
	}
	if diff := cmp.Diff(a.im, got, allFields, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decoded image differs:\n%s", diff)
	}
}

func TestDecodeSnapshotRejectsDamage(t *testing.T) {
	data := threeBrokersOneTopic(t).im.EncodeSnapshot()
	for name, bad := range map[string][]byte{
		"short header":  data[:10],
		"other version": append([]byte{0, 9}, data[2:]...),
		"cut batch":     data[:len(data)-3],
	} {
		if _, err := DecodeSnapshot(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
