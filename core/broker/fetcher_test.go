package broker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"strand/core/batch"
	"strand/core/log"
	"strand/core/producer"
	"strand/sim/memdisk"
)

// TestAppendedBatchesMatchLogReader checks that a follower's producer-state
// catch-up sees the same batch headers from the fetch answer it just
// appended as from reading the log back (producer.LogReader), from where
// the append started and from anywhere else, and also when the answer is
// not what the log ends with.
func TestAppendedBatchesMatchLogReader(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := log.DefaultConfig()
		cfg.SegmentBytes = rapid.SampledFrom([]int64{600, 1 << 20}).Draw(t, "segmentBytes")
		l, err := log.Open(memdisk.New(memdisk.Options{}), "t-0", cfg, log.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// build encodes a batch at base and returns it with its next offset.
		build := func(base int64, label string) ([]byte, int64) {
			records := make([]batch.Record, rapid.IntRange(1, 4).Draw(t, label+"Records"))
			for i := range records {
				records[i].Value = []byte(label)
			}
			return batch.Build(batch.BuildSpec{BaseOffset: base, Records: records, Idempotent: true,
				ProducerID: rapid.Int64Range(0, 3).Draw(t, label+"Producer"), BaseSequence: int32(base)}), base + int64(len(records))
		}
		for i := rapid.IntRange(0, 5).Draw(t, "before"); i > 0; i-- {
			b, _ := build(l.LogEndOffset(), "before")
			if _, err := l.AppendAsFollower(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		leo := l.LogEndOffset()
		var answer []byte
		for i, next := rapid.IntRange(1, 5).Draw(t, "appended"), leo; i > 0; i-- {
			var b []byte
			b, next = build(next, "appended")
			answer = append(answer, b...)
		}
		if _, err := l.AppendAsFollower(answer, 0); err != nil {
			t.Fatal(err)
		}
		appendedFrom := leo
		if rapid.Bool().Draw(t, "wrongStart") {
			appendedFrom = rapid.Int64Range(0, leo+2).Draw(t, "appendedFrom")
		}
		from := leo
		if rapid.Bool().Draw(t, "behind") {
			from = rapid.Int64Range(0, leo).Draw(t, "from")
		}
		collect := func(read producer.BatchReader) []batch.Header {
			var headers []batch.Header
			if err := read(from, func(h batch.Header) error { headers = append(headers, h); return nil }); err != nil {
				t.Fatal(err)
			}
			return headers
		}
		want := collect(producer.LogReader(l))
		got := collect(appendedBatches(l, answer, appendedFrom))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("catch-up from %d (appended at %d, said %d): headers differ from the log's (-log +answer):\n%s", from, leo, appendedFrom, diff)
		}
	})
}
