package cluster

import (
	"bytes"
	"fmt"

	"strand/core/quorum"
)

// raftChecker checks Raft's safety properties (issue 5 §4) on the
// controller voters of one run. It is every voter's quorum.Observer, so it
// judges each vote, election, commit and application as it happens, which
// catches a broken rule the first time it is broken instead of only when
// its consequence (a split election, a lost entry) happens to surface:
//
//   - vote safety: a voter's durable vote (its vote for itself as a
//     candidate included) names one candidate per epoch, across restarts;
//   - election safety: at most one leader per epoch;
//   - commit rule: when a leader moves its commit offset, a majority of
//     voters holds the entry just below it (with its epoch);
//   - leader completeness: a new leader holds every entry committed in an
//     earlier epoch (those behind its snapshot excepted);
//   - state machine safety: every node applies, at each offset, the entry
//     committed there, and no two leaders commit different entries at one
//     offset;
//   - log matching (checkLogMatching, polled): two voters' logs that hold
//     an entry with the same offset and epoch are identical up to it.
//
// The logs it reads are the voters' in-memory Raft logs: a follower's
// fetch offset, which the leader counts, is the end of its durable log, so
// the in-memory log holds at least that much.
type raftChecker struct {
	c *Cluster
	// votes: (voter, epoch) → the candidate its durable vote names.
	votes map[[2]int32]int32
	// leaders: epoch → its leader.
	leaders map[int32]int32
	// committed is the committed prefix of the metadata log as leaders
	// counted it, and commitEpochs the epoch whose leader first counted
	// each entry.
	committed    []quorum.Entry
	commitEpochs []int32
	violated     bool
}

func newRaftChecker(c *Cluster) *raftChecker {
	return &raftChecker{c: c, votes: map[[2]int32]int32{}, leaders: map[int32]int32{}}
}

func (k *raftChecker) fail(check, format string, args ...any) {
	if k.violated {
		return
	}
	k.violated = true
	k.c.fail(check, fmt.Sprintf(format, args...))
}

// raftOf is voter id's current Raft, nil if it has none running.
func (k *raftChecker) raftOf(id int32) *quorum.Raft {
	for _, n := range k.c.Nodes {
		if n.ID == id && n.Core != nil {
			return n.Core.QuorumRaft()
		}
	}
	return nil
}

// holds reports whether r's log (or its snapshot) holds entry e.
func holds(r *quorum.Raft, e quorum.Entry) bool {
	if r == nil {
		return false
	}
	if e.Offset < r.LogStartOffset() {
		return true // behind its snapshot, which only covers committed entries
	}
	if e.Offset >= r.EndOffset() {
		return false
	}
	got := r.Entries(e.Offset, e.Offset+1)[0]
	return got.Epoch == e.Epoch && bytes.Equal(got.Data, e.Data)
}

// VotePersisted implements quorum.Observer: one candidate per voter and
// epoch.
func (k *raftChecker) VotePersisted(voter, epoch, votedFor int32) {
	key := [2]int32{voter, epoch}
	if prev, ok := k.votes[key]; ok && prev != votedFor {
		k.fail("raft-vote-safety", "voter %d voted for %d and for %d in epoch %d", voter, prev, votedFor, epoch)
		return
	}
	k.votes[key] = votedFor
}

// BecameLeader implements quorum.Observer: election safety and leader
// completeness.
func (k *raftChecker) BecameLeader(id, epoch int32) {
	if prev, ok := k.leaders[epoch]; ok && prev != id {
		k.fail("raft-election-safety", "voters %d and %d both lead epoch %d", prev, id, epoch)
		return
	}
	k.leaders[epoch] = id
	r := k.raftOf(id)
	if r == nil {
		return // the node is still starting: Core is not yet set
	}
	for o, e := range k.committed {
		if k.commitEpochs[o] < epoch && !holds(r, e) {
			k.fail("raft-leader-completeness", "leader %d of epoch %d lacks entry %d (epoch %d) committed in epoch %d",
				id, epoch, o, e.Epoch, k.commitEpochs[o])
			return
		}
	}
}

// Committed implements quorum.Observer: the commit rule, and one entry per
// committed offset.
func (k *raftChecker) Committed(leader, epoch int32, prev, offset int64) {
	r := k.raftOf(leader)
	if r == nil || offset <= 0 {
		return
	}
	last := r.Entries(offset-1, offset)[0]
	have, voters := 0, k.c.VoterIDs()
	for _, v := range voters {
		if holds(k.raftOf(v), last) {
			have++
		}
	}
	if have < len(voters)/2+1 {
		k.fail("raft-commit", "leader %d of epoch %d commits offset %d (epoch %d) held by %d of %d voters",
			leader, epoch, offset-1, last.Epoch, have, len(voters))
		return
	}
	from := max(prev, r.LogStartOffset())
	for _, e := range r.Entries(from, offset) {
		k.record(e, epoch, fmt.Sprintf("leader %d of epoch %d", leader, epoch))
	}
}

// record notes e as committed, or checks it against what was.
func (k *raftChecker) record(e quorum.Entry, epoch int32, who string) {
	switch {
	case e.Offset < int64(len(k.committed)):
		if c := k.committed[e.Offset]; c.Epoch != e.Epoch || !bytes.Equal(c.Data, e.Data) {
			k.fail("raft-state-machine-safety", "%s commits offset %d as an entry of epoch %d; epoch %d's leader committed one of epoch %d there",
				who, e.Offset, e.Epoch, k.commitEpochs[e.Offset], c.Epoch)
		}
	case e.Offset == int64(len(k.committed)):
		k.committed = append(k.committed, e)
		k.commitEpochs = append(k.commitEpochs, epoch)
	}
}

// Applied implements quorum.Observer: state machine safety.
func (k *raftChecker) Applied(id int32, entries []quorum.Entry) {
	for _, e := range entries {
		if e.Offset >= int64(len(k.committed)) {
			k.fail("raft-state-machine-safety", "node %d applies offset %d (epoch %d), which no leader has counted committed (committed end %d)",
				id, e.Offset, e.Epoch, len(k.committed))
			return
		}
		if c := k.committed[e.Offset]; c.Epoch != e.Epoch || !bytes.Equal(c.Data, e.Data) {
			k.fail("raft-state-machine-safety", "node %d applies offset %d as an entry of epoch %d; the committed one is of epoch %d",
				id, e.Offset, e.Epoch, c.Epoch)
			return
		}
	}
}

// checkLogMatching compares every pair of running voters' logs: if they
// hold an entry with the same offset and epoch, they hold the same entries
// up to it.
func (k *raftChecker) checkLogMatching() {
	voters := k.c.VoterIDs()
	for i, a := range voters {
		ra := k.raftOf(a)
		for _, b := range voters[i+1:] {
			rb := k.raftOf(b)
			if ra == nil || rb == nil {
				continue
			}
			from := max(ra.LogStartOffset(), rb.LogStartOffset())
			to := min(ra.EndOffset(), rb.EndOffset())
			if from >= to {
				continue
			}
			la, lb := ra.Entries(from, to), rb.Entries(from, to)
			last := -1
			for j := range la {
				if la[j].Epoch == lb[j].Epoch {
					last = j
				}
			}
			for j := 0; j <= last; j++ {
				if la[j].Epoch != lb[j].Epoch || !bytes.Equal(la[j].Data, lb[j].Data) {
					k.fail("raft-log-matching", "voters %d and %d agree on offset %d (epoch %d) but differ at %d",
						a, b, la[last].Offset, la[last].Epoch, la[j].Offset)
					return
				}
			}
		}
	}
}

// logMatchingEveryNs paces checkLogMatching.
const logMatchingEveryNs = 1e9

// pollLogMatching checks log matching every logMatchingEveryNs until the
// run is done.
func (r *run) pollLogMatching() {
	r.c.raft.checkLogMatching()
	if !r.done {
		r.s.After(logMatchingEveryNs, r.pollLogMatching)
	}
}
