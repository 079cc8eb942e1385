package realnet

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sigtermExitMax bounds how long a SIGTERMed node may take to exit in these
// tests: well under the 30 s controlled-shutdown deadline, which a node
// that waits for a controller that cannot exist would run out.
const sigtermExitMax = 10 * time.Second

// TestWholeClusterSigtermExitsPromptly sends SIGTERM to all three nodes of
// a cluster in which every node votes, at once, as an operator stopping the
// whole cluster does. Each must exit 0 within sigtermExitMax and log no
// error: the last voters standing cannot form a controller quorum, and must
// give up their controlled shutdown instead of waiting out its deadline.
// Restarted, the cluster serves every record produced before.
func TestWholeClusterSigtermExitsPromptly(t *testing.T) {
	c := startProcCluster(t, 3, everyNodeVotes, nil)
	// `strand serve` re-executes itself with sysmon kept out of its deep
	// sleep (cmd/strand/sysmon.go), as the process's environment shows.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.nodes[0].cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !godebugNamesSchedtrace(environ) {
		t.Errorf("node 1 runs without GODEBUG's schedtrace; its environment: %q", environ)
	}
	c.createTopic("sigterm", 3, 3)
	want := produceKeyed(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "sigterm", 300)
	c.sigtermAndWait(1, 2, 3)
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	consumeAll(t, c.client(kgo.ConsumeTopics("sigterm"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), "sigterm", want)
}

// TestSigtermOneNodeThenTheRest stops one node of a three-voter cluster with
// SIGTERM while the others run: its controlled shutdown must complete (the
// controller moves its leaderships). Then the two others are stopped
// together: with one voter gone, the second to go leaves the last without a
// quorum, and it too must exit promptly, cleanly.
func TestSigtermOneNodeThenTheRest(t *testing.T) {
	c := startProcCluster(t, 3, everyNodeVotes, nil)
	c.createTopic("sigterm", 3, 3)
	produceKeyed(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "sigterm", 300)
	c.sigtermAndWait(3)
	log, err := os.ReadFile(c.nodes[2].logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte(`msg="controlled shutdown complete"`)) {
		t.Errorf("node 3, stopped alone, did not complete a controlled shutdown:\n%s", lastBytes(log, 4<<10))
	}
	if bytes.Contains(log, []byte("giving up the controlled shutdown")) {
		t.Errorf("node 3, stopped alone while a quorum stood, gave up its controlled shutdown:\n%s", lastBytes(log, 4<<10))
	}
	c.sigtermAndWait(1, 2)
}

// sigtermAndWait sends SIGTERM to the nodes ids at once and checks each
// exits 0 within sigtermExitMax of it, with no error in its log, which
// says how its controlled shutdown ended: complete, or given up with the
// reason.
func (c *procCluster) sigtermAndWait(ids ...int) {
	c.t.Helper()
	start := time.Now()
	for _, id := range ids {
		if err := c.nodes[id-1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			c.t.Fatalf("SIGTERM node %d: %v", id, err)
		}
	}
	for _, id := range ids {
		n := c.nodes[id-1]
		select {
		case <-n.exited:
		case <-time.After(sigtermExitMax - time.Since(start)):
			c.t.Fatalf("node %d still running %s after SIGTERM", id, sigtermExitMax)
		}
		state := n.cmd.ProcessState
		n.cmd, n.exited = nil, nil
		c.t.Logf("node %d exited %s after SIGTERM: %s", id, time.Since(start).Round(time.Millisecond), state)
		log, err := os.ReadFile(n.logPath)
		if err != nil {
			c.t.Fatal(err)
		}
		if state.ExitCode() != 0 {
			c.t.Errorf("node %d exited with %s:\n%s", id, state, lastBytes(log, 4<<10))
		}
		outcomes := 0
		for _, line := range bytes.Split(log, []byte("\n")) {
			if bytes.Contains(line, []byte("level=ERROR")) {
				c.t.Errorf("node %d logged an error: %s", id, line)
			}
			switch {
			case bytes.Contains(line, []byte(`level=INFO msg="controlled shutdown complete"`)):
				outcomes++
			case bytes.Contains(line, []byte(`level=WARN msg="giving up the controlled shutdown: no controller quorum can form"`)):
				outcomes++
				if !bytes.Contains(line, []byte("reason=")) {
					c.t.Errorf("node %d gave up its controlled shutdown without a reason: %s", id, line)
				}
				c.t.Logf("node %d: %s", id, line)
			}
		}
		if outcomes != 1 {
			c.t.Errorf("node %d logged %d outcomes of its controlled shutdown, want 1:\n%s", id, outcomes, lastBytes(log, 4<<10))
		}
	}
}

// godebugNamesSchedtrace reports whether a /proc/PID/environ (NUL-separated)
// sets GODEBUG with a schedtrace field, wherever it sits among the fields
// the caller's own GODEBUG brought.
func godebugNamesSchedtrace(environ []byte) bool {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		value, ok := bytes.CutPrefix(kv, []byte("GODEBUG="))
		if !ok {
			continue
		}
		for _, field := range bytes.Split(value, []byte(",")) {
			if key, _, _ := bytes.Cut(field, []byte("=")); string(bytes.TrimSpace(key)) == "schedtrace" {
				return true
			}
		}
	}
	return false
}
