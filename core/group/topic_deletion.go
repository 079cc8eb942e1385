package group

// Offsets of deleted topics, as Kafka's GroupCoordinatorService
// .onPartitionsDeleted removes them (the classic coordinator's
// GroupMetadataManager.cleanupGroupMetadata with a partition filter).
//
// When a topic is deleted, every group's committed offsets for its
// partitions get tombstones in __consumer_offsets: every group this
// coordinator holds, whatever its state, simple groups included. Without
// them a group would resume a re-created topic of the same name at the old
// topic's offsets and skip the new topic's first records.
//
// As with expiry, the removal takes effect when the tombstones are
// committed (OffsetFetch shows the offsets until then), and a failed append
// changes nothing: the offsets stay, in memory as in the log. A commit of
// such a partition still in flight when the deletion arrives was appended
// before the tombstone, so the log holds the tombstone after it; the key
// gets a tombstone too, and finishOffsetWrite's ordering leaves no offset
// whichever append completes first. A group left with nothing, simple or
// not, stays until the next expiry check deletes it, as Kafka's new
// coordinator leaves it to its expiry job (and a reload rebuilds it).
//
// Only a loaded coordinator acts, as Kafka schedules the write on active
// coordinators only: a deletion applied while the partition is loading
// leaves that partition's offsets of the topic in place.

import "strand/core/batch"

// OnTopicDeleted appends tombstones for every group's committed offsets of
// topic, and of commits of it in flight, in batches of at most
// expiryBatchRecordsMax records per group. The broker calls it once per
// deleted topic. It does nothing unless the coordinator is loaded.
func (c *Coordinator) OnTopicDeleted(topic string) {
	if c.phase != phaseActive {
		return
	}
	for _, id := range sortedGroupIDs(c.groups) {
		c.deleteTopicOffsets(c.groups[id], topic)
	}
}

// deleteTopicOffsets appends g's tombstones for topic's partitions.
func (c *Coordinator) deleteTopicOffsets(g *group, topic string) {
	keys := map[topicPartition]bool{}
	for tp := range g.offsets { // order-independent: sorted below
		if tp.topic == topic {
			keys[tp] = true
		}
	}
	for tp := range g.offsetsInFlight { // order-independent: sorted below
		if tp.topic == topic {
			keys[tp] = true
		}
	}
	sorted := sortedOffsetKeys(keys)
	for len(sorted) > 0 {
		n := min(len(sorted), expiryBatchRecordsMax)
		c.appendOffsetTombstones(g, sorted[:n])
		sorted = sorted[n:]
	}
}

// appendOffsetTombstones appends one batch of tombstones for g's keys and
// drops the offsets once it is committed, unless a later write of a key
// completed first.
func (c *Coordinator) appendOffsetTombstones(g *group, keys []topicPartition) {
	records := make([]batch.Record, 0, len(keys))
	for _, tp := range keys {
		records = append(records, batch.Record{Key: offsetKeyBytes(g.id, tp)})
		g.offsetsInFlight[tp]++
	}
	seq := c.appendSeq + 1 // the number append gives this write
	c.append(records, func(err error) {
		c.finishOffsetWrite(g, keys, seq, err, func(tp topicPartition, _ int) {
			delete(g.offsets, tp)
		})
	}, nil)
}
