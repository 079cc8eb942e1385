package broker

import "strand/core/replica"

// ReplicaInspection is one hosted partition's replica as the simulator's
// end-of-run checks read it: what a follower believes of the leader's HW and
// log start, beside its own log end, so that a follower the leader never
// re-told them shows up after a quiet period.
type ReplicaInspection struct {
	// Leader: this replica is the partition's leader in LeaderEpoch.
	Leader      bool
	LeaderEpoch int32
	// HighWatermark, LogStartOffset and LogEndOffset are this replica's.
	HighWatermark, LogStartOffset, LogEndOffset int64
	// ISR is the partition's ISR as this replica's state has it, sorted.
	ISR []int32
	// StorageFailed: the partition's log failed (offsets are then stale).
	StorageFailed bool
	// EpochStartOffset is where the leader's epoch starts (its log end
	// offset when it took LeaderEpoch); -1 on a follower. The simulator's
	// HW model takes a leader's answers as committed from there on.
	EpochStartOffset int64
}

// InspectReplica reads this node's replica of topic's partition; false if
// the node hosts none. It reads state only and changes nothing, so calling
// it never changes a run.
func (n *Node) InspectReplica(topic string, partition int32) (ReplicaInspection, bool) {
	p := n.parts.partitions[partitionKey{topic, partition}]
	if p == nil || p.retired {
		return ReplicaInspection{}, false
	}
	st := p.replica.State()
	epochStart, _ := p.replica.EpochStartOffset()
	return ReplicaInspection{
		EpochStartOffset: epochStart,
		Leader:           p.replica.Role() == replica.RoleLeader,
		LeaderEpoch:      p.replica.LeaderEpoch(),
		HighWatermark:    p.replica.HighWatermark(),
		LogStartOffset:   p.log.LogStartOffset(),
		LogEndOffset:     p.log.LogEndOffset(),
		ISR:              st.ISR,
		StorageFailed:    p.storageFailed(),
	}, true
}
