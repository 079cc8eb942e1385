package replica

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPropHighWatermarkAndISR drives one leader with random appends, follower
// fetches, time, ISR proposals, controller answers and pushed states, and
// checks the HW and acks=all rules (SPEC.md §4) after every step:
// the HW never decreases and stays within the log; it advances only while
// the committed ISR is at least min.insync.replicas and only to an offset
// every member of the maximal ISR has reached; an acks=all success is never
// reported before the HW passes the batch; one proposal at most, and every
// ISR keeps the leader.
func TestPropHighWatermarkAndISR(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHWHarness(rt)
		for range rapid.IntRange(1, 80).Draw(rt, "steps") {
			before := h.p.HighWatermark()
			h.step(rt)
			h.checkHighWatermark(rt, before)
			h.checkAcks(rt)
		}
	})
}

type hwHarness struct {
	p        *Partition
	log      *fakeLog
	replicas []int32
	nowMs    int64
	nextReq  uint64
	waiting  map[uint64]int64 // acks=all request → required offset
	// fetched is each follower's offset at its last served fetch, as the
	// harness saw it: the checks do not trust the leader's own records.
	fetched map[int32]int64
}

func newHWHarness(rt *rapid.T) *hwHarness {
	rf := rapid.IntRange(1, 5).Draw(rt, "replication factor")
	cfg := Config{ReplicaID: 1, MinInsyncReplicas: rapid.IntRange(1, rf+1).Draw(rt, "min.insync.replicas"), ReplicaLagTimeMaxMs: 100, AckWaitersMax: 6}
	h := &hwHarness{log: &fakeLog{}, waiting: map[uint64]int64{}, fetched: map[int32]int64{}}
	for id := int32(1); id <= int32(rf); id++ {
		h.replicas = append(h.replicas, id)
	}
	h.log.appendN(0, rapid.IntRange(0, 5).Draw(rt, "records before election"), "old")
	p, err := New(cfg, h.log, rapid.Int64Range(0, 5).Draw(rt, "HW checkpoint"))
	if err != nil {
		rt.Fatal(err)
	}
	h.p = p
	if _, err := p.ApplyState(state(1, 1, 1, h.replicas, h.drawISR(rt)), 0); err != nil {
		rt.Fatal(err)
	}
	return h
}

// drawISR draws an ISR holding the leader.
func (h *hwHarness) drawISR(rt *rapid.T) []int32 {
	isr := []int32{1}
	for _, id := range h.replicas[1:] {
		if rapid.Bool().Draw(rt, fmt.Sprintf("%d in ISR", id)) {
			isr = append(isr, id)
		}
	}
	return isr
}

func (h *hwHarness) step(rt *rapid.T) {
	switch rapid.IntRange(0, 6).Draw(rt, "op") {
	case 0:
		h.produce(rt)
	case 1:
		h.followerFetch(rt)
	case 2:
		h.nowMs += rapid.Int64Range(0, 150).Draw(rt, "elapsed ms")
	case 3:
		h.p.MaybeShrinkISR(h.nowMs)
	case 4:
		h.answerProposal(rt)
	case 5:
		h.p.ExpireAcks(h.nowMs)
	case 6:
		s := h.p.State()
		s.PartitionEpoch++
		s.ISR = h.drawISR(rt)
		if _, err := h.p.ApplyState(s, h.nowMs); err != nil {
			rt.Fatal(err)
		}
	}
}

func (h *hwHarness) produce(rt *rapid.T) {
	acks := rapid.SampledFrom([]int16{AcksNone, AcksLeader, AcksAll}).Draw(rt, "acks")
	epoch, err := h.p.AdmitProduce(acks)
	if err != nil {
		return
	}
	h.log.appendN(epoch, rapid.IntRange(1, 3).Draw(rt, "records"), "new")
	h.nextReq++
	if acks == AcksAll {
		h.waiting[h.nextReq] = h.log.LogEndOffset()
	}
	a := LeaderAppend{LastOffset: h.log.LogEndOffset() - 1, Acks: acks, RequestID: h.nextReq, DeadlineMs: h.nowMs + 200}
	if err := h.p.OnLeaderAppend(a, h.nowMs); err != nil {
		rt.Fatal(err)
	}
}

// followerFetch sends a fetch from a follower whose log is a prefix of the
// leader's, at a random offset: followers may also fall back (a restart).
func (h *hwHarness) followerFetch(rt *rapid.T) {
	if len(h.replicas) == 1 {
		return
	}
	id := rapid.SampledFrom(h.replicas[1:]).Draw(rt, "follower")
	offset := rapid.Int64Range(0, h.log.LogEndOffset()).Draw(rt, "fetch offset")
	last := NoEpoch
	if offset > 0 {
		last = h.log.entries[offset-1].epoch
	}
	d := h.p.OnFollowerFetch(FetchRequest{ReplicaID: id, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: last}, h.nowMs)
	if d.Error != codeNone || d.Diverging {
		rt.Fatalf("fetch at %d with epoch %d refused: %+v", offset, last, d)
	}
	h.fetched[id] = offset
}

func (h *hwHarness) answerProposal(rt *rapid.T) {
	req, ok := h.p.PendingAlterPartition()
	if !ok {
		return
	}
	if !containsID(req.NewISR, 1) {
		rt.Fatalf("proposed ISR %v lacks the leader", req.NewISR)
	}
	resp := AlterPartitionResponse{ProposalID: req.ProposalID, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, ISR: req.NewISR}
	resp.Error = rapid.SampledFrom([]int16{codeNone, codeRequestTimedOut, codeIneligibleReplica, codeInvalidUpdateVersion}).Draw(rt, "answer")
	if err := h.p.OnAlterPartitionResponse(resp, h.nowMs); err != nil {
		rt.Fatal(err)
	}
}

func (h *hwHarness) checkHighWatermark(rt *rapid.T, before int64) {
	hw, leo := h.p.HighWatermark(), h.log.LogEndOffset()
	if hw < before || hw > leo {
		rt.Fatalf("HW moved from %d to %d with LEO %d", before, hw, leo)
	}
	if !containsID(h.p.State().ISR, 1) {
		rt.Fatalf("ISR %v lost the leader", h.p.State().ISR)
	}
	if hw == before {
		return
	}
	if h.p.underMinISR() {
		rt.Fatalf("HW advanced to %d with ISR %v under min.insync.replicas %d", hw, h.p.State().ISR, h.p.effectiveMinISR())
	}
	// The maximal ISR, computed here without maximalISR: committed ISR and
	// any ISR proposed but not yet answered.
	counted := h.p.state.ISR
	if pr := h.p.leader.proposal; pr != nil {
		counted = slices.Compact(sortedCopy(slices.Concat(counted, pr.request.NewISR)))
	}
	for _, id := range counted {
		leo, ok := h.fetched[id]
		if id != 1 && (!ok || leo < hw) {
			rt.Fatalf("HW advanced to %d past ISR member %d (fetched: %v, at %d)", hw, id, ok, leo)
		}
	}
}

func (h *hwHarness) checkAcks(rt *rapid.T) {
	if n := h.p.AckWaiters(); n > h.p.cfg.AckWaitersMax {
		rt.Fatalf("%d waiters, above AckWaitersMax %d", n, h.p.cfg.AckWaitersMax)
	}
	for _, r := range h.p.TakeAckResults() {
		required, ok := h.waiting[r.RequestID]
		if !ok {
			rt.Fatalf("result for unknown or completed request %d", r.RequestID)
		}
		delete(h.waiting, r.RequestID)
		if r.Error == codeNone && (required > h.p.HighWatermark() || len(h.p.maximalISR()) < h.p.effectiveMinISR()) {
			rt.Fatalf("request %d acknowledged at HW %d, ISR %v: it needs HW %d and min ISR %d",
				r.RequestID, h.p.HighWatermark(), h.p.maximalISR(), required, h.p.effectiveMinISR())
		}
	}
}

// history is a pair of replica logs that share a prefix and then hold
// records of disjoint epochs, as any sequence of elections can leave them.
type history struct {
	prefix, leaderTail, followerTail []entry
	leaderEpoch                      int32
	leaderAppends                    int
}

func drawHistory(rt *rapid.T) history {
	var h history
	epoch := int32(rapid.IntRange(0, 2).Draw(rt, "first epoch"))
	for i := range rapid.IntRange(0, 5).Draw(rt, "prefix length") {
		epoch += int32(rapid.IntRange(0, 1).Draw(rt, "prefix epoch step"))
		h.prefix = append(h.prefix, entry{epoch, fmt.Sprintf("p%d", i)})
	}
	// At most one side continues the prefix's last epoch: its leader wrote
	// one sequence of records in that epoch.
	if len(h.prefix) > 0 {
		switch rapid.IntRange(0, 2).Draw(rt, "who continues the last prefix epoch") {
		case 1:
			h.leaderTail = appendEpoch(rt, h.leaderTail, epoch, "a")
		case 2:
			h.followerTail = appendEpoch(rt, h.followerTail, epoch, "b")
		}
	}
	for range rapid.IntRange(0, 4).Draw(rt, "later epochs") {
		epoch += int32(rapid.IntRange(1, 2).Draw(rt, "epoch step"))
		if rapid.Bool().Draw(rt, "epoch on the leader") {
			h.leaderTail = appendEpoch(rt, h.leaderTail, epoch, "a")
		} else {
			h.followerTail = appendEpoch(rt, h.followerTail, epoch, "b")
		}
	}
	h.leaderEpoch = epoch + int32(rapid.IntRange(1, 2).Draw(rt, "new leader epoch step"))
	h.leaderAppends = rapid.IntRange(0, 2).Draw(rt, "appends in the new epoch")
	return h
}

func appendEpoch(rt *rapid.T, tail []entry, epoch int32, side string) []entry {
	for range rapid.IntRange(1, 3).Draw(rt, "records in epoch") {
		tail = append(tail, entry{epoch, fmt.Sprintf("%s%d.%d", side, epoch, len(tail))})
	}
	return tail
}

// TestPropDivergenceConverges: a follower that follows the divergence
// protocol ends with exactly the leader's log, for any pair of epoch
// histories, and never truncates into the common prefix, which holds every
// committed record (KIP-101, KIP-279).
func TestPropDivergenceConverges(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := drawHistory(rt)
		cfg := testConfig(0)
		cfg.MinInsyncReplicas = 1
		l := newNode(1, &fakeLog{entries: slices.Concat(h.prefix, h.leaderTail)}, 0, cfg)
		f := newNode(2, &fakeLog{entries: slices.Concat(h.prefix, h.followerTail)}, 0, cfg)
		s := state(1, h.leaderEpoch, h.leaderEpoch, []int32{1, 2}, []int32{1, 2})
		l.apply(s, 0)
		f.apply(s, 0)
		for i := range h.leaderAppends {
			if err := l.produce(AcksLeader, uint64(i), 0, 0, fmt.Sprintf("n%d", i)); err != nil {
				rt.Fatal(err)
			}
		}
		rounds := 2*len(h.followerTail) + 4
		for round := range rounds {
			_, act, ok := fetchOnce(f, l, int64(round))
			if !ok {
				rt.Fatalf("round %d: the follower does not fetch", round)
			}
			if (act.Kind == ActionTruncate || act.Kind == ActionTruncateFullyAndStartAt) && act.Offset < int64(len(h.prefix)) {
				rt.Fatalf("round %d: truncated to %d, into the common prefix of length %d", round, act.Offset, len(h.prefix))
			}
		}
		if !slices.Equal(f.log.entries, l.log.entries) {
			rt.Fatalf("after %d rounds the follower has %v, the leader %v", rounds, f.log.entries, l.log.entries)
		}
	})
}

// TestPropLeaderEpochOverlay: the leader's epoch lookup answers exactly as
// Kafka's epoch cache does after makeLeader assigned (leader epoch, LEO),
// though this package never writes that entry into the log.
func TestPropLeaderEpochOverlay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		log := &fakeLog{start: rapid.Int64Range(0, 3).Draw(rt, "log start")}
		epoch := int32(0)
		for range rapid.IntRange(0, 8).Draw(rt, "records") {
			epoch += int32(rapid.IntRange(0, 2).Draw(rt, "epoch step"))
			log.append(epoch, "r")
		}
		current := epoch + int32(rapid.IntRange(1, 3).Draw(rt, "leader epoch step"))
		cfg := testConfig(1)
		cfg.MinInsyncReplicas = 1
		n := newNode(1, log, 0, cfg)
		n.apply(state(1, current, current, []int32{1}, []int32{1}), 0)
		kafkaCache := append(log.epochs(), EpochEndOffset{Epoch: current, EndOffset: log.LogEndOffset()})
		for requested := NoEpoch; requested <= current+1; requested++ {
			gotEpoch, gotEnd := n.p.leaderEndOffsetForEpoch(requested, n.p.log.LogEndOffset())
			wantEpoch, wantEnd := endOffsetFor(kafkaCache, requested, log.LogEndOffset())
			if gotEpoch != wantEpoch || gotEnd != wantEnd {
				rt.Fatalf("epoch %d: (%d, %d), Kafka's cache answers (%d, %d); cache %v", requested, gotEpoch, gotEnd, wantEpoch, wantEnd, kafkaCache)
			}
		}
	})
}

// TestPropELRHoldsCommittedRecords models KIP-966 abstractly: records commit
// only while a leader has ISR >= min.insync.replicas, reaching the ISR;
// a replica joining the ISR has caught up; an unclean shutdown loses what
// the replica had not flushed. Invariant: every member of ISR ∪ ELR holds
// every committed record, so clean and ELR elections never lose one.
func TestPropELRHoldsCommittedRecords(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rf := rapid.IntRange(1, 5).Draw(rt, "replication factor")
		pol := ELRPolicy{MinInsyncReplicas: rapid.IntRange(1, rf).Draw(rt, "min.insync.replicas"), ELREnabled: true}
		var replicas []int32
		for id := int32(1); id <= int32(rf); id++ {
			replicas = append(replicas, id)
		}
		s := state(1, 0, 0, replicas, replicas)
		hasAll := map[int32]bool{}
		for _, id := range replicas {
			hasAll[id] = true
		}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			s = elrStep(rt, s, pol, hasAll)
			checkELRState(rt, s, pol, hasAll)
		}
	})
}

func elrStep(rt *rapid.T, s PartitionState, pol ELRPolicy, hasAll map[int32]bool) PartitionState {
	up := func(id int32) bool { return rapid.Bool().Draw(rt, fmt.Sprintf("%d alive", id)) }
	switch rapid.IntRange(0, 3).Draw(rt, "op") {
	case 0: // a record commits
		if s.LeaderID != NoLeader && len(s.ISR) >= pol.effectiveMinISR(s) {
			for _, id := range s.Replicas {
				hasAll[id] = hasAll[id] && containsID(s.ISR, id)
			}
		}
	case 1: // the leader admits a caught-up replica
		id := rapid.SampledFrom(s.Replicas).Draw(rt, "joining")
		if s.LeaderID != NoLeader && !containsID(s.ISR, id) {
			hasAll[id] = true
			s = ChangeISR(s, withID(s.ISR, id), nil, pol)
		}
	case 2: // a replica leaves the ISR (lagging or fenced), maybe uncleanly
		id := rapid.SampledFrom(s.Replicas).Draw(rt, "leaving")
		var unclean []int32
		if rapid.Bool().Draw(rt, "unclean shutdown") {
			hasAll[id] = false
			unclean = []int32{id}
			s, _ = RecordUncleanShutdown(s, id)
		}
		s = ChangeISR(s, withoutIDs(s.ISR, []int32{id}), unclean, pol)
		if s.LeaderID == id {
			var kind ElectionKind
			s, kind = Elect(s, pol, func(r int32) bool { return r != id && up(r) })
			afterElection(rt, s, kind, hasAll)
		}
	case 3: // an election with some replicas down
		var kind ElectionKind
		s, kind = Elect(s, pol, up)
		afterElection(rt, s, kind, hasAll)
	}
	return s
}

// afterElection checks that a clean or ELR election chose a replica holding
// every committed record. A last-known-ELR election happens only after every
// replica that held them shut down uncleanly (over the fault budget): what
// the new leader holds becomes what is committed, and the others must catch
// up again to rejoin.
func afterElection(rt *rapid.T, s PartitionState, kind ElectionKind, hasAll map[int32]bool) {
	switch kind {
	case ElectionClean, ElectionFromELR:
		if !hasAll[s.LeaderID] {
			rt.Fatalf("%v election chose %d, which lacks committed records", kind, s.LeaderID)
		}
	case ElectionLastKnownELR:
		if len(s.ISR) != 1 || s.ISR[0] != s.LeaderID || len(s.ELR) != 0 {
			rt.Fatalf("last-known-ELR election of %d left ISR %v ELR %v", s.LeaderID, s.ISR, s.ELR)
		}
		for _, id := range s.Replicas {
			hasAll[id] = id == s.LeaderID
		}
	}
}

func checkELRState(rt *rapid.T, s PartitionState, pol ELRPolicy, hasAll map[int32]bool) {
	if s.LeaderID != NoLeader {
		if err := s.validate(s.LeaderID); err != nil {
			rt.Fatalf("a controller could not push %+v: %v", s, err)
		}
	}
	if id, both := firstNotIn(s.ELR, withoutIDs(s.ELR, s.ISR)); both {
		rt.Fatalf("replica %d in both ISR %v and ELR %v", id, s.ISR, s.ELR)
	}
	if len(s.ISR) >= pol.effectiveMinISR(s) && len(s.ELR) > 0 {
		rt.Fatalf("ELR %v kept with ISR %v at min ISR %d", s.ELR, s.ISR, pol.effectiveMinISR(s))
	}
	for _, id := range slices.Concat(s.ISR, s.ELR) {
		if !hasAll[id] {
			rt.Fatalf("replica %d in ISR %v / ELR %v lacks committed records", id, s.ISR, s.ELR)
		}
	}
}
