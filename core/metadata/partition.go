package metadata

import (
	"fmt"
	"slices"
)

// Validate checks the invariants of a partition state (SPEC.md, controller):
// a non-empty assignment of distinct non-negative broker ids; ISR, ELR and
// LastKnownELR sorted, distinct and within the assignment; ISR and ELR
// disjoint; the leader NoLeader or in the ISR; epochs non-negative.
func (p PartitionState) Validate() error {
	if len(p.Replicas) == 0 {
		return fmt.Errorf("field Replicas is empty")
	}
	if err := distinctIDs("Replicas", p.Replicas); err != nil {
		return err
	}
	for _, set := range []struct {
		name string
		ids  []int32
	}{{"ISR", p.ISR}, {"ELR", p.ELR}, {"LastKnownELR", p.LastKnownELR}} {
		if !slices.IsSorted(set.ids) {
			return fmt.Errorf("%s %v is not sorted", set.name, set.ids)
		}
		if err := distinctIDs(set.name, set.ids); err != nil {
			return err
		}
		for _, id := range set.ids {
			if !slices.Contains(p.Replicas, id) {
				return fmt.Errorf("%s %v holds %d, which is not in Replicas %v", set.name, set.ids, id, p.Replicas)
			}
		}
	}
	for _, id := range p.ELR {
		if slices.Contains(p.ISR, id) {
			return fmt.Errorf("replica %d is in both ISR %v and ELR %v", id, p.ISR, p.ELR)
		}
	}
	if p.Leader != NoLeader && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("Leader %d is not in ISR %v", p.Leader, p.ISR)
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("negative epoch: LeaderEpoch %d, PartitionEpoch %d", p.LeaderEpoch, p.PartitionEpoch)
	}
	return nil
}

func distinctIDs(field string, ids []int32) error {
	s := sorted(ids)
	for i, id := range s {
		if id < 0 {
			return fmt.Errorf("%s %v holds negative id %d", field, ids, id)
		}
		if i > 0 && s[i-1] == id {
			return fmt.Errorf("%s %v repeats %d", field, ids, id)
		}
	}
	return nil
}

// WithChange returns the state after applying change, which must name this
// partition (the caller checks): changed lists replaced (sorted), the
// partition epoch plus one, and the leader epoch plus one unless the leader
// is NoLeaderChange. It returns an error if the result breaks an invariant
// (Validate). p is not modified.
func (p PartitionState) WithChange(change *PartitionChangeRecord) (PartitionState, error) {
	next := p
	if change.ISR.Changed {
		next.ISR = sorted(change.ISR.IDs)
	}
	if change.ELR.Changed {
		next.ELR = sorted(change.ELR.IDs)
	}
	if change.LastKnownELR.Changed {
		next.LastKnownELR = sorted(change.LastKnownELR.IDs)
	}
	switch {
	case change.Leader == NoLeaderChange:
	case change.Leader >= NoLeader:
		next.Leader = change.Leader
		next.LeaderEpoch = p.LeaderEpoch + 1
	default:
		return PartitionState{}, fmt.Errorf("Leader %d: must be a broker id, -1 or -2", change.Leader)
	}
	next.PartitionEpoch = p.PartitionEpoch + 1
	if next.LeaderEpoch < p.LeaderEpoch || next.PartitionEpoch < p.PartitionEpoch {
		return PartitionState{}, fmt.Errorf("epoch overflow at leader epoch %d, partition epoch %d", p.LeaderEpoch, p.PartitionEpoch)
	}
	if err := next.Validate(); err != nil {
		return PartitionState{}, err
	}
	return next, nil
}

// sorted returns a sorted copy of ids, nil for an empty list, so that equal
// sets have one representation.
func sorted(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
