package replica

import "slices"

// Replica sets (replicas, ISR, ELR) are small sorted-on-demand slices of
// broker ids: replication factors are single digits, and slices keep every
// output deterministic where a map would not.

func containsID(ids []int32, id int32) bool { return slices.Contains(ids, id) }

// withID returns a sorted copy of ids with id added.
func withID(ids []int32, id int32) []int32 {
	out := slices.Clone(ids)
	if !containsID(out, id) {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// withoutIDs returns a sorted copy of ids without any member of drop.
func withoutIDs(ids []int32, drop []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !containsID(drop, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// sortedCopy returns ids sorted, without aliasing the argument.
func sortedCopy(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// firstDuplicate returns a repeated id, if any.
func firstDuplicate(ids []int32) (int32, bool) {
	s := sortedCopy(ids)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return s[i], true
		}
	}
	return 0, false
}

// firstNotIn returns a member of ids that is not in set, if any.
func firstNotIn(ids, set []int32) (int32, bool) {
	for _, id := range ids {
		if !containsID(set, id) {
			return id, true
		}
	}
	return 0, false
}
