package cluster

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/log/checkpoint"
	"strand/models"
	"strand/sim/workload"
)

// logEnd is one past the last offset of n's log of tp on disk, parsing
// batch headers only; a damaged tail ends it. A segment's base offset (its
// file name) counts too: a log restarted empty at the leader's log start
// (DeleteRecords moved it past this replica's end) ends there.
func (c *Cluster) logEnd(n *Node, tp models.TopicPartition) int64 {
	dir := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	names, err := n.Disk.List(dir)
	if err != nil {
		return 0
	}
	end := int64(0)
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if base, err := strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64); err == nil {
			end = max(end, base)
		}
		data, err := n.Disk.ReadFile(dir + "/" + name)
		if err != nil {
			continue
		}
		for pos := 0; pos < len(data); {
			h, err := batch.ParseHeader(data[pos:])
			size := int(h.Length) + 12
			if err != nil || pos+size > len(data) {
				break
			}
			end = max(end, h.BaseOffset+int64(h.LastOffsetDelta)+1)
			pos += size
		}
	}
	return end
}

// hasSegment reports whether n's directory of tp holds a segment file.
func (c *Cluster) hasSegment(n *Node, tp models.TopicPartition) bool {
	names, _ := n.Disk.List(fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			return true
		}
	}
	return false
}

// checkSyncedKept checks, right after a power loss, that every log of n
// still reaches the recovery point its checkpoint names: recovery may drop
// only what was never synced (CLARIFICATIONS.md, "a synced batch is never
// lost"). The checkpoint is written from recovery points that are durable
// by construction, so a log ending below it lost synced batches — what
// the lost-fsync planted bug does.
func (c *Cluster) checkSyncedKept(n *Node) {
	data, err := n.Disk.ReadFile(log.RecoveryPointCheckpointName)
	if err != nil {
		return
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		return
	}
	for _, e := range entries {
		tp := models.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		if !c.hasSegment(n, tp) {
			// A log restarted empty at the leader's log start (all its
			// segments deleted, the new one's creation not yet durable)
			// lost no batch; a log losing synced data keeps its files.
			continue
		}
		if end := c.logEnd(n, tp); end < e.Offset {
			names, _ := n.Disk.List(fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
			c.fail("synced-kept", fmt.Sprintf("node %d %s: after a power loss the log ends at %d, below its checkpointed recovery point %d (files %v)",
				n.ID, tp, end, e.Offset, names))
			return
		}
	}
}

// readReplica reads a replica's log of tp from the node's disk, as stored
// (current content, which is what the node reads), segment by segment:
// the batches' offsets and bytes; decodeRecords adds their records.
func (c *Cluster) readReplica(id int32, tp models.TopicPartition) (models.ReplicaLog, error) {
	rl := models.ReplicaLog{Node: id}
	var n *Node
	for _, b := range c.Brokers() {
		if b.ID == id {
			n = b
		}
	}
	if n == nil {
		return rl, fmt.Errorf("no broker %d", id)
	}
	dir := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	names, err := n.Disk.List(dir)
	if err != nil {
		return rl, fmt.Errorf("list %s: %w", dir, err)
	}
	var segments []string
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			segments = append(segments, name)
		}
	}
	sort.Strings(segments)
	for _, name := range segments {
		data, err := n.Disk.ReadFile(dir + "/" + name)
		if err != nil {
			return rl, err
		}
		for pos := 0; pos < len(data); {
			h, err := batch.ParseHeader(data[pos:])
			if err != nil {
				return rl, fmt.Errorf("%s/%s at byte %d: %w", dir, name, pos, err)
			}
			size := int(h.Length) + 12
			if pos+size > len(data) {
				return rl, fmt.Errorf("%s/%s at byte %d: batch of %d bytes cut short", dir, name, pos, size)
			}
			b := models.Batch{BaseOffset: h.BaseOffset, LastOffset: h.BaseOffset + int64(h.LastOffsetDelta), Bytes: data[pos : pos+size]}
			rl.Batches = append(rl.Batches, b)
			pos += size
		}
	}
	return rl, nil
}

// decodeRecords fills in the records of every batch of rl (of tp): the
// convergence poll reads every replica every time, and decodes only once
// they all agree.
func decodeRecords(rl *models.ReplicaLog, tp models.TopicPartition) error {
	for i := range rl.Batches {
		b := &rl.Batches[i]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b.Bytes); err != nil {
			return fmt.Errorf("replica %d of %s, batch at %d: %w", rl.Node, tp, b.BaseOffset, err)
		}
		records, err := workload.DecodeBatchRecords(rb)
		if err != nil {
			return fmt.Errorf("replica %d of %s: %w", rl.Node, tp, err)
		}
		b.Records = records
	}
	return nil
}
