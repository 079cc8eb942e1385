package cluster

import (
	"strings"
	"testing"

	"strand/core/env"
	"strand/core/log"
	"strand/sim/memdisk"
	"strand/sim/sched"
)

// TestSyncedKeptNeedsAReadableCheckpoint: after a power loss, a missing
// recovery-point checkpoint promises nothing, but one that does not parse
// is a violation, not a checkpoint that promised nothing.
func TestSyncedKeptNeedsAReadableCheckpoint(t *testing.T) {
	s := sched.New(sched.Options{})
	var failures []string
	c := &Cluster{S: s, fail: func(check, detail string) { failures = append(failures, check+": "+detail) }}
	n := &Node{ID: 1, Disk: memdisk.New(memdisk.Options{Post: func(fn func()) { fn() }})}
	c.checkSyncedKept(n)
	if len(failures) != 0 {
		t.Fatalf("no checkpoint yet: %v", failures)
	}
	f, err := n.Disk.Open(log.RecoveryPointCheckpointName, env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Append([]byte("not a checkpoint\n")); err != nil {
		t.Fatal(err)
	}
	c.checkSyncedKept(n)
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "synced-kept: ") {
		t.Fatalf("an unparsable checkpoint: %v, want one synced-kept violation", failures)
	}
}
