package batch

import (
	"runtime/metrics"
	"testing"
)

// TestNoGoroutines checks the package's promise to realnet and the
// simulator: compressing, building and validating every codec creates no
// goroutine. It counts goroutine creations across the calls; since anything
// else in the test binary might start one meanwhile, it passes if any of a
// few attempts sees none, which code that always starts goroutines cannot.
func TestNoGoroutines(t *testing.T) {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	created := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			t.Fatalf("metric %s unsupported", sample[0].Name)
		}
		return sample[0].Value.Uint64()
	}
	var last uint64
	for range 5 {
		before := created()
		for _, codec := range allCodecs {
			b := Build(BuildSpec{Codec: codec, FirstTimestamp: testNowMs, Records: sampleRecords()})
			if _, err := CheckProduced(b, testLimits()); err != nil {
				t.Fatal(err)
			}
		}
		if last = created() - before; last == 0 {
			return
		}
	}
	t.Fatalf("building and checking every codec created %d goroutines", last)
}
