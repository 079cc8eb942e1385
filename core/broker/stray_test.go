package broker

import (
	"math"
	"path"
	"slices"
	"testing"

	"strand/core/log"
	"strand/core/log/checkpoint"
)

// TestStrayLogsOfTopicsChangedWhileAway: a broker that was down while one
// of its topics was deleted, and another deleted and created again under the
// same name, must not bring the old records back. Without partition.metadata
// the restarted follower kept the old topic's first records: both topics'
// histories start at epoch 0 and offset 0, so the divergence check truncated
// it only to the new leader's end offset. The deleted topic's log must go too.
func TestStrayLogsOfTopicsChangedWhileAway(t *testing.T) {
	c := threeNodes(t)
	for _, v := range []string{"old-0", "old-1", "old-2", "old-3", "old-4"} { // one batch each: truncation keeps whole batches
		if r := c.produce(2, "r", 0, -1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("produce to the old r: error %d", r.ErrorCode)
		}
	}
	oldID, _ := c.nodes[1].node.controllerRole.ctrl.Image().TopicByName("r")
	tn := c.nodes[3]
	c.waitFor("node 3 has the old records", 5000, func() bool {
		p := tn.node.parts.partitions[partitionKey{"r", 0}]
		return p != nil && p.log.LogEndOffset() == 5
	})
	tn.proc.Crash()
	c.run(100)
	c.deleteTopic(1, "r")
	c.deleteTopic(1, "other")
	c.waitFor("r and other deleted on node 2", 5000, func() bool {
		_, r := c.nodes[2].node.meta.image.TopicByName("r")
		_, other := c.nodes[2].node.meta.image.TopicByName("other")
		return !r && !other
	})
	c.createTopic(1, "r", 1, 3)
	newID, _ := c.nodes[1].node.controllerRole.ctrl.Image().TopicByName("r")
	if s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName("r", 0); !slices.Contains(s.Replicas, 3) || s.Leader == 3 {
		t.Fatalf("test premise: the new r-0 has replicas %v led by %d; want node 3 a follower", s.Replicas, s.Leader)
	}
	for _, v := range []string{"new-0", "new-1"} {
		if r := c.produce(c.leaderOf("r", 0), "r", 0, 1, recordBatch(v)); r.ErrorCode != 0 {
			t.Fatalf("produce to the new r: error %d", r.ErrorCode)
		}
	}

	tn.proc.Restart()
	c.start(tn)
	c.waitFor("node 3 follows the new r-0", 30000, func() bool {
		p := tn.node.parts.partitions[partitionKey{"r", 0}]
		return p != nil && p.log.LogEndOffset() == 2
	})
	c.run(1000)
	p := tn.node.parts.partitions[partitionKey{"r", 0}]
	res, err := p.log.Read(0, math.MaxInt32, p.log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := log.CopyRegions(res.Regions)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, data); !slices.Equal(got, []string{"new-0", "new-1"}) {
		t.Fatalf("node 3's r-0 holds %q, want only the new topic's records", got)
	}
	idFile, err := checkpoint.ReadFile(tn.disk, path.Join(p.log.Dir(), partitionMetadataName))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := parsePartitionMetadata(idFile); err != nil || id != newID.ID || id == oldID.ID {
		t.Fatalf("partition.metadata names %v (%v), want the new topic id %v", id, err, newID.ID)
	}
	if names, err := tn.disk.List(path.Dir(p.log.Dir())); err != nil || slices.Contains(names, "other-0") || !slices.Contains(names, "r-0") {
		t.Fatalf("node 3's log dir after the restart: %v (%v); the deleted topic's other-0 must be gone", names, err)
	}
}

// TestPartitionMetadataFormat: the file is Kafka's, and what it writes it
// reads back; anything else is an error naming the file.
func TestPartitionMetadataFormat(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	data := encodePartitionMetadata(id)
	if string(data) != "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n" {
		t.Fatalf("partition.metadata content %q", data)
	}
	if got, err := parsePartitionMetadata(data); err != nil || got != id {
		t.Fatalf("parse: %v, %v", got, err)
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n", "version: 0\ntopic_id: AQID\n", "version: 0\nid: AQIDBAUGBwgJCgsMDQ4PEA\n"} {
		if _, err := parsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}
