package producer

import (
	"testing"

	"strand/core/batch"
)

// header is a produced batch's header: records records from sequence seq.
func header(producerID int64, epoch int16, seq int32, records int32) batch.Header {
	return batch.Header{ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq,
		LastOffsetDelta: records - 1, RecordCount: records, MaxTimestamp: 1000}
}

// mustAppend checks h, expects Append, and updates at the map end offset.
func mustAppend(t *testing.T, s *State, h batch.Header) int64 {
	t.Helper()
	v, err := s.Check(h)
	if err != nil || (v.Kind != Append && v.Kind != NotIdempotent) {
		t.Fatalf("check %+v: %v, %v", h, v, err)
	}
	base := s.MapEndOffset()
	if err := s.Update(h, base); err != nil {
		t.Fatal(err)
	}
	return base
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ProducersMax = 4
	return cfg
}
