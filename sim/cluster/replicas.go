package cluster

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
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
//
// A checkpoint that is missing promises nothing (none was written yet, or
// its first rename was not yet durable); one that cannot be read or parsed
// is a violation: it is written whole and renamed into place, so a power
// loss never leaves a torn one, and without it recovery could not know what
// was synced.
func (c *Cluster) checkSyncedKept(n *Node) {
	data, err := n.Disk.ReadFile(log.RecoveryPointCheckpointName)
	if errors.Is(err, env.ErrNotExist) {
		return
	}
	if err != nil {
		c.fail("synced-kept", fmt.Sprintf("node %d: after a power loss the recovery point checkpoint cannot be read: %v", n.ID, err))
		return
	}
	if corrupted, ok := n.corruptCheckpoints[log.RecoveryPointCheckpointName]; ok && corrupted == string(data) {
		return // the harness corrupted it, and the broker has not replaced it yet
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		c.fail("synced-kept", fmt.Sprintf("node %d: after a power loss the recovery point checkpoint does not parse: %v", n.ID, err))
		return
	}
	for _, e := range entries {
		tp := models.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		if n.damaged(tp) {
			continue // synced bytes the harness destroyed (deepfaults.go)
		}
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

// watch names the partitions whose deleted segments keepRemoved keeps.
func (c *Cluster) watch(tps []models.TopicPartition) {
	c.watched = map[string]models.TopicPartition{}
	c.held = map[models.TopicPartition]*models.HeldRecords{}
	for _, tp := range tps {
		c.watched[fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)] = tp
		c.held[tp] = &models.HeldRecords{}
	}
}

// keepRemoved records what n held in a segment of a watched partition it
// is about to delete (retention below the log start, DeleteRecords, a
// follower restarting at the leader's log start, recovery dropping
// segments below the log start): the acknowledged records it held there
// are then known present up to their deletion (models.HeldRecords).
func (c *Cluster) keepRemoved(n *Node, path string) {
	dir, name, found := strings.Cut(path, "/")
	tp, watched := c.watched[dir]
	if !found || !watched || strings.Contains(name, "/") || !strings.HasSuffix(name, ".log") {
		return
	}
	if data, err := n.Disk.ReadFile(path); err == nil {
		keepRecords(c.held[tp], data, -1)
	}
}

// keepBelowLogStart records, as n crashes, what its replicas still store
// below their log start offsets: DeleteRecords deleted those records, but
// their segments stay until retention removes them, and a power loss may
// take them first (never synced), after which no replica holds them. They
// were held up to their deletion all the same.
func (c *Cluster) keepBelowLogStart(n *Node) {
	if n.Core == nil {
		return
	}
	for dir, tp := range c.watched { // order-independent: each partition's records go to its own set
		iv, ok := n.Core.InspectReplica(tp.Topic, tp.Partition)
		if !ok {
			continue
		}
		names, err := n.Disk.List(dir)
		if err != nil {
			continue
		}
		for _, name := range names {
			if !strings.HasSuffix(name, ".log") {
				continue
			}
			if data, err := n.Disk.ReadFile(dir + "/" + name); err == nil {
				keepRecords(c.held[tp], data, iv.LogStartOffset)
			}
		}
	}
}

// keepRecords adds to held the records of a segment's data below
// belowOffset (every record if it is negative), read as stored, up to the
// first batch that does not parse.
func keepRecords(held *models.HeldRecords, data []byte, belowOffset int64) {
	for pos := 0; pos < len(data); {
		h, err := batch.ParseHeader(data[pos:])
		size := int(h.Length) + 12
		if err != nil || pos+size > len(data) {
			return
		}
		if _, err := batch.Verify(data[pos : pos+size]); err != nil {
			return // a batch the harness corrupted holds nothing
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data[pos : pos+size]); err != nil {
			return
		}
		if belowOffset >= 0 && h.BaseOffset >= belowOffset {
			return
		}
		records, err := workload.DecodeBatchRecords(rb)
		if err != nil {
			return
		}
		for _, r := range records {
			if belowOffset < 0 || r.Offset < belowOffset {
				held.Add(r.Offset, r.Value)
			}
		}
		pos += size
	}
}

// damaged reports whether the harness damaged n's replica of tp and no
// operator has repaired it yet.
func (n *Node) damaged(tp models.TopicPartition) bool {
	for _, d := range n.damage {
		if d.kind == damageReplica && d.tp == tp {
			return true
		}
	}
	return false
}
