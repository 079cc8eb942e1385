package cluster

import (
	"fmt"
	"slices"

	"strand/core/broker"
	"strand/models"
)

// The quiet check (after the heal, before the acks=all probe): producers
// have stopped and the deleter's last DeleteRecords round has moved log
// starts with nothing produced after it. Once a partition has settled
// (every broker up and agreeing on its leader, every replica in the
// leader's ISR, every log ending at the leader's HW), every follower must
// within quietMismatchNs hold the leader's HW and at least its log start
// offset: the leader tells them in its fetch answers, and a follower
// never re-told them (the KIP-227 session counting an answer the follower
// threw away as told) keeps old ones. The
// acks=all probe that follows moves every HW and so re-tells every
// follower: this check has to come before it. A partition that has not
// settled by the deadline is skipped (counted in the result's stats), not
// failed: whether it converges at all is the liveness phase's question.
// Then DeleteRecords to each settled partition's log start (a move to
// where it already is) must complete: its low watermark, the smallest log
// start offset of the live replicas, must be reachable.
const (
	// deleteRoundDelayNs is the pause between the producers' stop and the
	// deleter's last round (a few replica fetch long-polls);
	// deleteRoundNs bounds the round.
	deleteRoundDelayNs = 1e9
	deleteRoundNs      = 3e9
	// quietCheckNs bounds the quiet check; quietMismatchNs is how long a
	// settled partition may show a follower behind the leader's HW or log
	// start (several replica fetch long-polls).
	quietCheckNs    = 10e9
	quietMismatchNs = 3e9
	// lowWatermarkNs bounds the DeleteRecords to the log start.
	lowWatermarkNs = 5e9
)

// quietState is the quiet check's progress on one partition.
type quietState struct {
	passed bool
	// mismatchSinceNs is when the partition, settled, was first seen with
	// a follower behind; -1 while not.
	mismatchSinceNs int64
	// logStart is the leader's log start when it passed.
	logStart int64
}

// quietCheck polls every convergePollNs until every partition passed or
// deadlineNs, then checks the low watermarks and calls done, unless it
// found a violation (which halts the run).
func (r *run) quietCheck(states []quietState, deadlineNs int64, done func()) {
	now := r.s.NowNs()
	pending := 0
	for i, tp := range r.tps {
		st := &states[i]
		if st.passed {
			continue
		}
		leader, followers, why := r.settled(tp)
		if why != "" {
			st.mismatchSinceNs = -1
			pending++
			continue
		}
		behind := followerBehind(leader, followers)
		if behind == "" {
			st.passed, st.logStart = true, leader.view.LogStartOffset
			continue
		}
		pending++
		if st.mismatchSinceNs < 0 {
			st.mismatchSinceNs = now
		}
		if now-st.mismatchSinceNs >= quietMismatchNs {
			r.violate("quiet-convergence", fmt.Sprintf("%s: settled for %d ms with nothing produced (leader %d epoch %d, HW %d, log start %d, LEO %d), %s",
				tp, (now-st.mismatchSinceNs)/1e6, leader.id, leader.view.LeaderEpoch, leader.view.HighWatermark,
				leader.view.LogStartOffset, leader.view.LogEndOffset, behind))
			return
		}
	}
	if pending > 0 && now < deadlineNs {
		r.s.After(convergePollNs, func() { r.quietCheck(states, deadlineNs, done) })
		return
	}
	passed := 0
	offsets := make([]int64, len(r.tps))
	for i, st := range states {
		if st.passed {
			passed++
		}
		offsets[i] = st.logStart
	}
	r.quietStats = fmt.Sprintf(" quiet_settled=%d/%d", passed, len(r.tps))
	if passed == 0 {
		done()
		return
	}
	r.w.DeleteAtLogStart(offsets, r.s.NowNs()+lowWatermarkNs, func(completed []bool) {
		for i, tp := range r.tps {
			if states[i].passed && !completed[i] {
				r.violate("low-watermark", fmt.Sprintf("%s: settled, yet DeleteRecords to its log start %d did not complete within %d s: a live replica reports an older log start",
					tp, offsets[i], int64(lowWatermarkNs/1e9)))
				return
			}
		}
		done()
	})
}

// inspected is one replica's state as InspectReplica read it.
type inspected struct {
	id   int32
	view broker.ReplicaInspection
}

// settled returns tp's leader and followers once tp has settled, or why not
// yet.
func (r *run) settled(tp models.TopicPartition) (leader inspected, followers []inspected, why string) {
	var replicas []int32
	leader.id = -1
	for _, n := range r.c.Brokers() {
		if !n.Proc.Up() || n.Core == nil {
			return leader, nil, fmt.Sprintf("broker %d down", n.ID)
		}
		st, ok := n.Core.Image().PartitionByName(tp.Topic, tp.Partition)
		if !ok || st.Leader < 0 || (leader.id >= 0 && st.Leader != leader.id) || (replicas != nil && st.LeaderEpoch != leader.view.LeaderEpoch) {
			return leader, nil, "the brokers' metadata disagrees on the leader"
		}
		leader.id, leader.view.LeaderEpoch, replicas = st.Leader, st.LeaderEpoch, r.c.memberReplicas(st.Replicas)
	}
	for _, id := range replicas {
		n := r.c.Nodes[id-1]
		v, ok := n.Core.InspectReplica(tp.Topic, tp.Partition)
		if !ok || v.StorageFailed {
			return leader, nil, fmt.Sprintf("replica %d not hosted or failed", id)
		}
		if id == leader.id {
			if !v.Leader || v.LeaderEpoch != leader.view.LeaderEpoch {
				return leader, nil, "the leader has not taken over yet"
			}
			leader.view = v
			continue
		}
		followers = append(followers, inspected{id: id, view: v})
	}
	if !slices.Equal(leader.view.ISR, sortedIDs(replicas)) {
		return leader, nil, fmt.Sprintf("ISR %v of replicas %v", leader.view.ISR, replicas)
	}
	if leader.view.HighWatermark != leader.view.LogEndOffset {
		return leader, nil, "the leader's HW is below its log end"
	}
	for _, f := range followers {
		if f.view.LogEndOffset != leader.view.LogEndOffset {
			return leader, nil, fmt.Sprintf("replica %d's log ends at %d, the leader's at %d", f.id, f.view.LogEndOffset, leader.view.LogEndOffset)
		}
	}
	return leader, followers, ""
}

// followerBehind describes the first follower whose HW differs from the
// leader's or whose log start is below it, or returns "". A log start
// above the leader's is allowed: a former leader may have moved its own
// for a DeleteRecords that never completed, and log starts only go up.
func followerBehind(leader inspected, followers []inspected) string {
	for _, f := range followers {
		if f.view.HighWatermark != leader.view.HighWatermark || f.view.LogStartOffset < leader.view.LogStartOffset {
			return fmt.Sprintf("follower %d has HW %d and log start %d", f.id, f.view.HighWatermark, f.view.LogStartOffset)
		}
	}
	return ""
}

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
