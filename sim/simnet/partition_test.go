package simnet

import (
	"testing"

	"strand/sim/sched"
)

// cutLinks lists the links between nodes that chaos cuts now.
func cutLinks(c *cluster) map[[2]HostID]bool {
	cut := map[[2]HostID]bool{}
	for _, a := range c.nets {
		for _, b := range c.nets {
			if a != b && c.net.link(a.Host(), b.Host()).cut() {
				cut[[2]HostID{a.Host(), b.Host()}] = true
			}
		}
	}
	return cut
}

// bridged reports whether some node keeps both directions of its links to
// two nodes that cannot reach each other: a non-transitive network.
func bridged(c *cluster, cut map[[2]HostID]bool) bool {
	for _, bridge := range c.nets {
		b := bridge.Host()
		for _, x := range c.nets {
			for _, y := range c.nets {
				xh, yh := x.Host(), y.Host()
				if xh == b || yh == b || xh == yh || !cut[[2]HostID{xh, yh}] {
					continue
				}
				if !cut[[2]HostID{xh, b}] && !cut[[2]HostID{b, xh}] && !cut[[2]HostID{yh, b}] && !cut[[2]HostID{b, yh}] {
					return true
				}
			}
		}
	}
	return false
}

// TestChaosMakesBridgesAndConcurrentPartitions: with bridges and up to
// three partitions drawn, chaos makes non-transitive networks (a node
// reaching both sides that cannot reach each other) and keeps several
// partitions in force at once, each ending on its own; when every one has
// ended no link is left cut (before, one partition at a time, always
// splitting the nodes transitively).
func TestChaosMakesBridgesAndConcurrentPartitions(t *testing.T) {
	f := Calm()
	f.ChaosTickNs = 100e6
	f.PartitionPerMille, f.PartitionNsMin, f.PartitionNsMax = 300, 200e6, 2e9
	f.BridgePerMille, f.PartitionsMax = 1000, 3
	c := newCluster(t, 7, 5, f, nil)
	c.net.StartChaos(c.streams.Get("net-partitions"))
	sawBridge, mostActive := false, 0
	for step := 0; step < 600; step++ {
		c.s.RunFor(50e6)
		mostActive = max(mostActive, c.net.ActivePartitions())
		sawBridge = sawBridge || bridged(c, cutLinks(c))
	}
	if !sawBridge {
		t.Error("no bridge partition in 30 s with every split a bridge")
	}
	if mostActive < 2 {
		t.Errorf("at most %d partitions at once, want several", mostActive)
	}
	if mostActive > 3 {
		t.Errorf("%d partitions at once, above PartitionsMax 3", mostActive)
	}
	// Stop starting partitions and let the ones in force end.
	c.net.faults.PartitionPerMille = 0
	c.s.RunFor(f.PartitionNsMax + 2*f.ChaosTickNs)
	if n := c.net.ActivePartitions(); n != 0 {
		t.Fatalf("%d partitions still in force after every one ended", n)
	}
	if cut := cutLinks(c); len(cut) != 0 {
		t.Fatalf("links %v still cut after every partition ended", cut)
	}
}

// TestPartitionKindsOffChangeNothing: drawn off, bridges and concurrent
// partitions leave the primary partitions exactly as before: the trace is
// the same whether the kinds stream is given or not.
func TestPartitionKindsOffChangeNothing(t *testing.T) {
	run := func(kinds bool) uint64 {
		f := Calm()
		f.ChaosTickNs = 100e6
		f.PartitionPerMille, f.PartitionNsMin, f.PartitionNsMax = 300, 200e6, 2e9
		c := newCluster(t, 7, 3, f, nil)
		if kinds {
			c.net.StartChaos(sched.NewStreams(1).Get("net-partitions"))
		} else {
			c.net.StartChaos(nil)
		}
		c.s.RunFor(10e9)
		return c.s.TraceHash()
	}
	if a, b := run(false), run(true); a != b {
		t.Fatalf("trace %x without the kinds stream, %x with it and the kinds off", a, b)
	}
}
