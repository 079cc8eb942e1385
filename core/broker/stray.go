package broker

// Stray logs: a broker that was down while a topic was deleted, or deleted
// and created again under the same name, finds the old topic's logs in its
// log directories when it restarts. Served as they are, the old records would
// reappear in the new topic: a follower's divergence check cannot tell the two
// topics' histories apart, since both start at epoch 0 and offset 0. Kafka
// keeps each log's topic id in partition.metadata (KIP-516) and, in KRaft
// mode, deletes logs that the metadata no longer assigns to the broker, or
// that belong to another topic id (KAFKA-14616). Strand does the same:
//
//   - each partition's log directory holds partition.metadata, in Kafka's
//     format, written when the partition is opened here;
//   - after the first catch-up with the metadata log, a log no topic assigns
//     to this broker is deleted (deleteStrayLogs);
//   - a log whose partition.metadata names another topic id is deleted and
//     started afresh when the partition is opened (openPartition).
//
// A log without partition.metadata (written by an older Strand, or a crash
// before the write was durable) is adopted: its id is written. Kafka deletes
// such a log instead (KAFKA-16814); SPEC.md §9 says why Strand does not.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"

	"strand/core/env"
	"strand/core/log"
	"strand/core/log/checkpoint"
	"strand/core/metadata"
)

// partitionMetadataName is the file holding a log's topic id.
const partitionMetadataName = "partition.metadata"

// encodePartitionMetadata is partition.metadata's content for topic id, as
// Kafka's PartitionMetadataFile writes it.
func encodePartitionMetadata(id metadata.TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String() + "\n")
}

// parsePartitionMetadata reads the topic id from partition.metadata content.
func parsePartitionMetadata(data []byte) (metadata.TopicID, error) {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) != 2 || string(lines[0]) != "version: 0" {
		return metadata.TopicID{}, fmt.Errorf("%s: want two lines, version: 0 then topic_id, got %q", partitionMetadataName, data)
	}
	encoded, ok := bytes.CutPrefix(lines[1], []byte("topic_id: "))
	var id metadata.TopicID
	if n, err := base64.RawURLEncoding.Decode(id[:], encoded); !ok || err != nil || n != len(id) {
		return metadata.TopicID{}, fmt.Errorf("%s: topic_id line %q is not a 16-byte id", partitionMetadataName, lines[1])
	}
	return id, nil
}

// logTopicID is the topic id in dir's partition.metadata; found is false when
// the file does not exist.
func logTopicID(disk env.Disk, dir string) (id metadata.TopicID, found bool, err error) {
	data, err := checkpoint.ReadFile(disk, path.Join(dir, partitionMetadataName))
	if errors.Is(err, env.ErrNotExist) {
		return metadata.TopicID{}, false, nil
	}
	if err != nil {
		return metadata.TopicID{}, false, err
	}
	id, err = parsePartitionMetadata(data)
	return id, err == nil, err
}

// writeLogTopicID writes dir's partition.metadata (atomically, in the
// background; a crash before it is durable leaves no file, which is adopted
// on the next open).
func writeLogTopicID(disk env.Disk, dir string, id metadata.TopicID) {
	checkpoint.NewWriter(disk, dir, partitionMetadataName).Write(encodePartitionMetadata(id), nil)
}

// claimLog makes the log of tp in m belong to topic id: a log recorded under
// another id is deleted first (a stray of a re-created topic), and the id is
// written where it is missing. It returns the log to use.
func (pm *partitionManager) claimLog(m *log.Manager, disk env.Disk, tp log.TopicPartition, id metadata.TopicID) (*log.Log, error) {
	existing, ok := m.Log(tp)
	if ok {
		recorded, found, err := logTopicID(disk, existing.Dir())
		switch {
		case err != nil:
			return nil, err
		case found && recorded == id:
			return existing, nil
		case found:
			pm.cfg.Log.Warn("deleting the stray log of a topic deleted and created again while this broker was away",
				slog.String("dir", existing.Dir()), slog.String("topic_id", id.String()), slog.String("stray_topic_id", recorded.String()))
			if err := m.DeleteLog(tp, nil); err != nil {
				return nil, err
			}
		}
	}
	l, err := m.CreateLog(tp, pm.wallMs())
	if err != nil {
		return nil, err
	}
	writeLogTopicID(disk, l.Dir(), id)
	return l, nil
}

// deleteStrayLogs deletes the logs no topic assigns to this broker: those
// of topics deleted while it was away. It runs once, when the broker first
// catches up with the metadata log, before any partition is opened.
func (pm *partitionManager) deleteStrayLogs() {
	for _, m := range pm.managers {
		for _, tp := range m.Partitions() {
			if s, ok := pm.meta.image.PartitionByName(tp.Topic, tp.Partition); ok && slices.Contains(s.Replicas, pm.id) {
				continue
			}
			pm.cfg.Log.Warn("deleting a stray log: no topic assigns this partition to this broker any more",
				slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition)))
			_ = m.DeleteLog(tp, nil) // a failure leaves files behind only
		}
	}
}
