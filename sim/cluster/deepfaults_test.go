package cluster

import (
	"reflect"
	"slices"
	"testing"

	"strand/core/broker"
	"strand/core/env"
	"strand/models"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
)

// TestDeepFaultsReshuffleNoOtherDraw: the deep disk faults and the
// partition kinds come from streams of their own, so a seed's other fault
// settings are drawn exactly as they were before they existed.
func TestDeepFaultsReshuffleNoOtherDraw(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		streams := sched.NewStreams(seed)
		f := drawFaults(streams, Shapes["standard"])
		before := sched.NewStreams(seed)
		net := simnet.DrawFaults(before.Get("faults/net"))
		net.BridgePerMille, net.PartitionsMax = f.net.BridgePerMille, f.net.PartitionsMax
		if !reflect.DeepEqual(f.net, net) || f.process != sched.DrawProcessFaults(before.Get("faults/process")) ||
			f.clock != simclock.DrawFaults(before.Get("faults/clock")) ||
			f.disk != drawDiskFaults(before.Get("faults/disk"), Shapes["standard"]) {
			t.Fatalf("seed %d: the older fault classes are drawn differently", seed)
		}
	}
}

// TestSyncLatencyDelaysCompletionsInOrder: with an fsync latency drawn, a
// disk's completions run that much later in simulated time, never before
// an earlier one (diskio's per-directory worker completes in order), and
// a crash before one drops it: the Sync made nothing durable.
func TestSyncLatencyDelaysCompletionsInOrder(t *testing.T) {
	s := sched.New(sched.Options{})
	proc := s.NewNode(1)
	cfg := DeepDiskFaults{SyncLatencyNsMin: 1e6, SyncLatencyNsMax: 50e6, SyncTailPerMille: 500, SyncTailNsMax: 200e6}
	hits := &deepHits{}
	l := &syncLatency{s: s, proc: proc, r: sched.NewStreams(1).Get("disk/sync-latency/1"), cfg: &cfg, hits: hits}
	disk := memdisk.New(memdisk.Options{Post: l.post})
	f, err := disk.Open("f", env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	disk.SyncDir(".", nil)
	var doneAt []int64
	for i := 0; i < 20; i++ {
		if err := f.Append([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		f.Sync(func(err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
			}
			doneAt = append(doneAt, s.NowNs())
		})
	}
	s.RunFor(5e9)
	if len(doneAt) != 20 || !slices.IsSorted(doneAt) || doneAt[0] < cfg.SyncLatencyNsMin {
		t.Fatalf("completions at %v: want 20, in order, none before the latency", doneAt)
	}
	if hits.syncsDelayed != 21 {
		t.Fatalf("%d syncs counted delayed, want 21 (the directory's too)", hits.syncsDelayed)
	}
	// A crash while a slow Sync is in flight: it never completes, and a
	// power loss takes what it covered.
	if err := f.Append([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	completed := false
	f.Sync(func(error) { completed = true })
	proc.Crash()
	disk.Crash(nil, memdisk.CrashLoseAll)
	s.RunFor(5e9)
	if completed {
		t.Fatal("a Sync completed across a crash")
	}
	if data, _ := disk.ReadFile("f"); len(data) != 20 {
		t.Fatalf("after the power loss the file holds %d bytes, want the 20 synced", len(data))
	}
}

// TestRepairRemovesWhatWasDamaged: the operator removes a damaged
// replica's directory, a damaged file the broker can do without, and the
// clean-shutdown marker (so the broker registers as having lost data),
// and makes it durable; the damage is then repaired, and a decode error
// from that replica after the repair is no longer the harness's doing.
func TestRepairRemovesWhatWasDamaged(t *testing.T) {
	s := sched.New(sched.Options{})
	c := &Cluster{S: s}
	n := &Node{ID: 2, Disk: memdisk.New(memdisk.Options{Post: func(fn func()) { fn() }}), deep: &deepHits{}}
	for _, p := range []string{"t0-1/00000000000000000000.log", "t0-1/00000000000000000000.index", "t0-2/00000000000000000000.index",
		"replication-offset-checkpoint", broker.CleanShutdownFile} {
		if err := n.Disk.MkdirAll(dirOf(p)); err != nil {
			t.Fatal(err)
		}
		f, err := n.Disk.Open(p, env.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Append([]byte("x"))
	}
	damaged := models.TopicPartition{Topic: "t0", Partition: 1}
	c.addDamage(n, damage{kind: damageReplica, tp: damaged})
	c.addDamage(n, damage{kind: damageFile, path: "t0-2/00000000000000000000.index"})
	c.addDamage(n, damage{kind: damageFile, path: "replication-offset-checkpoint"})
	s.RunFor(1e9)
	if !c.damagedAt(2, damaged, s.NowNs()) || !c.damagedAt(2, models.TopicPartition{Topic: "t0", Partition: 2}, s.NowNs()) {
		t.Fatal("the damaged replica and the replica of the damaged index are not reported damaged")
	}
	c.repair(n, "test")
	names, _ := n.Disk.List(".")
	if !slices.Equal(names, []string{"t0-2"}) {
		t.Fatalf("after the repair the disk holds %v, want only t0-2 (its index removed)", names)
	}
	if inner, _ := n.Disk.List("t0-2"); len(inner) != 0 {
		t.Fatalf("t0-2 still holds %v", inner)
	}
	n.Disk.Crash(nil, memdisk.CrashLoseAll)
	if names, _ := n.Disk.List("."); !slices.Equal(names, []string{"t0-2"}) {
		t.Fatalf("after a power loss the disk holds %v: the repair was not durable", names)
	}
	s.RunFor(1e9)
	if c.damagedAt(2, damaged, s.NowNs()) || len(n.damage) != 0 || n.deep.repairs != 1 {
		t.Fatalf("after the repair: damaged %v, damage %v, repairs %d", c.damagedAt(2, damaged, s.NowNs()), n.damage, n.deep.repairs)
	}
	if !c.damagedAt(2, damaged, 0) {
		t.Fatal("the span before the repair was forgotten")
	}
}

func dirOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "."
}
