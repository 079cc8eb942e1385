package workload

import "testing"

// recordValue spells p<client>-<seq>, the form the checkers and SPEC.md §6.1
// name.
func TestRecordValue(t *testing.T) {
	for _, c := range []struct {
		client, seq int
		want        string
	}{{0, 0, "p0-0"}, {3, 17, "p3-17"}, {12, 1234567, "p12-1234567"}} {
		if got := recordValue(c.client, c.seq); got != c.want {
			t.Errorf("recordValue(%d, %d) = %q, want %q", c.client, c.seq, got, c.want)
		}
	}
}
