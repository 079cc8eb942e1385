package metadata

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// snapshotVersion heads every encoded image.
const snapshotVersion uint16 = 0

// snapshotHeaderBytes: version (2), offset (8), next producer id (8).
const snapshotHeaderBytes = 18

// EncodeSnapshot encodes the image for a metadata snapshot, as KRaft's
// snapshots hold the records that rebuild the image: a header (format
// version, the image's offset, the next producer id, which no record can
// carry without a registered broker) and one RecordBatch v2 of records:
// brokers by id, topics by name each followed by its partitions, then
// configs by resource and key, then SCRAM credentials by user and
// mechanism, then ACLs by binding. The same image always encodes to the
// same bytes.
func (im *Image) EncodeSnapshot() []byte {
	out := binary.BigEndian.AppendUint16(nil, snapshotVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(im.offset))
	out = binary.BigEndian.AppendUint64(out, uint64(im.nextProducerID))
	var records []Record
	for _, id := range slices.Sorted(maps.Keys(im.brokers)) {
		b := im.brokers[id]
		records = append(records, &RegisterBrokerRecord{
			BrokerID: b.ID, IncarnationID: b.IncarnationID, BrokerEpoch: b.Epoch,
			Endpoints: b.Endpoints, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
		})
	}
	for _, name := range slices.Sorted(maps.Keys(im.topicsByName)) {
		t := im.topics[im.topicsByName[name]]
		records = append(records, &TopicRecord{Name: t.name, ID: t.id})
		for i, p := range t.partitions {
			records = append(records, &PartitionRecord{
				TopicID: t.id, PartitionID: int32(i), Replicas: p.Replicas, ISR: p.ISR, ELR: p.ELR,
				LastKnownELR: p.LastKnownELR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
			})
		}
	}
	resources := slices.SortedFunc(maps.Keys(im.configs), func(a, b ConfigResource) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
	for _, res := range resources {
		for _, key := range slices.Sorted(maps.Keys(im.configs[res])) {
			value := im.configs[res][key]
			records = append(records, &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: key, Value: &value})
		}
	}
	records = append(records, im.scramSnapshotRecords()...)
	for _, a := range im.ACLs() {
		records = append(records, NewAccessControlEntryRecord(a.ID, a.Binding))
	}
	if len(records) > 0 {
		out = append(out, EncodeBatch(records, 0)...)
	}
	return out
}

// DecodeSnapshot rebuilds an image from EncodeSnapshot's bytes, checking
// every record as Apply does.
func DecodeSnapshot(data []byte) (*Image, error) {
	if len(data) < snapshotHeaderBytes {
		return nil, fmt.Errorf("metadata snapshot: %d bytes, shorter than its header", len(data))
	}
	if v := binary.BigEndian.Uint16(data); v != snapshotVersion {
		return nil, fmt.Errorf("metadata snapshot: version %d, want %d", v, snapshotVersion)
	}
	offset := int64(binary.BigEndian.Uint64(data[2:]))
	nextProducerID := int64(binary.BigEndian.Uint64(data[10:]))
	batches, err := DecodeBatches(data[snapshotHeaderBytes:])
	if err != nil {
		return nil, fmt.Errorf("metadata snapshot: %w", err)
	}
	im := NewImage()
	applied := int64(0)
	for _, b := range batches {
		for _, rec := range b.Records {
			if err := im.Apply(applied, rec); err != nil {
				return nil, fmt.Errorf("metadata snapshot: record %d: %w", applied, err)
			}
			applied++
		}
	}
	if offset < applied-1 || nextProducerID < 0 {
		return nil, fmt.Errorf("metadata snapshot: offset %d with %d records, next producer id %d", offset, applied, nextProducerID)
	}
	im.offset, im.nextProducerID = offset, nextProducerID
	return im, nil
}
