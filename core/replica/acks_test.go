package replica

import "testing"

func TestAckOutcome(t *testing.T) {
	cases := []struct {
		hw, required int64
		isrSize, min int
		ignore       bool
		done         bool
		want         int16
	}{
		{hw: 4, required: 5, isrSize: 3, min: 2, done: false},
		{hw: 5, required: 5, isrSize: 3, min: 2, done: true},
		{hw: 9, required: 5, isrSize: 1, min: 2, done: true, want: codeNotEnoughReplicasAfterAppend},
		{hw: 9, required: 5, isrSize: 1, min: 2, ignore: true, done: true},
	}
	for _, c := range cases {
		done, got := ackOutcome(c.hw, c.required, c.isrSize, c.min, c.ignore)
		if done != c.done || got != c.want {
			t.Errorf("%+v: done %v code %d", c, done, got)
		}
	}
}
