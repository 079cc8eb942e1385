package log

import (
	"testing"

	"strand/core/batch"
	"strand/sim/memdisk"
)

func TestOffsetForTimestamp(t *testing.T) {
	l := openLog(t, memdisk.New(memdisk.Options{}), testConfig(), OpenOptions{})
	// Batch i has timestamps 1000+10i .. 1000+10i+2 (three records), except
	// that batch 30 goes back in time.
	var batches []appended
	for i := 0; i < 60; i++ {
		ts := int64(1000 + 10*i)
		if i == 30 {
			ts = 500
		}
		batches = append(batches, appendLeader(t, l, 3, ts, 0))
	}
	// The reference answer: the first batch whose max timestamp >= target.
	expect := func(target int64) (int64, int64, bool) {
		for _, b := range batches {
			h, _ := batch.ParseHeader(b.bytes)
			if h.MaxTimestamp >= target {
				return h.BaseOffset, h.MaxTimestamp, true
			}
		}
		return 0, 0, false
	}
	for target := int64(400); target < 1700; target += 3 {
		wantOffset, wantTs, wantFound := expect(target)
		offset, ts, found, err := l.OffsetForTimestamp(target)
		if err != nil {
			t.Fatal(err)
		}
		if offset != wantOffset || ts != wantTs || found != wantFound {
			t.Fatalf("OffsetForTimestamp(%d) = (%d, %d, %v), want (%d, %d, %v)", target, offset, ts, found, wantOffset, wantTs, wantFound)
		}
	}
	offset, ts, found := l.MaxTimestamp()
	if !found || ts != 1000+10*59+2 || offset != l.LogEndOffset()-1 {
		t.Fatalf("MaxTimestamp = (%d, %d, %v)", offset, ts, found)
	}
}
