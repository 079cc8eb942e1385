package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// TestForgeriesAreRefusedAndTheirBugsCaught: in every security mode the
// forger forges and every forgery is refused; with either control-plane
// bug planted, the forgery check reports it within the same few seeds.
func TestForgeriesAreRefusedAndTheirBugsCaught(t *testing.T) {
	t.Parallel()
	const seeds = 6
	modes := map[string]bool{}
	for seed := uint64(1); seed <= seeds; seed++ {
		res := Run(Options{Seed: seed, Shape: "small", DiscardLogs: true})
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations[0])
		}
		var forged, closed int
		if _, err := fmt.Sscanf(res.Stats[strings.Index(res.Stats, "forged="):], "forged=%d closed=%d", &forged, &closed); err != nil || forged == 0 || closed == 0 {
			t.Errorf("seed %d: forged %d, closed %d (%v): the forger did not reach the client listeners", seed, forged, closed, err)
		}
		modes[res.Header[strings.Index(res.Header, "security{"):strings.Index(res.Header, " principals=")]] = true
	}
	if len(modes) < 3 {
		t.Errorf("%d seeds drew only the security modes %v", seeds, modes)
	}
	for _, bug := range []string{"open-control-plane", "control-plane-any-principal"} {
		caught := false
		for seed := uint64(1); seed <= seeds && !caught; seed++ {
			for _, v := range Run(Options{Seed: seed, Shape: "small", Bug: bug, DiscardLogs: true}).Violations {
				caught = caught || v.Check == "forgery"
			}
		}
		if !caught {
			t.Errorf("bug %s: no forgery violation in %d seeds", bug, seeds)
		}
	}
}
