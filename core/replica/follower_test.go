package replica

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func values(l *fakeLog) []string {
	var out []string
	for _, e := range l.entries {
		out = append(out, e.value)
	}
	return out
}

// TestKIP101Scenario1 is KIP-101's "high watermark truncation followed by
// immediate leader election": a follower holds an acknowledged record above
// its stale HW, restarts, and becomes leader. With leader epochs it keeps
// the record; with the planted hw-truncation bug it loses it.
func TestKIP101Scenario1(t *testing.T) {
	for _, bug := range []bool{false, true} {
		cfg := testConfig(0)
		cfg.Bugs.HWTruncation = bug
		a, b := newNode(1, nil, 0, cfg), newNode(2, nil, 0, cfg)
		s0 := state(1, 0, 0, []int32{1, 2}, []int32{1, 2})
		a.apply(s0, 0)
		b.apply(s0, 0)
		must(t, a.produce(AcksAll, 1, 0, 1000, "m1"))
		fetchOnce(b, a, 1) // b appends m1
		fetchOnce(b, a, 2) // HW 1, and b learns it
		must(t, a.produce(AcksAll, 2, 3, 1000, "m2"))
		fetchOnce(b, a, 4) // b appends m2
		// b's next fetch advances the leader's HW to 2 and acknowledges m2,
		// but b crashes before the response arrives.
		_, req, _ := b.p.NextFetch()
		a.p.OnFollowerFetch(req, 5)
		if got := a.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{1, 0}, {2, 0}}) {
			t.Fatalf("bug=%v: acks %v, want m1 and m2 acknowledged", bug, got)
		}
		if b.p.HighWatermark() != 1 {
			t.Fatalf("bug=%v: follower HW %d, want the stale 1", bug, b.p.HighWatermark())
		}
		// b restarts with HW checkpoint 1, becomes follower again, then the
		// leader dies and b is elected.
		b = newNode(2, b.log, 1, cfg)
		b.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 10)
		b.apply(state(2, 1, 1, []int32{1, 2}, []int32{2}), 11)
		want := []string{"m1", "m2"}
		if bug {
			want = []string{"m1"} // the acknowledged m2 is lost
		}
		if diff := cmp.Diff(want, values(b.log)); diff != "" {
			t.Errorf("bug=%v: new leader's log (-want +got):\n%s", bug, diff)
		}
	}
}

// TestKIP101Scenario2 is KIP-101's "replica divergence on restart": after a
// power loss the new leader writes a different record at an offset another
// replica still holds. The returning replica must truncate by epoch; with
// the planted hw-truncation bug the logs stay silently different.
func TestKIP101Scenario2(t *testing.T) {
	for _, bug := range []bool{false, true} {
		cfg := testConfig(0)
		cfg.MinInsyncReplicas = 1
		cfg.Bugs.HWTruncation = bug
		// A led epoch 0 and has m1, m2 with HW 2; B lost m2 in the power loss.
		a := newNode(1, &fakeLog{}, 0, cfg)
		a.log.append(0, "m1", "m2")
		b := newNode(2, &fakeLog{}, 0, cfg)
		b.log.append(0, "m1")
		a = newNode(1, a.log, 2, cfg)
		b = newNode(2, b.log, 1, cfg)
		// B comes back first and leads epoch 1; it takes m3 at offset 1.
		b.apply(state(2, 1, 1, []int32{1, 2}, []int32{2}), 0)
		must(t, b.produce(AcksLeader, 1, 0, 1000, "m3"))
		// A comes back as a follower.
		a.apply(state(2, 1, 1, []int32{1, 2}, []int32{2}), 1)
		for now := int64(2); now < 6; now++ {
			fetchOnce(a, b, now)
		}
		same := cmp.Equal(values(a.log), values(b.log))
		if !bug && !same {
			t.Errorf("logs diverge: follower %v, leader %v", values(a.log), values(b.log))
		}
		if bug && same {
			t.Errorf("bug=hw-truncation: logs converged to %v, want the silent divergence KIP-101 describes", values(a.log))
		}
	}
}

// TestKIP279FollowerUsesOwnEpochEnd is KIP-279's fast-failover case: the
// follower wrote an epoch the new leader never saw, so the leader's end
// offset for the common epoch is past the follower's own. Truncating to the
// leader's offset would keep a record the leader does not have.
func TestKIP279FollowerUsesOwnEpochEnd(t *testing.T) {
	for _, leaderAppended := range []bool{false, true} {
		cfg := testConfig(0)
		cfg.MinInsyncReplicas = 1
		a := newNode(1, &fakeLog{}, 0, cfg)
		a.log.append(1, "x", "y", "z") // A led epoch 1
		b := newNode(2, &fakeLog{}, 0, cfg)
		b.log.append(1, "x", "y") // B got x, y
		b.log.append(2, "w")      // then led epoch 2 alone
		a.apply(state(1, 3, 3, []int32{1, 2}, []int32{1}), 0)
		b.apply(state(1, 3, 3, []int32{1, 2}, []int32{1}), 0)
		if leaderAppended {
			must(t, a.produce(AcksLeader, 1, 0, 1000, "v"))
		}
		d, act, _ := fetchOnce(b, a, 1)
		if !d.Diverging || d.DivergingEpoch != (EpochEndOffset{Epoch: 1, EndOffset: 3}) {
			t.Fatalf("leaderAppended=%v: leader answered %+v, want DivergingEpoch{1, 3}", leaderAppended, d)
		}
		if act.Kind != ActionTruncate || act.Offset != 2 {
			t.Fatalf("leaderAppended=%v: follower action %+v, want truncate to its own end of epoch 1, 2", leaderAppended, act)
		}
		for now := int64(2); now < 5; now++ {
			fetchOnce(b, a, now)
		}
		if diff := cmp.Diff(values(a.log), values(b.log)); diff != "" {
			t.Errorf("leaderAppended=%v: follower log differs (-leader +follower):\n%s", leaderAppended, diff)
		}
	}
}

func TestNextFetchCarriesLEOAndEpochs(t *testing.T) {
	cfg := testConfig(0)
	cfg.BrokerEpoch = 42
	f := newNode(2, &fakeLog{start: 5}, 0, cfg)
	f.log.append(3, "a", "b")
	f.apply(state(1, 4, 7, []int32{1, 2}, []int32{1, 2}), 0)
	leader, req, ok := f.p.NextFetch()
	want := FetchRequest{ReplicaID: 2, ReplicaEpoch: 42, FetchOffset: 7, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3, LogStartOffset: 5}
	if !ok || leader != 1 || req != want {
		t.Fatalf("NextFetch = %d, %+v, %v; want 1, %+v, true", leader, req, ok, want)
	}
}

func TestFollowerResponseHandling(t *testing.T) {
	cases := []struct {
		name string
		resp FetchDecision
		want FollowerAction
		// fetchAfter is whether the follower fetches again without a new state.
		fetchAfter bool
	}{
		{"served", FetchDecision{ReadFromOffset: 4, ReadToOffset: 6, HighWatermark: 5, LogStartOffset: 1}, FollowerAction{Kind: ActionAppend, LogStartOffset: 1}, true},
		{"fenced", FetchDecision{Error: codeFencedLeaderEpoch}, FollowerAction{Kind: ActionAwaitState}, false},
		{"unknown epoch", FetchDecision{Error: codeUnknownLeaderEpoch}, FollowerAction{Kind: ActionBackoff}, true},
		{"not leader", FetchDecision{Error: codeNotLeaderOrFollower}, FollowerAction{Kind: ActionBackoff}, true},
		{"below leader log start", FetchDecision{Error: codeOffsetOutOfRange, LogStartOffset: 9, LogEndOffset: 12}, FollowerAction{Kind: ActionTruncateFullyAndStartAt, Offset: 9}, true},
		{"above leader LEO", FetchDecision{Error: codeOffsetOutOfRange, LogStartOffset: 0, LogEndOffset: 2}, FollowerAction{Kind: ActionTruncate, Offset: 2}, true},
		{"in range after all", FetchDecision{Error: codeOffsetOutOfRange, LogStartOffset: 0, LogEndOffset: 8}, FollowerAction{Kind: ActionBackoff}, true},
		{"malformed diverging", FetchDecision{Diverging: true, DivergingEpoch: EpochEndOffset{Epoch: NoEpoch, EndOffset: -7}}, FollowerAction{Kind: ActionBackoff}, true},
	}
	for _, c := range cases {
		f := newNode(2, &fakeLog{}, 0, testConfig(0))
		f.log.append(0, "a", "b", "c", "d")
		f.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0)
		_, req, _ := f.p.NextFetch()
		if got := f.p.OnFetchResponse(req, c.resp); got != c.want {
			t.Errorf("%s: action %+v, want %+v", c.name, got, c.want)
		}
		if _, _, ok := f.p.NextFetch(); ok != c.fetchAfter {
			t.Errorf("%s: fetches again = %v, want %v", c.name, ok, c.fetchAfter)
		}
	}
}

// TestFollowerTruncatesEpochAboveLeaders is simulator seed 1015 (standard
// shape): a bit flip in a batch's PartitionLeaderEpoch, which the CRC does
// not cover, turned epoch 1 into 2049 on a follower's disk, and recovery
// kept the batch as the log's last. The leader, in epoch 1, answers every
// fetch with LastFetchedEpoch 2049 with OFFSET_OUT_OF_RANGE; the follower's
// LEO lies inside the leader's range, so it used to back off and ask the
// same again forever. It must drop the batch from the impossible epoch on
// and catch up.
func TestFollowerTruncatesEpochAboveLeaders(t *testing.T) {
	cfg := testConfig(0)
	cfg.MinInsyncReplicas = 1
	leader := newNode(1, &fakeLog{}, 0, cfg)
	leader.log.append(0, "m1", "m2")
	leader.log.append(1, "m3", "m4", "m5", "m6")
	follower := newNode(2, &fakeLog{}, 0, cfg)
	follower.log.append(0, "m1", "m2")
	follower.log.append(1, "m3")
	follower.log.append(1+2048, "m4") // the flipped epoch field
	leader = newNode(1, leader.log, 6, cfg)
	leader.apply(state(1, 1, 1, []int32{1, 2}, []int32{1}), 0)
	follower.apply(state(1, 1, 1, []int32{1, 2}, []int32{1}), 0)

	d, act, ok := fetchOnce(follower, leader, 1)
	if !ok || d.Error != codeOffsetOutOfRange {
		t.Fatalf("first fetch: sent %v, leader's error %d; want OFFSET_OUT_OF_RANGE (%d)", ok, d.Error, codeOffsetOutOfRange)
	}
	if want := (FollowerAction{Kind: ActionTruncate, Offset: 3}); act != want {
		t.Fatalf("follower's action %+v, want %+v (drop the batch from epoch 2049)", act, want)
	}
	for now := int64(2); now < 6; now++ {
		fetchOnce(follower, leader, now)
	}
	if diff := cmp.Diff(leader.log.entries, follower.log.entries, cmp.AllowUnexported(entry{})); diff != "" {
		t.Errorf("follower did not converge (-leader +follower):\n%s", diff)
	}
	if hw := follower.p.HighWatermark(); hw != 6 {
		t.Errorf("follower HW %d, want the leader's 6", hw)
	}
}

func TestFollowerIgnoresStaleResponses(t *testing.T) {
	f := newNode(2, &fakeLog{}, 0, testConfig(0))
	f.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0)
	_, req, _ := f.p.NextFetch()
	f.apply(state(1, 1, 1, []int32{1, 2}, []int32{1, 2}), 1) // new epoch meanwhile
	if got := f.p.OnFetchResponse(req, FetchDecision{Diverging: true}); got.Kind != ActionIgnore {
		t.Errorf("response to an old-epoch request: %+v, want ignore", got)
	}
	_, req, _ = f.p.NextFetch()
	f.log.append(1, "moved") // the log moved since the request
	if got := f.p.OnFetchResponse(req, FetchDecision{}); got.Kind != ActionIgnore {
		t.Errorf("response to an old offset: %+v, want ignore", got)
	}
}

func TestFollowerHighWatermark(t *testing.T) {
	f := newNode(2, &fakeLog{}, 0, testConfig(0))
	f.log.append(0, "a", "b", "c")
	f.apply(state(1, 0, 0, []int32{1, 2}, []int32{1, 2}), 0)
	f.p.OnFollowerAppend(10) // leader HW past our LEO
	if got := f.p.HighWatermark(); got != 3 {
		t.Errorf("HW %d, want min(leader HW 10, LEO 3) = 3", got)
	}
	f.p.OnFollowerAppend(1) // an older leader HW never lowers it
	if got := f.p.HighWatermark(); got != 3 {
		t.Errorf("HW %d after an older leader HW, want 3", got)
	}
	_, req, _ := f.p.NextFetch()
	act := f.p.OnFetchResponse(req, FetchDecision{Diverging: true, DivergingEpoch: EpochEndOffset{Epoch: 0, EndOffset: 2}})
	if act != (FollowerAction{Kind: ActionTruncate, Offset: 2}) || f.p.HighWatermark() != 2 {
		t.Errorf("after divergence: action %+v HW %d, want truncate to 2 and HW 2", act, f.p.HighWatermark())
	}
}

func TestDivergenceTruncationOffset(t *testing.T) {
	log := &fakeLog{}
	log.append(1, "a", "b")      // epoch 1 at 0..1
	log.append(3, "c", "d", "e") // epoch 3 at 2..4
	cases := []struct {
		d    EpochEndOffset
		want int64
	}{
		{EpochEndOffset{Epoch: 1, EndOffset: 1}, 1}, // leader's epoch 1 ends first
		{EpochEndOffset{Epoch: 1, EndOffset: 4}, 2}, // ours ends first (KIP-279)
		{EpochEndOffset{Epoch: 2, EndOffset: 4}, 2}, // we lack epoch 2: end of epoch 1
		{EpochEndOffset{Epoch: 0, EndOffset: 9}, 0}, // below our epochs: our first start
		{EpochEndOffset{Epoch: 3, EndOffset: 9}, 5}, // never past LEO
	}
	for _, c := range cases {
		if got := divergenceTruncationOffset(c.d, log); got != c.want {
			t.Errorf("diverging %+v: truncate to %d, want %d", c.d, got, c.want)
		}
	}
	if got := divergenceTruncationOffset(EpochEndOffset{Epoch: 2, EndOffset: 1}, &fakeLog{start: 3}); got != 1 {
		t.Errorf("empty log: truncate to %d, want the leader's 1", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
