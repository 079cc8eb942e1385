package quorum

import (
	"fmt"
	"slices"
)

// Kafka's default quorum timeouts (controller.quorum.*.ms).
const (
	DefaultElectionTimeoutMs = 1000
	DefaultFetchTimeoutMs    = 2000
	DefaultRequestTimeoutMs  = 2000
	// DefaultFetchMaxWaitMs is how long the leader parks a Fetch with
	// nothing new, KRaft's fetch max wait.
	DefaultFetchMaxWaitMs = 500
	// DefaultFetchEntriesMax bounds the entries in one Fetch response.
	DefaultFetchEntriesMax = 64
)

// Bugs are planted bugs the simulator must catch. They are per instance,
// never global, because seeds run in parallel.
type Bugs struct {
	// VoteTwice (raft-vote-twice): a voter grants a vote even though it
	// already voted for another candidate in this epoch.
	VoteTwice bool
	// CommitEarly (raft-commit-early): the leader counts an entry committed
	// as soon as it has appended it, before a majority has it.
	CommitEarly bool
}

// Config configures one Raft voter (or observer).
type Config struct {
	// ID is this node's node.id.
	ID int32
	// Voters are the node ids of controller.quorum.voters. A node not among
	// them is an observer: it fetches but never votes or stands.
	Voters []int32
	// ElectionTimeoutMs is controller.quorum.election.timeout.ms: elections
	// back off for a random time in [ElectionTimeoutMs, 2×ElectionTimeoutMs).
	ElectionTimeoutMs int64
	// FetchTimeoutMs is controller.quorum.fetch.timeout.ms: a follower that
	// has not heard from its leader for this long starts an election.
	FetchTimeoutMs int64
	// RequestTimeoutMs is controller.quorum.request.timeout.ms: a Fetch not
	// answered within FetchMaxWaitMs plus this is sent again.
	RequestTimeoutMs int64
	// FetchMaxWaitMs is how long the leader parks an empty Fetch.
	FetchMaxWaitMs int64
	// FetchEntriesMax bounds the entries in one Fetch response.
	FetchEntriesMax int
	// RandInt63n returns a uniformly random integer in [0, n); the
	// environment seeds it (the simulator from the seed).
	RandInt63n func(n int64) int64
	// Bugs are the planted bugs switched on for this instance.
	Bugs Bugs
	// Observer, if set, is told of each safety-relevant decision as it is
	// made (the simulator's Raft checkers); nil in production.
	Observer Observer
}

// Observer is told, as they happen, of the decisions Raft's safety rests
// on, so that a checker can judge each one at once instead of waiting for
// its consequences to surface (a vote given twice splits an election only
// when two candidates ask; an early commit loses an entry only if the
// leader then crashes). Its methods run on the node's event loop, inside
// Raft's own calls: they must only read, never call back into a Raft.
type Observer interface {
	// VotePersisted: voter's hard state naming votedFor (itself, as a
	// candidate, included) for epoch is durable, which is when the vote
	// counts: a vote lost in a crash was never heard.
	VotePersisted(voter, epoch, votedFor int32)
	// BecameLeader: id leads epoch, its log as it is now.
	BecameLeader(id, epoch int32)
	// Committed: the leader of epoch counts every entry below offset
	// committed; it has just moved its commit offset from prev.
	Committed(leader, epoch int32, prev, offset int64)
	// Applied: voter (or observer) id hands committed entries to its state
	// machine, in offset order.
	Applied(id int32, entries []Entry)
}

// DefaultConfig returns Kafka's default timeouts for node id among voters.
func DefaultConfig(id int32, voters []int32, randInt63n func(int64) int64) Config {
	return Config{
		ID: id, Voters: slices.Clone(voters),
		ElectionTimeoutMs: DefaultElectionTimeoutMs, FetchTimeoutMs: DefaultFetchTimeoutMs,
		RequestTimeoutMs: DefaultRequestTimeoutMs, FetchMaxWaitMs: DefaultFetchMaxWaitMs,
		FetchEntriesMax: DefaultFetchEntriesMax, RandInt63n: randInt63n,
	}
}

// validate reports the first field that is out of range.
func (c *Config) validate() error {
	if len(c.Voters) == 0 {
		return fmt.Errorf("quorum config: Voters is empty")
	}
	seen := map[int32]bool{}
	for _, v := range c.Voters {
		if v < 0 || seen[v] {
			return fmt.Errorf("quorum config: Voters %v has a negative or repeated id", c.Voters)
		}
		seen[v] = true
	}
	switch {
	case c.ID < 0:
		return fmt.Errorf("quorum config: ID %d is negative", c.ID)
	case c.ElectionTimeoutMs <= 0:
		return fmt.Errorf("quorum config: ElectionTimeoutMs %d must be positive", c.ElectionTimeoutMs)
	case c.FetchTimeoutMs <= 0:
		return fmt.Errorf("quorum config: FetchTimeoutMs %d must be positive", c.FetchTimeoutMs)
	case c.RequestTimeoutMs <= 0:
		return fmt.Errorf("quorum config: RequestTimeoutMs %d must be positive", c.RequestTimeoutMs)
	case c.FetchMaxWaitMs < 0:
		return fmt.Errorf("quorum config: FetchMaxWaitMs %d is negative", c.FetchMaxWaitMs)
	case c.FetchEntriesMax <= 0:
		return fmt.Errorf("quorum config: FetchEntriesMax %d must be positive", c.FetchEntriesMax)
	case c.RandInt63n == nil:
		return fmt.Errorf("quorum config: RandInt63n is nil")
	}
	return nil
}
