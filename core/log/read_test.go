package log

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"strand/core/batch"
	"strand/sim/memdisk"
)

// TestReadMatchesReference compares Read, which takes spans between offset
// index entries without reading their headers, with a batch-by-batch
// reference over what was appended, for random limits and index densities.
func TestReadMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, interval := range []int64{0, 100, 700, 4096, 1 << 20} {
		cfg := testConfig()
		cfg.IndexIntervalBytes = interval
		cfg.SegmentBytes = 3000
		l := openLog(t, memdisk.New(memdisk.Options{}), cfg, OpenOptions{})
		var want []appended
		for i := 0; i < 80; i++ {
			want = append(want, appendLeader(t, l, 1+rng.IntN(5), int64(i), 0))
		}
		for trial := 0; trial < 400; trial++ {
			fetch := rng.Int64N(l.LogEndOffset() + 1)
			maxBytes := int32(rng.IntN(2500))
			maxOffset := fetch + rng.Int64N(l.LogEndOffset()-fetch+2)
			minOne := rng.IntN(2) == 0
			wantBytes, wantFirst, wantNext := referenceRead(want, fetch, int64(maxBytes), maxOffset, minOne)
			result, err := l.Read(fetch, maxBytes, maxOffset, minOne)
			if err != nil {
				t.Fatal(err)
			}
			got, err := CopyRegions(result.Regions)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBytes) || result.FirstOffset != wantFirst || result.NextOffset != wantNext {
				t.Fatalf("interval %d: Read(%d, %d, %d, %v): %d bytes [%d, %d), want %d bytes [%d, %d)", interval,
					fetch, maxBytes, maxOffset, minOne, len(got), result.FirstOffset, result.NextOffset, len(wantBytes), wantFirst, wantNext)
			}
		}
	}
}

func referenceRead(batches []appended, fetch, maxBytes, maxOffset int64, minOne bool) ([]byte, int64, int64) {
	var out []byte
	first, next := fetch, fetch
	if fetch >= maxOffset {
		return nil, first, next
	}
	for _, b := range batches {
		h, _ := batch.ParseHeader(b.bytes)
		if h.LastOffset() < fetch {
			continue
		}
		isFirst := len(out) == 0
		if h.LastOffset() >= maxOffset || (int64(len(out))+h.TotalBytes() > maxBytes && !(isFirst && minOne)) {
			break
		}
		if isFirst {
			first = h.BaseOffset
		}
		out = append(out, b.bytes...)
		next = h.NextOffset()
	}
	return out, first, next
}
