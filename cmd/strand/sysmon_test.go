package main

import "testing"

func TestGodebugWithSchedtrace(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		changed  bool
	}{
		{"", "schedtrace=" + schedtraceMs, true},
		{"gctrace=1", "gctrace=1,schedtrace=" + schedtraceMs, true},
		{"gctrace=1,madvdontneed=1", "gctrace=1,madvdontneed=1,schedtrace=" + schedtraceMs, true},
		{"schedtrace=0", "schedtrace=0", false},
		{"gctrace=1,schedtrace=1000", "gctrace=1,schedtrace=1000", false},
		{"scheddetail=1", "scheddetail=1,schedtrace=" + schedtraceMs, true},
	} {
		got, changed := godebugWithSchedtrace(tc.in)
		if got != tc.want || changed != tc.changed {
			t.Errorf("godebugWithSchedtrace(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}
