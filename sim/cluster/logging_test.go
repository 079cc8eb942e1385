package cluster

import (
	"strings"
	"testing"
)

// TestLoggingDoesNotChangeTheRun: a seed run with every node's log lines
// kept and run with them discarded is the same run (same trace hash,
// events and virtual time), and the kept run did log: each node says
// which partitions it leads or follows. Logs are not part of the trace.
func TestLoggingDoesNotChangeTheRun(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{7, 8} {
		kept := Run(Options{Seed: seed, Shape: "small"})
		discarded := Run(Options{Seed: seed, Shape: "small", DiscardLogs: true})
		if kept.TraceHash != discarded.TraceHash || kept.Events != discarded.Events || kept.SimNs != discarded.SimNs {
			t.Fatalf("seed %d: logs kept %s, discarded %s", seed, kept.Summary, discarded.Summary)
		}
		if len(discarded.NodeLogs) != 0 {
			t.Errorf("seed %d: the run discarding logs kept %d nodes' lines", seed, len(discarded.NodeLogs))
		}
		if len(kept.NodeLogs) == 0 {
			t.Fatalf("seed %d: the run keeping logs has no node logs", seed)
		}
		for _, nl := range kept.NodeLogs {
			joined := strings.Join(nl.Lines, "\n")
			if !strings.Contains(joined, `msg="became leader"`) && !strings.Contains(joined, `msg="became follower"`) {
				t.Errorf("seed %d: node %d logged %d lines, none a leader or follower transition:\n%s",
					seed, nl.Node, nl.Logged, joined)
			}
		}
	}
}
