package group

import "fmt"

// State is a classic group's state, named as Kafka names it in
// DescribeGroups and ListGroups.
type State int8

// The classic group states (Kafka's ClassicGroupState).
const (
	// Empty: no members. Offsets may still be committed with generation -1
	// (simple consumers, admin tools). A join moves it to PreparingRebalance.
	Empty State = iota
	// PreparingRebalance: joins are parked until every known member has
	// rejoined or the rebalance timeout ends; heartbeats and syncs answer
	// REBALANCE_IN_PROGRESS.
	PreparingRebalance
	// CompletingRebalance: the generation is formed; the coordinator waits
	// for the leader's SyncGroup with the assignment.
	CompletingRebalance
	// Stable: the assignment is persisted and handed out.
	Stable
	// Dead: the group is being deleted. Terminal.
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// validPrevious lists, for each state, the states it may be entered from:
// Kafka's ClassicGroupState table, which the invariant checks enforce.
var validPrevious = map[State][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
}

// CanTransition reports whether Kafka allows a group in from to move to to.
func CanTransition(from, to State) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// parseState maps a ListGroups states filter entry (any case) to a state.
func parseState(name string) (State, bool) {
	for s := Empty; s <= Dead; s++ {
		if equalFoldASCII(s.String(), name) {
			return s, true
		}
	}
	return 0, false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
