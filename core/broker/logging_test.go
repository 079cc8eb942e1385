package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/replica"
)

// capturedLogs is an env.Logger keeping every line at every level, for
// tests that check what a node logs.
type capturedLogs struct {
	lines []capturedLine
}

// capturedLine is one logged line, its attributes rendered as text.
type capturedLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (c *capturedLogs) Enabled(slog.Level) bool { return true }

func (c *capturedLogs) Log(level slog.Level, msg string, attrs []slog.Attr) {
	line := capturedLine{level: level, msg: msg, attrs: map[string]string{}}
	for _, a := range attrs {
		line.attrs[a.Key] = a.Value.String()
	}
	c.lines = append(c.lines, line)
}

// matching returns the lines at level with message msg whose attributes
// include every key and value of want.
func (c *capturedLogs) matching(level slog.Level, msg string, want map[string]string) []capturedLine {
	var out []capturedLine
	for _, l := range c.lines {
		if l.level != level || l.msg != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if l.attrs[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// String lists every line, for failure messages.
func (c *capturedLogs) String() string {
	var b strings.Builder
	for _, l := range c.lines {
		fmt.Fprintf(&b, "%v %q %v\n", l.level, l.msg, l.attrs)
	}
	return b.String()
}

// TestFollowerAppendErrorLoggedOnce: a follower fetching a batch it cannot
// append (its CRC broken on the leader's disk) logs the failure at ERROR
// with the partition and the error, once, although it fails again at every
// retry (replica.fetch.backoff.ms).
func TestFollowerAppendErrorLoggedOnce(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("committed")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Node 3 cannot fetch while the leader appends a batch, whose value is
	// then corrupted on the leader's disk. The follower's fetch parked at
	// the leader is answered (empty) before the append: blocked frames are
	// delivered on Heal, and it must not carry the intact batch.
	h2, h3 := c.nodes[2].nn.Host(), c.nodes[3].nn.Host()
	c.net.Block(h2, h3)
	c.net.Block(h3, h2)
	c.run(2 * replicaFetchMaxWaitMs)
	before := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].log.SizeBytes()
	if r := c.produce(2, "r", 0, 1, recordBatch("corrupted")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=1: error %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	after := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].log.SizeBytes()
	if err := c.nodes[2].disk.FlipBit("r-0/00000000000000000000.log", after-2, 0); err != nil {
		t.Fatalf("corrupting the leader's second batch (bytes %d-%d): %v", before, after, err)
	}
	c.net.Heal()
	follower := c.nodes[3].node.parts.partitions[partitionKey{"r", 0}]
	c.run(8000) // several replica.fetch.backoff.ms
	if leo := follower.log.LogEndOffset(); leo != 1 {
		t.Fatalf("follower LEO %d: the corrupted batch was appended (want 1, still failing)", leo)
	}
	errs := c.nodes[3].logs.matching(slog.LevelError, "error processing fetched data for partition; retrying after replica.fetch.backoff.ms",
		map[string]string{"topic": "r", "partition": "0", "action": "append", "log_end_offset": "1"})
	if len(errs) != 1 {
		t.Fatalf("follower logged the failing append %d times, want once; its log:\n%s", len(errs), c.nodes[3].logs)
	}
	if !strings.Contains(errs[0].attrs["err"], "CRC") && !strings.Contains(errs[0].attrs["err"], "crc") {
		t.Errorf("the ERROR line's err %q does not name the CRC failure", errs[0].attrs["err"])
	}
}

// TestFollowerAppendErrorLoggedOncePerDistinctError: the rate limit logs a
// repeated error once, a different error at once, and the first error
// again after a success in between.
func TestFollowerAppendErrorLoggedOncePerDistinctError(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[3]
	p := n.node.parts.partitions[partitionKey{"r", 0}]
	appendAction := replica.FollowerAction{Kind: replica.ActionAppend}
	first, second := errors.New("first failure"), errors.New("second failure")
	for _, err := range []error{first, first, first, second, second, nil, first, first} {
		n.node.parts.fetchers.logFollowerAppendError(p, appendAction, err)
	}
	var got []string
	for _, l := range n.logs.matching(slog.LevelError, "error processing fetched data for partition; retrying after replica.fetch.backoff.ms", nil) {
		got = append(got, l.attrs["err"])
	}
	want := "first failure,second failure,first failure"
	if strings.Join(got, ",") != want {
		t.Fatalf("logged errors %q, want %q", strings.Join(got, ","), want)
	}
}

// TestISRShrinkLogged: a follower cut off from the leader for longer than
// replica.lag.time.max.ms is proposed out of the ISR, and the leader logs
// the shrink at INFO: the ISR before and after, the replica left behind
// with its end offset, and the lag bound.
func TestISRShrinkLogged(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "1", "default.replication.factor": "3",
		"replica.lag.time.max.ms": "2000"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3)
	c.createTopic(3, "r", 1, 3)
	if l := c.leaderOf("r", 0); l != 2 {
		t.Fatalf("leader of r-0 is %d, want 2", l)
	}
	if r := c.produce(2, "r", 0, -1, recordBatch("a")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	h2, h3 := c.nodes[2].nn.Host(), c.nodes[3].nn.Host()
	c.net.Block(h2, h3)
	c.net.Block(h3, h2)
	if r := c.produce(2, "r", 0, 1, recordBatch("b")); r.ErrorCode != 0 {
		t.Fatalf("acks=1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitFor("the leader sees the ISR shrunk", 10000, func() bool {
		return len(c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].replica.State().ISR) == 2
	})
	shrinks := c.nodes[2].logs.matching(slog.LevelInfo, "shrinking ISR",
		map[string]string{"topic": "r", "partition": "0", "isr": "1,2,3", "new_isr": "1,2", "replica_lag_time_max_ms": "2000"})
	if len(shrinks) != 1 {
		t.Fatalf("leader logged %d ISR shrinks of r-0 from 1,2,3 to 1,2, want 1; its log:\n%s", len(shrinks), c.nodes[2].logs)
	}
	if detail := shrinks[0].attrs["out_of_sync"]; !strings.HasPrefix(detail, "replica 3 (end offset 1, last caught up ") {
		t.Errorf("out_of_sync = %q, want replica 3 at end offset 1 with its lag", detail)
	}
	if updated := c.nodes[2].logs.matching(slog.LevelInfo, "ISR updated", map[string]string{"topic": "r", "isr": "1,2"}); len(updated) != 1 {
		t.Errorf("leader logged %d commits of ISR 1,2, want 1", len(updated))
	}
}

// TestDivergenceTruncationLogged: a deposed leader that appended in its
// old epoch while cut off learns from the DivergingEpoch answer where its
// log diverged and logs the truncation at INFO: the offset it truncates
// to, its end offset before, and the diverging epoch (KIP-101/279).
func TestDivergenceTruncationLogged(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("committed")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.isolate(2)
	if r := c.produce(2, "r", 0, 1, recordBatch("lost1", "lost2")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=1 on the isolated leader: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
	c.waitFor("new leader", 20000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	c.net.Heal()
	old := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	c.waitFor("old leader truncates", 30000, func() bool {
		return old.replica.Role() == replica.RoleFollower && old.log.LogEndOffset() == 1
	})
	truncations := c.nodes[2].logs.matching(slog.LevelInfo, "truncating log", map[string]string{
		"topic": "r", "partition": "0", "truncate_to_offset": "1", "log_end_offset": "3",
		"diverging_epoch": "0", "diverging_epoch_end_offset": "1",
		"reason": "the leader reports a diverging epoch (KIP-101/KIP-279)"})
	if len(truncations) != 1 {
		t.Fatalf("old leader logged %d divergence truncations of r-0 to 1, want 1; its log:\n%s", len(truncations), c.nodes[2].logs)
	}
	if became := c.nodes[2].logs.matching(slog.LevelInfo, "became follower", map[string]string{"topic": "r", "leader_epoch": "1"}); len(became) != 1 {
		t.Errorf("old leader logged %d transitions to follower in epoch 1, want 1", len(became))
	}
}
