package replica

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// leaderAtEpoch5 leads epoch 5 over replicas 1, 2, 3 with a log holding
// epoch 3 at offsets 1..2 and epoch 5 at 3..4 (log start 1, LEO 5).
func leaderAtEpoch5(cfg Config) *node {
	l := newNode(1, &fakeLog{start: 1}, 0, cfg)
	l.log.append(3, "a", "b")
	l.apply(state(1, 5, 5, []int32{1, 2, 3}, []int32{1, 2, 3}), 0)
	l.log.append(5, "c", "d")
	return l
}

func TestFollowerFetchDecisions(t *testing.T) {
	cases := []struct {
		name string
		req  FetchRequest
		want FetchDecision // only Error, Diverging, DivergingEpoch, Read* compared
	}{
		{"older epoch", FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3}, FetchDecision{Error: codeFencedLeaderEpoch}},
		{"newer epoch", FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 6, LastFetchedEpoch: 3}, FetchDecision{Error: codeUnknownLeaderEpoch}},
		{"unassigned replica", FetchRequest{ReplicaID: 9, FetchOffset: 3, CurrentLeaderEpoch: 5, LastFetchedEpoch: 3}, FetchDecision{Error: codeUnknownLeaderEpoch}},
		{"unassigned replica, no epoch", FetchRequest{ReplicaID: 9, FetchOffset: 3, CurrentLeaderEpoch: NoEpoch, LastFetchedEpoch: NoEpoch}, FetchDecision{Error: codeNotLeaderOrFollower}},
		{"below log start", FetchRequest{ReplicaID: 2, FetchOffset: 0, CurrentLeaderEpoch: 5, LastFetchedEpoch: NoEpoch}, FetchDecision{Error: codeOffsetOutOfRange}},
		{"below log start, diverging too", FetchRequest{ReplicaID: 2, FetchOffset: 0, CurrentLeaderEpoch: 5, LastFetchedEpoch: 4}, FetchDecision{Error: codeOffsetOutOfRange}},
		{"above LEO without epoch", FetchRequest{ReplicaID: 2, FetchOffset: 6, CurrentLeaderEpoch: 5, LastFetchedEpoch: NoEpoch}, FetchDecision{Error: codeOffsetOutOfRange}},
		{"epoch unknown to leader", FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 5, LastFetchedEpoch: 4}, FetchDecision{Diverging: true, DivergingEpoch: EpochEndOffset{Epoch: 3, EndOffset: 3}}},
		{"past the epoch's end", FetchRequest{ReplicaID: 2, FetchOffset: 4, CurrentLeaderEpoch: 5, LastFetchedEpoch: 3}, FetchDecision{Diverging: true, DivergingEpoch: EpochEndOffset{Epoch: 3, EndOffset: 3}}},
		{"last fetched epoch after ours", FetchRequest{ReplicaID: 2, FetchOffset: 5, CurrentLeaderEpoch: 5, LastFetchedEpoch: 6}, FetchDecision{Error: codeOffsetOutOfRange}},
		{"consistent", FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 5, LastFetchedEpoch: 3}, FetchDecision{ReadFromOffset: 3, ReadToOffset: 5}},
		{"at LEO", FetchRequest{ReplicaID: 3, FetchOffset: 5, CurrentLeaderEpoch: 5, LastFetchedEpoch: 5}, FetchDecision{ReadFromOffset: 5, ReadToOffset: 5}},
	}
	for _, c := range cases {
		l := leaderAtEpoch5(testConfig(1))
		got := l.p.OnFollowerFetch(c.req, 1)
		if got.Error != c.want.Error || got.Diverging != c.want.Diverging || got.DivergingEpoch != c.want.DivergingEpoch ||
			got.ReadFromOffset != c.want.ReadFromOffset || got.ReadToOffset != c.want.ReadToOffset {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if got.LogStartOffset != 1 || got.LogEndOffset != 5 {
			t.Errorf("%s: leader offsets %d..%d, want 1..5", c.name, got.LogStartOffset, got.LogEndOffset)
		}
		if f := l.p.leader.progress(c.req.ReplicaID); f != nil && (got.Error != codeNone || got.Diverging) && f.logEndOffset != NoOffset {
			t.Errorf("%s: a refused fetch recorded follower LEO %d", c.name, f.logEndOffset)
		}
	}
}

func TestNoFencingBugServesStaleEpochs(t *testing.T) {
	cfg := testConfig(1)
	cfg.Bugs.NoFencing = true
	l := leaderAtEpoch5(cfg)
	got := l.p.OnFollowerFetch(FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3}, 1)
	if got.Error != codeNone || !got.ShouldRead() {
		t.Errorf("no-fencing: stale-epoch fetch answered %+v, want it served", got)
	}
}

func TestFollowerReplicaRefusesFetches(t *testing.T) {
	f := newNode(2, nil, 0, testConfig(2))
	f.apply(state(1, 5, 5, []int32{1, 2, 3}, []int32{1, 2, 3}), 0)
	if got := f.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, CurrentLeaderEpoch: 5, LastFetchedEpoch: NoEpoch}, 1); got.Error != codeNotLeaderOrFollower {
		t.Errorf("follower answered a fetch with %+v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	if got := f.p.OnConsumerFetch(0, NoEpoch); got.Error != codeNotLeaderOrFollower {
		t.Errorf("follower answered a consumer with %+v, want NOT_LEADER_OR_FOLLOWER", got)
	}
}

// TestConsumersNeverSeePastHighWatermark: SPEC.md §4, LEO is for replicas.
func TestConsumersNeverSeePastHighWatermark(t *testing.T) {
	l := newNode(1, nil, 0, testConfig(1))
	f := newNode(2, nil, 0, testConfig(2))
	s := state(1, 0, 0, []int32{1, 2}, []int32{1, 2})
	l.apply(s, 0)
	f.apply(s, 0)
	must(t, l.produce(AcksAll, 1, 0, 100, "a", "b"))
	fetchOnce(f, l, 1)
	fetchOnce(f, l, 2) // HW 2
	must(t, l.produce(AcksAll, 2, 3, 100, "c"))
	cases := []struct {
		offset   int64
		code     int16
		from, to int64
	}{
		{0, codeNone, 0, 2},
		{2, codeNone, 2, 2}, // at HW, below LEO: valid, nothing to read
		{3, codeNone, 3, 3}, // at LEO
		{4, codeOffsetOutOfRange, 0, 0},
	}
	for _, c := range cases {
		d := l.p.OnConsumerFetch(c.offset, 0)
		if d.Error != c.code || (c.code == codeNone && (d.ReadFromOffset != c.from || d.ReadToOffset != c.to)) {
			t.Errorf("consumer fetch at %d: %+v, want code %d reading [%d, %d)", c.offset, d, c.code, c.from, c.to)
		}
		if d.ReadToOffset > l.p.HighWatermark() && d.ShouldRead() {
			t.Errorf("consumer fetch at %d reads to %d, past HW %d", c.offset, d.ReadToOffset, l.p.HighWatermark())
		}
	}
}

// TestLeaderDropsBatchesFromEpochAboveItsOwn is simulator seed 203
// (elections shape, over budget): a bit flip in the PartitionLeaderEpoch of
// the last batch (outside the batch CRC, so recovery kept it) turned epoch 1
// into 1+2^17 on the replica later elected leader in epoch 3 with ISR [self]
// and min.insync.replicas 2. Followers copied the batch, fetched with that
// last fetched epoch, got OFFSET_OUT_OF_RANGE, dropped it and fetched it
// again, forever (about 650 fetches a second), never reached the epoch start
// offset, so the ISR never grew and no acks=all write was accepted again.
// The leader must drop the batch from the impossible epoch when it takes
// over; then both followers converge and join the ISR.
func TestLeaderDropsBatchesFromEpochAboveItsOwn(t *testing.T) {
	const flipped = 1 + 1<<17
	cfg := testConfig(0) // min.insync.replicas 2
	leader := newNode(1, &fakeLog{}, 0, cfg)
	leader.log.append(0, "m1", "m2")
	leader.log.append(1, "m3")
	leader.log.append(flipped, "m4")
	behind := newNode(2, &fakeLog{}, 0, cfg)
	behind.log.append(0, "m1", "m2")
	behind.log.append(1, "m3")
	copied := newNode(3, &fakeLog{}, 0, cfg) // holds a copy of the bad batch
	copied.log.entries = slices.Clone(leader.log.entries)

	s := state(1, 3, 5, []int32{1, 2, 3}, []int32{1})
	if tr := leader.apply(s, 0); tr.TruncateToOffset != 3 {
		t.Errorf("new leader's transition truncates to %d, want 3 (drop the batch from epoch %d)", tr.TruncateToOffset, flipped)
	}
	if hw := leader.p.HighWatermark(); hw > 3 {
		t.Errorf("leader HW %d after truncating to 3", hw)
	}
	behind.apply(s, 0)
	copied.apply(s, 0)
	if err := leader.produce(1, 1, 1, 1000, "m5"); err != nil {
		t.Fatalf("acks=1 produce on the new leader: %v", err)
	}

	for now := int64(2); now < 40; now++ {
		fetchOnce(behind, leader, now)
		fetchOnce(copied, leader, now)
		if req, ok := leader.p.PendingAlterPartition(); ok {
			resp := AlterPartitionResponse{ProposalID: req.ProposalID, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, ISR: req.NewISR}
			if err := leader.p.OnAlterPartitionResponse(resp, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []entry{{0, "m1"}, {0, "m2"}, {1, "m3"}, {3, "m5"}}
	for _, n := range []*node{leader, behind, copied} {
		if diff := cmp.Diff(want, n.log.entries, cmp.AllowUnexported(entry{})); diff != "" {
			t.Errorf("replica %d's log (-want +got):\n%s", n.id, diff)
		}
	}
	if isr := leader.p.State().ISR; !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Errorf("ISR %v, want [1 2 3]: both followers caught up", isr)
	}
	if hw := leader.p.HighWatermark(); hw != 4 {
		t.Errorf("leader HW %d, want its LEO 4", hw)
	}
}

// A follower that may lead without an unclean election (ISR or ELR) holds
// the DeleteRecords low watermark back even while its broker is fenced:
// elected once the leader fails, it would serve the deleted records again
// (simulator seed 888). Other fenced followers do not hold it back, as in
// Kafka; live ones do.
func TestLowWatermarkCountsFencedReplicasThatMayLead(t *testing.T) {
	cases := []struct {
		name   string
		isr    []int32
		elr    []int32
		alive3 bool
		want   int64
	}{
		{"fenced, in the ELR", []int32{1, 2}, []int32{3}, false, 1},
		{"fenced, in the ISR", []int32{1, 2, 3}, nil, false, 1},
		{"fenced, neither", []int32{1, 2}, nil, false, 3},
		{"alive, neither", []int32{1, 2}, nil, true, 1},
	}
	for _, c := range cases {
		l := leaderAtEpoch5(testConfig(1))
		for _, id := range []int32{2, 3} {
			if d := l.p.OnFollowerFetch(FetchRequest{ReplicaID: id, FetchOffset: 5, CurrentLeaderEpoch: 5, LastFetchedEpoch: 5, LogStartOffset: 1}, 1); d.Error != codeNone {
				t.Fatalf("%s: replica %d's fetch answered %d", c.name, id, d.Error)
			}
		}
		l.log.start = 3 // DeleteRecords to 3; replica 2 learns it, 3 does not
		if d := l.p.OnFollowerFetch(FetchRequest{ReplicaID: 2, FetchOffset: 5, CurrentLeaderEpoch: 5, LastFetchedEpoch: 5, LogStartOffset: 3}, 2); d.Error != codeNone {
			t.Fatalf("%s: replica 2's second fetch answered %d", c.name, d.Error)
		}
		s := state(1, 5, 6, []int32{1, 2, 3}, c.isr)
		s.ELR = c.elr
		l.apply(s, 3)
		alive := func(id int32) bool { return id == 1 || id == 2 || (id == 3 && c.alive3) }
		got, ok := l.p.LowWatermark(alive)
		if !ok || got != c.want {
			t.Errorf("%s: low watermark %d (leader %v), want %d", c.name, got, ok, c.want)
		}
	}
}
