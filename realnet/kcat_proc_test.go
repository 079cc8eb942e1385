package realnet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatGroupConsume consumes with librdkafka's balanced consumer
// (kcat -G) from a 6-partition RF-3 topic on a 3-broker cluster of real
// processes: the first run reads every record exactly once, exactly as
// produced, and its commits leave every partition's committed offset at its
// end; a second run of the same group, after 1,000 more records, reads only
// those.
func TestKcatGroupConsume(t *testing.T) {
	kcatPath(t)
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions = "kcat-group", "kcat-group", 6
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	first := produceKeyed(t, producer, topic, 20000)

	groupRun := func(want map[position]producedRecord) {
		t.Helper()
		out := kcatAt(t, c.bootstrap(), nil, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-f", "%p %o %k\n", topic)
		seen := map[position]bool{}
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if line == "" {
				continue
			}
			var p position
			var key string
			if _, err := fmt.Sscanf(line, "%d %d %s", &p.partition, &p.offset, &key); err != nil {
				t.Fatalf("kcat -G output line %q: %v", line, err)
			}
			w, ok := want[p]
			switch {
			case !ok:
				t.Fatalf("kcat -G read partition %d offset %d, which this run should not have read (committed before, or never produced)", p.partition, p.offset)
			case seen[p]:
				t.Fatalf("kcat -G read partition %d offset %d twice", p.partition, p.offset)
			case string(w.key) != key:
				t.Fatalf("partition %d offset %d: kcat -G read key %q, produced %q", p.partition, p.offset, key, w.key)
			}
			seen[p] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("kcat -G read %d of %d records", len(seen), len(want))
		}
		checkCommittedAtEnd(t, c, group, topic, partitions)
	}
	groupRun(first)
	groupRun(produceKeyed(t, producer, topic, 1000))
}

// TestKcatIdempotentProducerThroughLeaderKill produces with librdkafka's
// idempotent producer (kcat -P -X enable.idempotence=true) while the
// leader of partition 0 is killed -9 and restarted. Every line kcat was
// given must be in the log exactly once, each partition in the order kcat
// read the lines.
func TestKcatIdempotentProducerThroughLeaderKill(t *testing.T) {
	kcatPath(t)
	c := startProcCluster(t, 3, separateController, nil)
	const topic, partitions, lines = "kcat-idempotent", 3, 40000
	c.createTopic(topic, partitions, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), "-b", strings.Join(c.bootstrap(), ","), "-P", "-t", topic, "-K:",
		"-X", "enable.idempotence=true", "-X", "linger.ms=5")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	writeDone := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(stdin)
		for i := range lines {
			fmt.Fprintf(w, "key-%d:value-%d\n", i, i)
			if i%200 == 199 {
				if err := w.Flush(); err != nil {
					writeDone <- err
					return
				}
				written.Store(int64(i + 1))
				time.Sleep(10 * time.Millisecond) // spread the lines across the kill
			}
		}
		if err := w.Flush(); err != nil {
			writeDone <- err
			return
		}
		writeDone <- stdin.Close()
	}()
	waitUntil(t, "a quarter of the lines written", 60*time.Second, func() bool { return written.Load() >= lines/4 })
	leader := c.partitions(topic)[0].leader
	if leader <= 0 {
		t.Fatalf("partition 0 of %s has no leader", topic)
	}
	c.kill(int(leader))
	t.Logf("killed node %d, leader of partition 0, after %d lines", leader, written.Load())
	time.Sleep(2 * time.Second)
	c.start(int(leader))
	if err := <-writeDone; err != nil {
		t.Fatalf("writing kcat's input: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kcat -P: %v\nstderr (last 2 KiB):\n%s", err, lastBytes(stderr.Bytes(), 2048))
	}
	if strings.Contains(stderr.String(), "ERROR") {
		t.Logf("kcat -P stderr (last 2 KiB):\n%s", lastBytes(stderr.Bytes(), 2048))
	}

	ends := endOffsets(t, c, topic, partitions)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int64{}
	copies := make([]int, lines)
	lastLine := map[int32]int{}
	for !allAt(next, ends) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of end offsets %v before the deadline", next, ends)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("consume: partition %d: %v", fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "key-"))
			if err != nil || i < 0 || i >= lines || string(r.Value) != fmt.Sprintf("value-%d", i) {
				t.Fatalf("partition %d offset %d: %q=%q is not a line kcat was given", r.Partition, r.Offset, r.Key, r.Value)
			}
			copies[i]++
			if last, ok := lastLine[r.Partition]; ok && i <= last {
				t.Errorf("partition %d offset %d: line %d after line %d: the idempotent producer's order was not kept", r.Partition, r.Offset, i, last)
			}
			lastLine[r.Partition] = i
		})
	}
	missing, duplicated := 0, 0
	for _, n := range copies {
		switch {
		case n == 0:
			missing++
		case n > 1:
			duplicated += n - 1
		}
	}
	if missing > 0 || duplicated > 0 {
		t.Fatalf("of %d lines, %d missing and %d duplicate copies; the idempotent producer must write each exactly once", lines, missing, duplicated)
	}
}

// TestKcatGroupTwoMembers runs two kcat -G members (librdkafka's eager
// range assignor, auto commit) at once over a 6-partition topic while
// 20,000 records are produced, then stops both with SIGTERM (kcat closes
// the consumer, which commits). Every record must be read by one of them,
// exactly as produced; records read twice (a rebalance between a read and
// its auto commit) are counted, and the committed offsets end at the end
// offsets.
func TestKcatGroupTwoMembers(t *testing.T) {
	kcatPath(t)
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions = "kcat-two", "kcat-two", 6
	c.createTopic(topic, partitions, 3)
	type member struct {
		cmd    *exec.Cmd
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	var members []*member
	for range 2 {
		m := &member{}
		m.cmd = exec.Command(kcatPath(t), "-b", strings.Join(c.bootstrap(), ","), "-G", group,
			"-X", "auto.offset.reset=earliest", "-f", "%p %o %k\n", topic)
		m.cmd.Stdout, m.cmd.Stderr = &m.stdout, &m.stderr
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.cmd.Process.Kill() })
		members = append(members, m)
	}
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	want := produceKeyed(t, producer, topic, 10000)
	time.Sleep(2 * time.Second)
	for p, r := range produceKeyed(t, producer, topic, 10000) { // order-independent: a union
		want[p] = r
	}
	ends := endOffsets(t, c, topic, partitions)
	// Lines are complete only once kcat exits, so poll the committed
	// offsets, then stop the members.
	waitUntil(t, "the group's commits to reach the end offsets", 60*time.Second, func() bool {
		return committedAtEnd(c, group, topic, partitions, ends)
	})
	for _, m := range members {
		m.cmd.Process.Signal(syscall.SIGTERM)
		if err := m.cmd.Wait(); err != nil {
			t.Errorf("kcat -G: %v\nstderr:\n%s", err, lastBytes(m.stderr.Bytes(), 2048))
		}
	}
	seen := map[position]int{}
	duplicates := 0
	for i, m := range members {
		read := 0
		for _, line := range strings.Split(strings.TrimRight(m.stdout.String(), "\n"), "\n") {
			if line == "" {
				continue
			}
			var p position
			var key string
			if _, err := fmt.Sscanf(line, "%d %d %s", &p.partition, &p.offset, &key); err != nil {
				t.Fatalf("kcat -G output line %q: %v", line, err)
			}
			if w, ok := want[p]; !ok || string(w.key) != key {
				t.Fatalf("member %d read partition %d offset %d key %q; produced %q", i+1, p.partition, p.offset, key, w.key)
			}
			if seen[p] > 0 {
				duplicates++
			}
			seen[p]++
			read++
		}
		t.Logf("member %d read %d records", i+1, read)
	}
	if len(seen) != len(want) {
		t.Fatalf("the two kcat -G members read %d of %d records", len(seen), len(want))
	}
	t.Logf("%d records read twice (eager rebalance with auto commit allows it)", duplicates)
}
