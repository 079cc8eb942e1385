package quorum

import "slices"

// majorityMatch is the largest offset that a majority of voters has
// replicated up to: matches holds one match offset per voter (the end of
// its durable log that the leader knows of).
func majorityMatch(matches []int64) int64 {
	if len(matches) == 0 {
		panic("quorum: majorityMatch of no voters")
	}
	sorted := slices.Clone(matches)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	return sorted[len(sorted)/2]
}

// nextCommit is the leader's new commit offset: the majority match, if it
// is ahead of commit and the entry just below it is of the leader's epoch
// (only entries of the current epoch commit by counting, Raft §5.4.2;
// earlier ones commit with them). Otherwise commit is unchanged.
func nextCommit(commit, majority int64, epochBelow func(offset int64) int32, epoch int32) int64 {
	if majority <= commit || epochBelow(majority-1) != epoch {
		return commit
	}
	return majority
}

// logUpToDate is Raft's election restriction: a candidate whose last entry
// has a larger epoch, or the same epoch and at least as long a log, is at
// least as up to date as the voter.
func logUpToDate(candLastEpoch int32, candEndOffset int64, ownLastEpoch int32, ownEndOffset int64) bool {
	if candLastEpoch != ownLastEpoch {
		return candLastEpoch > ownLastEpoch
	}
	return candEndOffset >= ownEndOffset
}

// voteGranted decides a real (not pre-) vote request in the voter's current
// epoch, which the request's epoch must equal. votedFor is -1 if the voter
// has not voted in this epoch; leaderKnown is whether it knows (or is) a
// leader of this epoch.
func voteGranted(votedFor, candidate int32, leaderKnown, upToDate, voteTwice bool) bool {
	if leaderKnown || !upToDate {
		return false
	}
	return votedFor == -1 || votedFor == candidate || voteTwice
}
