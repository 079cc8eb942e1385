package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cliBroker is a single-node broker served in-process by `strand serve`
// on free ports, for the client tools to talk to.
type cliBroker struct {
	t         *testing.T
	bootstrap string
}

// freePort finds a port nothing listens on (for a moment).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCLIBroker serves one node until the test ends. Groups start without
// Kafka's 3 s initial rebalance delay, and __consumer_offsets is small, to
// keep the tests fast.
func startCLIBroker(t *testing.T) *cliBroker {
	t.Helper()
	clientPort, controllerPort := freePort(t), freePort(t)
	dir := filepath.Join(t.TempDir(), "data")
	cfgPath := writeConfig(t, "1", []string{dir},
		"offsets.topic.replication.factor=1", "offsets.topic.num.partitions=3", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr bytes.Buffer
	stopped := make(chan int, 1)
	go func() {
		stopped <- serveUntil(ctx, []string{"--config", cfgPath,
			"--override", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", clientPort, controllerPort),
			"--override", fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort)}, &bytes.Buffer{}, &serveErr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Errorf("broker did not stop; its log:\n%s", serveErr.String())
		}
	})
	b := &cliBroker{t: t, bootstrap: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	// Ready once a topic can be created: the node is registered and unfenced.
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, stderr := b.run("", "topics", "create", "--topic", "ready", "--timeout", "2s")
		if status == 0 {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready after 20 s: %s\nbroker log:\n%s", stderr, serveErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs `strand <args> --bootstrap-server <broker>` with stdin.
func (b *cliBroker) run(stdin string, args ...string) (int, string, string) {
	b.t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(args, "--bootstrap-server", b.bootstrap)
	status := runWithStdin(args, strings.NewReader(stdin), &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// ok runs a command that must succeed and returns its stdout.
func (b *cliBroker) ok(stdin string, args ...string) string {
	b.t.Helper()
	status, stdout, stderr := b.run(stdin, args...)
	if status != 0 {
		b.t.Fatalf("strand %s: status %d, stderr %s", strings.Join(args, " "), status, stderr)
	}
	return stdout
}

// fails runs a command that must fail with status and mention want on
// stderr.
func (b *cliBroker) fails(status int, want string, args ...string) {
	b.t.Helper()
	got, _, stderr := b.run("", args...)
	if got != status || !strings.Contains(stderr, want) {
		b.t.Fatalf("strand %s: status %d stderr %q, want status %d mentioning %q", strings.Join(args, " "), got, stderr, status, want)
	}
}

func TestCLITopicsLifecycle(t *testing.T) {
	b := startCLIBroker(t)
	if out := b.ok("", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000"); !strings.Contains(out, "Created topic orders.") {
		t.Fatalf("create: %q", out)
	}
	b.fails(1, "TOPIC_ALREADY_EXISTS", "topics", "create", "--topic", "orders")
	b.ok("", "topics", "create", "--topic", "orders", "--if-not-exists")
	b.fails(1, "INVALID_CONFIG", "topics", "create", "--topic", "bad", "--config", "retention.ms=-5")
	b.fails(2, "--topic is required", "topics", "create")

	if list := strings.Fields(b.ok("", "topics", "list")); !containsAll(list, "orders", "ready") || containsAll(list, "bad") {
		t.Fatalf("list: %v", list)
	}
	describe := b.ok("", "topics", "describe", "--topic", "orders")
	for _, want := range []string{"Topic: orders\tTopicId: ", "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000",
		"\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1", "\tPartition: 2\tLeader: 1"} {
		if !strings.Contains(describe, want) {
			t.Fatalf("describe lacks %q:\n%s", want, describe)
		}
	}

	b.ok("", "topics", "alter-config", "--topic", "orders", "--add-config", "retention.ms=1000,cleanup.policy=[delete,compact]", "--config", "segment.ms=60000")
	if d := b.ok("", "topics", "describe", "--topic", "orders"); !strings.Contains(d, "Configs: cleanup.policy=compact,delete,retention.ms=1000,segment.ms=60000\n") {
		t.Fatalf("after alter-config:\n%s", d)
	}
	b.ok("", "topics", "alter-config", "--topic", "orders", "--subtract-config", "cleanup.policy=compact", "--delete-config", "retention.ms")
	if d := b.ok("", "topics", "describe", "--topic", "orders"); !strings.Contains(d, "Configs: cleanup.policy=delete,segment.ms=60000\n") {
		t.Fatalf("after subtract and delete:\n%s", d)
	}
	b.fails(1, `retention.ms: "soon"`, "topics", "alter-config", "--topic", "orders", "--config", "retention.ms=soon")
	b.fails(1, "retention.mss", "topics", "alter-config", "--topic", "orders", "--config", "retention.mss=1")
	b.fails(1, "UNKNOWN_TOPIC_OR_PARTITION", "topics", "alter-config", "--topic", "nope", "--config", "retention.ms=1")
	b.fails(2, "nothing to alter", "topics", "alter-config", "--topic", "orders")

	if out := b.ok("", "topics", "delete", "--topic", "orders"); !strings.Contains(out, "Deleted topic orders.") {
		t.Fatalf("delete: %q", out)
	}
	if list := strings.Fields(b.ok("", "topics", "list")); containsAll(list, "orders") {
		t.Fatalf("list after delete: %v", list)
	}
	b.fails(1, "UNKNOWN_TOPIC_OR_PARTITION", "topics", "delete", "--topic", "orders")
	b.ok("", "topics", "delete", "--topic", "orders", "--if-exists")
	b.fails(2, "unknown subcommand", "topics", "frobnicate")
}

func TestCLIProduceAndConsume(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("", "topics", "create", "--topic", "lines", "--partitions", "1")
	var first, second strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("key-%04d:value %d with spaces", i, i)
		if i < 500 {
			fmt.Fprintln(&first, line)
		} else {
			fmt.Fprintln(&second, line)
		}
	}
	b.ok(first.String(), "produce", "--topic", "lines", "--key-separator", ":", "--compression", "lz4")
	time.Sleep(20 * time.Millisecond)
	betweenMs := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	b.ok(second.String(), "produce", "--topic", "lines", "--key-separator", ":", "--acks", "1")
	all := first.String() + second.String()

	consume := func(args ...string) string {
		t.Helper()
		args = append([]string{"consume", "--topic", "lines", "--print-key", "--key-separator", ":", "--timeout-ms", "1000"}, args...)
		return b.ok("", args...)
	}
	if got := consume("--from-beginning", "--max-messages", "1000"); got != all {
		t.Fatalf("--from-beginning: %d bytes back, %d sent; first line back %q", len(got), len(all), firstLine(got))
	}
	if got := consume("--from-beginning", "--max-messages", "3"); got != strings.Join(strings.SplitAfter(all, "\n")[:3], "") {
		t.Fatalf("--max-messages 3: %q", got)
	}
	lines := strings.SplitAfter(all, "\n")
	if got := consume("--partition", "0", "--offset", "990", "--max-messages", "10"); got != strings.Join(lines[990:1000], "") {
		t.Fatalf("--offset 990: %q", got)
	}
	if got := consume("--timestamp", strconv.FormatInt(betweenMs, 10), "--max-messages", "500"); got != second.String() {
		t.Fatalf("--timestamp between the two runs: %d lines back, want the second run's 500; first %q", strings.Count(got, "\n"), firstLine(got))
	}
	if got := consume(); got != "" {
		t.Fatalf("from the end: %q", got)
	}

	// A line without the separator stops the input with an error naming
	// it; the lines before it are sent (Kafka's console producer sends
	// them when it closes), the lines after it are not.
	if status, _, stderr := b.run("a|before\nno separator\nc|after\n", "produce", "--topic", "lines", "--key-separator", "|"); status != 1 || !strings.Contains(stderr, "line 2") {
		t.Fatalf("a line without the separator: status %d, stderr %q", status, stderr)
	}
	if got := consume("--partition", "0", "--offset", "1000", "--max-messages", "2"); got != "a:before\n" {
		t.Fatalf("after the produce that stopped at line 2, the topic holds %q past the first 1000; want only line 1", got)
	}
	b.fails(2, "--acks", "produce", "--topic", "lines", "--acks", "2")
	b.fails(2, "at most one of", "consume", "--topic", "lines", "--from-beginning", "--offset", "3")
	b.fails(1, "UNKNOWN_TOPIC_OR_PARTITION", "consume", "--topic", "nope", "--from-beginning")
}

func TestCLIGroupsLagAndReset(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("", "topics", "create", "--topic", "events", "--partitions", "3")
	var input strings.Builder
	for i := range 60 {
		fmt.Fprintf(&input, "k%d:v%d\n", i, i)
	}
	b.ok(input.String(), "produce", "--topic", "events", "--key-separator", ":")

	// A kgo group member reads everything, then commits half of each
	// partition.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.bootstrap), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for seen := 0; seen < 60; {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("group consumer: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			ends[r.Partition] = r.Offset + 1
			seen++
		})
	}
	commits := map[string]map[int32]kgo.EpochOffset{"events": {}}
	for p, end := range ends {
		commits["events"][p] = kgo.EpochOffset{Epoch: -1, Offset: end / 2}
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = firstCommitError(resp, err)
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	cl.Close() // leaves the group: it is Empty now

	if list := strings.Fields(b.ok("", "groups", "list")); !containsAll(list, "billing") {
		t.Fatalf("groups list: %v", list)
	}
	expectLag := func(want func(p int32, end int64) int64) {
		t.Helper()
		rows := describeRows(t, b.ok("", "groups", "describe", "billing"))
		if len(rows) != len(ends) {
			t.Fatalf("describe: %d partition rows, want %d", len(rows), len(ends))
		}
		for p, end := range ends {
			current := want(p, end)
			row := rows[p]
			if row[0] != "billing" || row[1] != "events" || row[3] != strconv.FormatInt(current, 10) ||
				row[4] != strconv.FormatInt(end, 10) || row[5] != strconv.FormatInt(end-current, 10) {
				t.Fatalf("partition %d row %v: want current %d, log end %d, lag %d", p, row, current, end, end-current)
			}
		}
	}
	expectLag(func(_ int32, end int64) int64 { return end / 2 })

	dry := b.ok("", "groups", "reset", "billing", "--topic", "events", "--to-earliest")
	if !strings.Contains(dry, "NEW-OFFSET") || strings.Count(dry, "billing") != len(ends) {
		t.Fatalf("dry run output:\n%s", dry)
	}
	expectLag(func(_ int32, end int64) int64 { return end / 2 }) // a dry run changes nothing

	b.ok("", "groups", "reset", "billing", "--topic", "events", "--to-earliest", "--execute")
	expectLag(func(int32, int64) int64 { return 0 })
	b.ok("", "groups", "reset", "--group", "billing", "--topic", "events:1", "--to-offset", "2", "--execute")
	expectLag(func(p int32, _ int64) int64 {
		if p == 1 {
			return 2
		}
		return 0
	})
	b.ok("", "groups", "reset", "billing", "--topic", "events", "--to-latest", "--execute")
	expectLag(func(_ int32, end int64) int64 { return end })

	// A consumer in the group picks up where the reset left it.
	b.ok("", "groups", "reset", "billing", "--topic", "events:0", "--to-offset", "0", "--execute")
	got := b.ok("", "consume", "--topic", "events", "--group", "billing", "--timeout-ms", "1500")
	if n := strings.Count(got, "\n"); int64(n) != ends[0] {
		t.Fatalf("group consumer after resetting partition 0 to 0: %d records, want %d", n, ends[0])
	}
	expectLag(func(_ int32, end int64) int64 { return end })

	b.fails(2, "exactly one of", "groups", "reset", "billing", "--topic", "events")
	b.fails(2, "a group is required", "groups", "describe")
	b.fails(1, "consumer group nosuch does not exist", "groups", "describe", "nosuch")
}

// describeRows parses `groups describe` into rows keyed by partition.
func describeRows(t *testing.T, out string) map[int32][]string {
	t.Helper()
	rows := map[int32][]string{}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 9 || fields[0] == "GROUP" {
			continue // the header, or "Consumer group 'g' has no active members."
		}
		p, err := strconv.Atoi(fields[2])
		if err != nil {
			t.Fatalf("describe row %q: partition %q", line, fields[2])
		}
		rows[int32(p)] = fields
	}
	return rows
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, s := range list {
			found = found || s == w
		}
		if !found {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// firstCommitError is the request's error or the first partition's.
func firstCommitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
