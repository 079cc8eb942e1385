package replica

import "testing"

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
