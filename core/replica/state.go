package replica

import (
	"fmt"
	"slices"

	"strand/core/env"
)

// Bugs are the planted replication bugs the simulator must catch
// (SPEC.md §4, planted bugs). Each switch breaks one rule at the exact
// point that rule is enforced; all false is the correct protocol.
type Bugs struct {
	// HWTruncation: a replica that becomes follower in a new leader epoch
	// truncates its log to its own high watermark and fetches without a
	// last fetched epoch, as Kafka did before KIP-101 (state.go, follower.go).
	HWTruncation bool
	// EarlyAck: acks=all completes as soon as the leader has appended (acks.go).
	EarlyAck bool
	// NoFencing: a leader keeps its role when the controller names another
	// leader, and fetches carrying another leader epoch are served (state.go,
	// leader.go).
	NoFencing bool
	// ISRMinIgnored: acks=all is admitted, committed and acknowledged while
	// the ISR is smaller than min.insync.replicas (acks.go, hw.go).
	ISRMinIgnored bool
	// FollowerPastHW: a follower serves a consumer's fetch (KIP-392) up to
	// its log end offset, answering it as its high watermark (leader.go,
	// OnConsumerFetchAnyReplica): consumers read uncommitted records.
	FollowerPastHW bool
	// HWRegress: a new leader answers ListOffsets with its HW before it has
	// committed in its epoch (LaggingHighWatermark never holds), so the
	// latest offset a client is told goes back across a leader change.
	HWRegress bool
}

// Config is the per-partition configuration. It travels with the partition,
// never in globals, so simulator seeds can run side by side.
type Config struct {
	// ReplicaID is this broker's id (node.id).
	ReplicaID int32
	// BrokerEpoch is this broker's registration epoch with the controller
	// (KIP-903), or -1 if unknown. It changes at every restart, so a broker
	// builds a new Partition then.
	BrokerEpoch int64
	// MinInsyncReplicas is min.insync.replicas (Kafka default 1).
	MinInsyncReplicas int
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms (Kafka default 30000).
	ReplicaLagTimeMaxMs int64
	// AckWaitersMax bounds the acks=all produces waiting on this partition
	// (CLARIFICATIONS.md, "Validation and limits"); beyond it AdmitProduce
	// rejects new acks=all produces before they are appended.
	AckWaitersMax int
	// Bugs are the planted bugs; the zero value is the correct protocol.
	Bugs Bugs
	// Log receives the partition's operator log lines (role changes, ISR
	// changes, truncations), with the topic and partition bound by the
	// caller; the zero Log discards them. Logging never changes a decision.
	Log env.Log
}

func (c Config) validate() error {
	switch {
	case c.ReplicaID < 0:
		return fmt.Errorf("replica config: ReplicaID %d is negative", c.ReplicaID)
	case c.BrokerEpoch < -1:
		return fmt.Errorf("replica config: BrokerEpoch %d is below -1", c.BrokerEpoch)
	case c.MinInsyncReplicas < 1:
		return fmt.Errorf("replica config: MinInsyncReplicas %d is below 1", c.MinInsyncReplicas)
	case c.ReplicaLagTimeMaxMs <= 0:
		return fmt.Errorf("replica config: ReplicaLagTimeMaxMs %d is not positive", c.ReplicaLagTimeMaxMs)
	case c.AckWaitersMax < 1:
		return fmt.Errorf("replica config: AckWaitersMax %d is below 1", c.AckWaitersMax)
	}
	return nil
}

// PartitionState is what the controller pushes for a partition, as KRaft's
// PartitionRecord / LeaderAndIsr carries it (CLARIFICATIONS.md, "The
// controller interface").
type PartitionState struct {
	// LeaderID is the leader's broker id, or NoLeader.
	LeaderID int32
	// LeaderEpoch increases with every leader election.
	LeaderEpoch int32
	// PartitionEpoch increases with every change to this state.
	PartitionEpoch int32
	// Replicas is the assignment (AR), preferred leader first.
	Replicas []int32
	// ISR is the committed in-sync replica set.
	ISR []int32
	// ELR is the eligible leader replica set (KIP-966); disjoint from ISR.
	ELR []int32
	// LastKnownELR is KIP-966's last known ELR; only controllers read it.
	LastKnownELR []int32
}

// clone returns a deep copy, so that no caller slice is retained.
func (s PartitionState) clone() PartitionState {
	s.Replicas = slices.Clone(s.Replicas)
	s.ISR = sortedCopy(s.ISR)
	s.ELR = sortedCopy(s.ELR)
	s.LastKnownELR = sortedCopy(s.LastKnownELR)
	return s
}

// validate rejects states no controller may send; self must be a replica.
func (s PartitionState) validate(self int32) error {
	if s.LeaderEpoch < 0 || s.PartitionEpoch < 0 {
		return fmt.Errorf("partition state: negative epoch (leader epoch %d, partition epoch %d)", s.LeaderEpoch, s.PartitionEpoch)
	}
	if len(s.Replicas) == 0 {
		return fmt.Errorf("partition state: Replicas is empty")
	}
	sets := []struct {
		name string
		ids  []int32
	}{{"Replicas", s.Replicas}, {"ISR", s.ISR}, {"ELR", s.ELR}}
	for _, set := range sets {
		if id, dup := firstDuplicate(set.ids); dup {
			return fmt.Errorf("partition state: %s %v repeats replica %d", set.name, set.ids, id)
		}
		if id, out := firstNotIn(set.ids, s.Replicas); out {
			return fmt.Errorf("partition state: %s %v holds %d, which is not in Replicas %v", set.name, set.ids, id, s.Replicas)
		}
	}
	if id, both := firstNotIn(s.ELR, withoutIDs(s.ELR, s.ISR)); both {
		return fmt.Errorf("partition state: replica %d is in both ISR %v and ELR %v", id, s.ISR, s.ELR)
	}
	if s.LeaderID != NoLeader && !containsID(s.ISR, s.LeaderID) {
		return fmt.Errorf("partition state: leader %d is not in ISR %v", s.LeaderID, s.ISR)
	}
	if !containsID(s.Replicas, self) {
		return fmt.Errorf("partition state: this replica %d is not in Replicas %v; the broker must stop hosting the partition", self, s.Replicas)
	}
	return nil
}

// Role is what this replica currently is for the partition.
type Role uint8

const (
	// RoleNone: no partition state applied yet.
	RoleNone Role = iota
	// RoleLeader: this replica leads the current leader epoch.
	RoleLeader
	// RoleFollower: another replica leads, or there is no leader.
	RoleFollower
)

// String names the role for logs and errors.
func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// Transition tells the broker what ApplyState changed and what it must do.
type Transition struct {
	// Role is the role after the state was applied.
	Role Role
	// NewLeaderEpoch is true when the leader epoch changed (or this was the
	// first state): a follower restarts its fetcher.
	NewLeaderEpoch bool
	// TruncateToOffset, unless NoOffset, is an offset the broker must
	// truncate the log to before anything else. The correct protocol
	// truncates a follower only on a DivergingEpoch answer (KIP-101), never
	// on a state change; the hw-truncation planted bug truncates it to its
	// HW. A new leader truncates only batches from an epoch no leader has
	// held, which a corrupted disk left (leader.go corruptEpochStart).
	TruncateToOffset int64
}

// Partition is the replication state machine of one partition on one broker.
// It is driven by one event loop (core/env's contract) and is not safe for
// concurrent use.
type Partition struct {
	cfg   Config
	log   Log
	state PartitionState
	role  Role
	// hw is the high watermark: on the leader, the offset below which every
	// record is committed; on a follower, the leader's HW as last learned,
	// capped at the local LEO.
	hw       int64
	leader   leaderState
	follower followerState
	acks     ackTracker
	// ineligibleReplicas are the replicas the metadata image shows fenced,
	// in controlled shutdown or unregistered (SetIneligibleReplicas),
	// sorted. Unlike leader.refused it survives pushed states: it is
	// broker state, not partition state.
	ineligibleReplicas []int32
	// nextProposalID numbers AlterPartition proposals across leaderships,
	// so an answer to an old proposal can never match a new one.
	nextProposalID uint64
}

// New returns the partition's state machine before any controller state.
// highWatermarkCheckpoint is the HW last checkpointed on this broker; it is
// clamped into [LogStartOffset, LogEndOffset] because recovery may have
// dropped unflushed records below it.
func New(cfg Config, log Log, highWatermarkCheckpoint int64) (*Partition, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		return nil, fmt.Errorf("replica: log is nil")
	}
	hw := min(max(highWatermarkCheckpoint, log.LogStartOffset()), log.LogEndOffset())
	return &Partition{cfg: cfg, log: log, hw: hw, state: PartitionState{LeaderID: NoLeader, LeaderEpoch: NoEpoch, PartitionEpoch: -1}}, nil
}

// Role returns this replica's current role.
func (p *Partition) Role() Role { return p.role }

// State returns a copy of the partition state as this replica knows it,
// including ISR changes committed through AlterPartition responses.
func (p *Partition) State() PartitionState { return p.state.clone() }

// LeaderEpoch is the current leader epoch; the leader stamps it into every
// batch it appends (PartitionLeaderEpoch).
func (p *Partition) LeaderEpoch() int32 { return p.state.LeaderEpoch }

// HighWatermark is the offset below which records are committed and visible
// to consumers (SPEC.md §4).
func (p *Partition) HighWatermark() int64 { return p.hw }

// EpochStartOffset is where this leader's epoch starts (its log end offset
// when it took the epoch: Kafka's leaderEpochStartOffsetOpt); false on a
// replica that does not lead.
func (p *Partition) EpochStartOffset() (int64, bool) {
	if p.role != RoleLeader {
		return NoOffset, false
	}
	return p.leader.epochStartOffset, true
}

// LaggingHighWatermark reports whether this leader's HW is still below the
// start of its epoch: a new leader starts from its own HW, which may lag
// what the previous leader committed, until every ISR member has fetched
// in its epoch. Kafka's ListOffsets then answers OFFSET_NOT_AVAILABLE for
// the latest offset and for a timestamp found at or past the HW (KIP-207,
// Partition.fetchOffsetForTimestamp), so that the offsets it answers never
// go back across a leader change; a Fetch still answers the lagging HW.
// The planted bug hw-regress answers them anyway (SPEC.md §4.7).
func (p *Partition) LaggingHighWatermark() bool {
	return p.role == RoleLeader && p.hw < p.leader.epochStartOffset && !p.cfg.Bugs.HWRegress
}

// ApplyState applies a partition state pushed by the controller (SPEC.md §4,
// controller interface). A state older than the one applied (lower partition
// epoch or lower leader epoch) is rejected with an error and changes nothing;
// an equal partition epoch is accepted, because an AlterPartition response
// may have taken this replica to that epoch first (as Kafka's makeLeader
// allows).
func (p *Partition) ApplyState(s PartitionState, nowMs int64) (Transition, error) {
	defer p.checkInvariants()
	if err := s.validate(p.cfg.ReplicaID); err != nil {
		return Transition{}, err
	}
	if s.PartitionEpoch < p.state.PartitionEpoch || s.LeaderEpoch < p.state.LeaderEpoch {
		return Transition{}, fmt.Errorf("stale partition state: leader epoch %d, partition epoch %d; have leader epoch %d, partition epoch %d",
			s.LeaderEpoch, s.PartitionEpoch, p.state.LeaderEpoch, p.state.PartitionEpoch)
	}
	p.clampHighWatermarkToLog()
	newEpoch := p.role == RoleNone || s.LeaderEpoch > p.state.LeaderEpoch
	if p.cfg.Bugs.NoFencing && p.role == RoleLeader && s.LeaderID != p.cfg.ReplicaID {
		// Planted bug no-fencing: the deposed leader ignores its demotion.
		return Transition{Role: RoleLeader, TruncateToOffset: NoOffset}, nil
	}
	before := p.state
	roleBefore := p.role
	var t Transition
	if s.LeaderID == p.cfg.ReplicaID {
		truncateTo := p.becomeLeader(s.clone(), newEpoch, nowMs)
		t = Transition{Role: RoleLeader, NewLeaderEpoch: newEpoch, TruncateToOffset: truncateTo}
	} else {
		t = p.becomeFollower(s.clone(), newEpoch)
	}
	if newEpoch || roleBefore != t.Role {
		p.logTransition(before, t)
	} else if t.Role == RoleLeader && !slices.Equal(before.ISR, p.state.ISR) {
		p.logISRUpdated()
	}
	return t, nil
}

// SetIneligibleReplicas tells the replica which brokers may not join an ISR
// according to the metadata image: fenced, in controlled shutdown, or not
// registered (KIP-841). Kafka's leader reads the same from its metadata
// cache (Partition.isReplicaIsrEligible). The broker calls it whenever the
// image's broker registrations change; the set replaces the previous one
// and is kept across ApplyState.
//
// On the leader, an ineligible replica is never proposed for the ISR and,
// when outside the maximal ISR, no longer holds the HW back even if it was
// caught up: the HW is recomputed at once, completing acks=all waiters it
// passes.
func (p *Partition) SetIneligibleReplicas(ids []int32, nowMs int64) {
	defer p.checkInvariants()
	p.ineligibleReplicas = sortedCopy(ids)
	p.maybeAdvanceHighWatermark(nowMs)
}

// isrEligible reports whether replica id may join the ISR as far as this
// replica knows at nowMs: the image does not show it fenced or shutting
// down, and the controller has not refused it since the last pushed state
// within refusedReplicaRetryMs.
func (p *Partition) isrEligible(id int32, nowMs int64) bool {
	if containsID(p.ineligibleReplicas, id) {
		return false
	}
	for _, r := range p.leader.refused {
		if r.replicaID == id && nowMs < r.untilMs {
			return false
		}
	}
	return true
}

// clampHighWatermarkToLog lowers the HW to the LEO if the log now ends
// below it, as Kafka's min(checkpoint, LEO) on load. The log's length comes
// from disk: a power loss may have dropped an unsynced tail the checkpoint
// counted, or a truncation the replica decided may have failed. That is data
// loss (over the fault budget, or a failed disk), never a reason to panic.
// Called on every state change and before every HW update.
func (p *Partition) clampHighWatermarkToLog() {
	p.hw = min(p.hw, p.log.LogEndOffset())
}

// effectiveMinISR is min.insync.replicas capped at the replication factor,
// as Kafka's Partition.effectiveMinIsr.
func (p *Partition) effectiveMinISR() int {
	return min(p.cfg.MinInsyncReplicas, len(p.state.Replicas))
}

// underMinISR reports whether the committed ISR is below min.insync.replicas.
func (p *Partition) underMinISR() bool {
	return len(p.state.ISR) < p.effectiveMinISR()
}
