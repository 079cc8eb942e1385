package realnet

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatTimeout bounds one kcat run.
const kcatTimeout = 60 * time.Second

// kcatPath finds kcat, or skips: .ci/run installs it, and a developer
// without it is told how to get it.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat (librdkafka) is not installed: apt-get install -y kcat to run the librdkafka interop tests")
	}
	return path
}

// kcat runs kcat against the cluster with stdin and returns its stdout.
func kcat(t *testing.T, c interopCluster, stdin []byte, args ...string) []byte {
	t.Helper()
	return kcatAt(t, c.bootstrap(), stdin, args...)
}

// kcatAt runs kcat against brokers with stdin and returns its stdout.
func kcatAt(t *testing.T, brokers []string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	args = append([]string{"-b", strings.Join(brokers, ",")}, args...)
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr (last 2 KiB):\n%s", strings.Join(args, " "), err, lastBytes(stderr.Bytes(), 2048))
	}
	return stdout.Bytes()
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestKcatMetadataProduceConsumeEachCodec drives the interopClusters
// (the 3-node one with RF 3) with librdkafka through kcat: metadata (-L)
// lists every broker at its address, then per codec 100,000 keyed records
// are produced (-P -K:, acks=all), read back with kgo (same records, each
// partition in produce order), and consumed to the end with kcat (-C -e):
// every (partition, offset) kcat prints holds the record kgo read there,
// offsets contiguous from 0.
func TestKcatMetadataProduceConsumeEachCodec(t *testing.T) {
	kcatPath(t)
	for _, cluster := range interopClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			size := cluster.size
			metadata := string(kcat(t, c, nil, "-L"))
			if !strings.Contains(metadata, fmt.Sprintf("%d brokers:", size)) {
				t.Fatalf("kcat -L does not list %d brokers:\n%s", size, metadata)
			}
			for id, addr := range c.brokerAddrs() { // order-independent: each checked alone
				if !strings.Contains(metadata, fmt.Sprintf("broker %d at %s", id, addr)) {
					t.Fatalf("kcat -L does not list broker %d at %s:\n%s", id, addr, metadata)
				}
			}
			for _, codec := range codecs {
				ok := t.Run(codec.name, func(t *testing.T) {
					topic := "kcat-" + codec.name
					c.createTopic(topic, 3, int16(size))
					var input bytes.Buffer
					want := make([]string, 0, interopRecords)
					for i := range interopRecords {
						line := fmt.Sprintf("key-%d:value-%d-%s", i, i, strings.Repeat(string(rune('a'+i%26)), 20+i%50))
						input.WriteString(line + "\n")
						want = append(want, line)
					}
					kcat(t, c, input.Bytes(), "-P", "-t", topic, "-K:", "-X", "compression.codec="+codec.name, "-X", "acks=all")
					if listed := string(kcat(t, c, nil, "-L", "-t", topic)); !strings.Contains(listed, "with 3 partitions") {
						t.Errorf("kcat -L -t %s:\n%s", topic, listed)
					}
					byPosition := checkKgoConsumed(t, c, topic, want)
					out := kcat(t, c, nil, "-C", "-t", topic, "-e", "-o", "beginning", "-K:", "-f", "%p %o %k:%s\n")
					checkKcatConsumed(t, string(out), want, byPosition)
				})
				if !ok {
					break // each failure costs a kcat timeout; one codec's is enough to see
				}
			}
		})
	}
}

// checkKgoConsumed reads the "key:value" lines back with kgo, checks they
// are the lines produced, each once, each partition holding its lines in
// produce order (a line's produce order is its index in want), and returns
// them by position. Without faults librdkafka never retries, so a line out
// of order or read twice means a produce request failed or timed out: the
// test reports how many before failing, to tell a slow machine from a
// broker that answered an error for a batch it kept.
func checkKgoConsumed(t *testing.T, c interopCluster, topic string, want []string) map[position]string {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	index := make(map[string]int, len(want))
	for i, line := range want {
		index[line] = i
	}
	byPosition := make(map[position]string, len(want))
	lastIndex := map[int32]int{}
	read := map[string]bool{}
	outOfOrder, twice := 0, 0
	var firstProblem string
	for len(read) < len(want) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo read %d of %d lines kcat produced", len(read), len(want))
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("kgo consume %s: %v", topic, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			line := string(r.Key) + ":" + string(r.Value)
			i, ok := index[line]
			if !ok {
				t.Fatalf("partition %d offset %d: kgo read %q, which kcat did not produce", r.Partition, r.Offset, line)
			}
			if read[line] {
				twice++
				if firstProblem == "" {
					firstProblem = fmt.Sprintf("partition %d offset %d: line %d read again", r.Partition, r.Offset, i)
				}
			}
			read[line] = true
			if last, ok := lastIndex[r.Partition]; ok && i < last {
				outOfOrder++
				if firstProblem == "" {
					firstProblem = fmt.Sprintf("partition %d offset %d: line %d after line %d", r.Partition, r.Offset, i, last)
				}
			}
			lastIndex[r.Partition] = max(lastIndex[r.Partition], i)
			byPosition[position{r.Partition, r.Offset}] = line
		})
	}
	if outOfOrder > 0 || twice > 0 {
		t.Fatalf("%d lines out of produce order, %d read twice (first: %s): librdkafka retried a produce request "+
			"(idempotence off), which a run without faults must not need", outOfOrder, twice, firstProblem)
	}
	return byPosition
}

// checkKcatConsumed checks kcat's "%p %o key:value" lines against the
// produced lines: offsets in each partition contiguous from 0, each line
// the one kgo read at that position, all of them there.
func checkKcatConsumed(t *testing.T, out string, want []string, byPosition map[position]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	next := map[int32]int64{}
	for _, line := range lines {
		var partition int32
		var offset int64
		var record string
		if _, err := fmt.Sscanf(line, "%d %d %s", &partition, &offset, &record); err != nil {
			t.Fatalf("kcat output line %q: %v", line, err)
		}
		if offset != next[partition] {
			t.Fatalf("partition %d: kcat printed offset %d, want %d: offsets must run 0, 1, 2, ...", partition, offset, next[partition])
		}
		next[partition]++
		if w := byPosition[position{partition, offset}]; record != w {
			t.Fatalf("partition %d offset %d: kcat read %q, kgo read %q", partition, offset, record, w)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("kcat consumed %d records, produced %d", len(lines), len(want))
	}
}
