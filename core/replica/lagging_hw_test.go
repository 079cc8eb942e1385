package replica

import "testing"

// TestNewLeaderHighWatermarkLagsEpochStart: a follower that becomes leader
// keeps its own HW, which may lag what the previous leader committed, until
// every ISR member has fetched in its epoch; meanwhile its HW is lagging
// (KIP-207: ListOffsets answers OFFSET_NOT_AVAILABLE), and a consumer's
// Fetch still gets the lagging HW, as Kafka's does. The planted bug
// hw-regress never reports the lag.
func TestNewLeaderHighWatermarkLagsEpochStart(t *testing.T) {
	for _, bug := range []bool{false, true} {
		cfg := testConfig(2)
		cfg.Bugs.HWRegress = bug
		log := &fakeLog{}
		log.append(0, "a", "b", "c", "d")
		f := newNode(2, log, 2, cfg) // HW 2: the old leader's HW of 4 never reached it
		f.apply(state(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2, 3}), 0)
		if f.p.LaggingHighWatermark() {
			t.Fatal("a follower reports a lagging leader HW")
		}
		f.apply(state(2, 1, 1, []int32{1, 2, 3}, []int32{2, 3}), 0)
		if start, ok := f.p.EpochStartOffset(); !ok || start != 4 {
			t.Fatalf("epoch start %d %v, want 4", start, ok)
		}
		if got := f.p.LaggingHighWatermark(); got == bug {
			t.Fatalf("bug=%v: HW %d below the epoch start 4: lagging %v", bug, f.p.HighWatermark(), got)
		}
		if d := f.p.OnConsumerFetch(4, 1); d.Error != codeNone || d.HighWatermark != 2 {
			t.Fatalf("a consumer's fetch while the HW lags: %+v, want HW 2 and no error", d)
		}
		f.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 4, CurrentLeaderEpoch: 1, LastFetchedEpoch: 0}, 1)
		if f.p.HighWatermark() != 4 || f.p.LaggingHighWatermark() {
			t.Fatalf("after the ISR fetched in the epoch: HW %d, lagging %v; want 4, false", f.p.HighWatermark(), f.p.LaggingHighWatermark())
		}
	}
}
