package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// TestACLChurnIsCheckedAndItsBugsCaught: in the acl shape the ACL churn
// runs while the probes' requests are both granted and refused, every
// check passes, the credential admin's alterations are authorized by its
// base ACLs (ALTER on the cluster), and each ACL planted bug is reported
// by the checker named for it within a few seeds (SPEC.md §6.2).
func TestACLChurnIsCheckedAndItsBugsCaught(t *testing.T) {
	t.Parallel()
	const seeds = 3
	var successes, refusals, scramAlterations int
	for seed := uint64(1); seed <= seeds; seed++ {
		res := Run(Options{Seed: seed, Shape: "acl", DiscardLogs: true})
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations[0])
		}
		var changes, requests, succeeded int
		i := strings.Index(res.Stats, "acl_changes=")
		if i < 0 {
			t.Fatalf("seed %d: no ACL stats in %q", seed, res.Stats)
		}
		if _, err := fmt.Sscanf(res.Stats[i:], "acl_changes=%d acl_probe_requests=%d acl_probe_successes=%d", &changes, &requests, &succeeded); err != nil {
			t.Fatal(err)
		}
		if changes < 3 {
			t.Errorf("seed %d: %d ACL changes, want churn", seed, changes)
		}
		successes, refusals = successes+succeeded, refusals+requests-succeeded
		if i := strings.Index(res.Stats, "scram_alterations="); i >= 0 {
			var alterations, unauthorized int
			if _, err := fmt.Sscanf(res.Stats[i:], "scram_alterations=%d scram_unauthorized=%d", &alterations, &unauthorized); err != nil {
				t.Fatal(err)
			}
			if unauthorized > 0 {
				t.Errorf("seed %d: %d of %d SCRAM alterations refused CLUSTER_AUTHORIZATION_FAILED", seed, unauthorized, alterations)
			}
			scramAlterations += alterations
		}
	}
	if scramAlterations == 0 {
		t.Errorf("no SCRAM alterations in %d seeds of the acl shape", seeds)
	}
	if successes == 0 || refusals == 0 {
		t.Errorf("%d probe requests succeeded and %d did not over %d seeds: want both", successes, refusals, seeds)
	}
	const huntSeeds = 8
	for bug, check := range map[string]string{"acl-deny-ignored": "authorized", "acl-prefix-overmatch": "authorized",
		"acl-stale-forever": "acl-agreement"} {
		caught := false
		for seed := uint64(1); seed <= huntSeeds && !caught; seed++ {
			for _, v := range Run(Options{Seed: seed, Shape: "acl", Bug: bug, DiscardLogs: true}).Violations {
				caught = caught || v.Check == check
			}
		}
		if !caught {
			t.Errorf("bug %s: no %s violation in %d seeds", bug, check, huntSeeds)
		}
	}
}
