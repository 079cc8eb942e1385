package producer

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
)

// checkFixture is producer 7 at epoch 2 with six batches of 2 records
// (sequences 0..11 at offsets 0..11): the first batch is no longer retained.
func checkFixture(t *testing.T, cfg Config) *State {
	s := NewState(cfg, 0)
	for seq := int32(0); seq < 12; seq += 2 {
		mustAppend(t, s, header(7, 2, seq, 2))
	}
	return s
}

func TestCheckVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h        batch.Header
		want     Verdict
		wantCode *kerr.Error
	}{
		{"no producer id", header(NoProducerID, -1, -1, 3), Verdict{Kind: NotIdempotent}, nil},
		{"new producer at 0", header(8, 0, 0, 1), Verdict{Kind: Append}, nil},
		{"new producer at any sequence (KIP-360: no UNKNOWN_PRODUCER_ID)", header(8, 0, 42, 1), Verdict{Kind: Append}, nil},
		{"next in sequence", header(7, 2, 12, 3), Verdict{Kind: Append}, nil},
		{"retry of the last batch", header(7, 2, 10, 2), Verdict{Kind: Duplicate,
			Original: BatchMetadata{LastSequence: 11, LastOffset: 11, OffsetDelta: 1, TimestampMs: 1000}}, nil},
		{"retry of the oldest retained batch", header(7, 2, 2, 2), Verdict{Kind: Duplicate,
			Original: BatchMetadata{LastSequence: 3, LastOffset: 3, OffsetDelta: 1, TimestampMs: 1000}}, nil},
		{"retry of a batch no longer retained", header(7, 2, 0, 2), Verdict{}, kerr.OutOfOrderSequenceNumber},
		{"gap", header(7, 2, 13, 1), Verdict{}, kerr.OutOfOrderSequenceNumber},
		{"overlapping a retained batch, not its range", header(7, 2, 10, 1), Verdict{}, kerr.OutOfOrderSequenceNumber},
		{"older epoch", header(7, 1, 12, 1), Verdict{}, kerr.InvalidProducerEpoch},
		{"older epoch with a retained range", header(7, 1, 10, 2), Verdict{}, kerr.InvalidProducerEpoch},
		{"newer epoch at 0", header(7, 3, 0, 1), Verdict{Kind: Append}, nil},
		{"newer epoch not at 0", header(7, 3, 12, 1), Verdict{}, kerr.OutOfOrderSequenceNumber},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := checkFixture(t, testConfig())
			before := s.Entries()
			v, err := s.Check(tc.h)
			if tc.wantCode != nil {
				var perr *Error
				if !errors.Is(err, tc.wantCode) || !errors.As(err, &perr) || perr.ProducerID != tc.h.ProducerID {
					t.Fatalf("got %v, %v; want %v", v, err, tc.wantCode)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Fatal(diff)
			}
			if diff := cmp.Diff(before, s.Entries()); diff != "" {
				t.Fatalf("Check changed the state: %s", diff)
			}
		})
	}
}

func TestCheckSequenceWrapsAtMaxInt32(t *testing.T) {
	s := NewState(testConfig(), 0)
	mustAppend(t, s, header(1, 0, math.MaxInt32-1, 4)) // sequences MaxInt32-1, MaxInt32, 0, 1
	e, _ := s.Entry(1)
	if got := e.Batches[0]; got.LastSequence != 1 || got.FirstSequence() != math.MaxInt32-1 {
		t.Fatalf("wrapped batch %+v, first %d", got, got.FirstSequence())
	}
	if v, err := s.Check(header(1, 0, math.MaxInt32-1, 4)); err != nil || v.Kind != Duplicate || v.Original.FirstOffset() != 0 {
		t.Fatalf("retry of the wrapped batch: %v, %v", v, err)
	}
	mustAppend(t, s, header(1, 0, 2, 1))

	s = NewState(testConfig(), 0)
	mustAppend(t, s, header(2, 0, math.MaxInt32, 1))
	if v, err := s.Check(header(2, 0, 0, 1)); err != nil || v.Kind != Append {
		t.Fatalf("0 after MaxInt32: %v, %v", v, err)
	}
	if _, err := s.Check(header(2, 0, math.MaxInt32, 2)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("MaxInt32 again with another range: %v", err)
	}
}

func TestCheckBoundsProducers(t *testing.T) {
	s := NewState(testConfig(), 0) // ProducersMax 4
	for id := int64(1); id <= 4; id++ {
		mustAppend(t, s, header(id, 0, 0, 1))
	}
	_, err := s.Check(header(5, 0, 0, 1))
	if !errors.Is(err, ErrTooManyProducers) || !errors.Is(err, CodeTooManyProducers) {
		t.Fatalf("fifth producer: %v", err)
	}
	if v, err := s.Check(header(4, 0, 1, 1)); err != nil || v.Kind != Append {
		t.Fatalf("known producer in a full partition: %v, %v", v, err)
	}
	// Replication must not fail on the bound: it evicts the producer with the
	// oldest timestamp, the lowest id among equals.
	h := header(5, 0, 0, 1)
	h.BaseOffset = s.MapEndOffset()
	if err := s.UpdateFromReplicated(h); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Entry(1); ok || s.ProducerCount() != 4 {
		t.Fatalf("after a replicated fifth producer: %v", s.Entries())
	}
}

func TestDedupOffAppendsRetries(t *testing.T) {
	cfg := testConfig()
	cfg.DedupOff = true
	s := checkFixture(t, cfg)
	if v, err := s.Check(header(7, 2, 10, 2)); err != nil || v.Kind != Append {
		t.Fatalf("with %s a retry must be appended again: %v, %v", BugDedupOff, v, err)
	}
}

func TestUpdateRetainsFiveBatchesAndResetsOnNewEpoch(t *testing.T) {
	s := checkFixture(t, testConfig())
	e, _ := s.Entry(7)
	if len(e.Batches) != BatchesRetained || e.Batches[0].FirstSequence() != 2 || e.Batches[4].LastSequence != 11 {
		t.Fatalf("retained %+v", e.Batches)
	}
	mustAppend(t, s, header(7, 3, 0, 1))
	e, _ = s.Entry(7)
	if e.Epoch != 3 || len(e.Batches) != 1 || e.Batches[0].LastOffset != 12 {
		t.Fatalf("after a new epoch %+v", e)
	}
	if err := s.Update(header(7, 3, 1, 1), 5); err == nil {
		t.Fatal("an update below the map end offset was accepted")
	}
}

func TestExpireProducers(t *testing.T) {
	s := NewState(testConfig(), 0)
	for id, ts := range map[int64]int64{3: 100, 1: 500, 2: 100} { // order-independent: each appends one batch
		h := header(id, 0, 0, 1)
		h.MaxTimestamp = ts
		mustAppend(t, s, h)
	}
	expiration := s.Config().ExpirationMs
	if got := s.ExpireProducers(100 + expiration - 1); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	if got := s.ExpireProducers(100 + expiration); !cmp.Equal(got, []int64{2, 3}) {
		t.Fatalf("expired %v, want [2 3] (sorted, at exactly ExpirationMs)", got)
	}
	if _, ok := s.Entry(1); !ok || s.ProducerCount() != 1 {
		t.Fatalf("left %v", s.Entries())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{{ExpirationMs: 0, ProducersMax: 1}, {ExpirationMs: 1, ProducersMax: 0}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
