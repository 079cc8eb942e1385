package realnet

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests in this file drive Strand with kafkajs, the Node.js client,
// unchanged: testdata/kafkajs/interop.js does the client's side and checks
// it, and the Go side checks its summary again.

// kafkajsCodecs are the codecs the kafkajs test produces with: the ones
// kafkajs ships (none, gzip) and snappy through kafkajs-snappy, a pure
// JavaScript codec. kafkajs's lz4 and zstd codecs are native modules, left
// out so the test needs no compiler.
var kafkajsCodecs = []string{"none", "gzip", "snappy"}

// kafkajsDir holds the script, its package.json and package-lock.json.
const kafkajsDir = "testdata/kafkajs"

// interopSummary is the summary line an interop script (kafkajs's
// interop.js, kafka-python's interop.py) prints on success, after
// "RESULT ".
type interopSummary struct {
	Brokers    int `json:"brokers"`
	Produced   int `json:"produced"`
	Consumed   int `json:"consumed"`
	Partitions int `json:"partitions"`
}

// TestKafkajsEachCodec drives both clientClusters with kafkajs. Per codec
// the script creates a 3-partition topic (replication factor the cluster's
// size) with the admin client and checks describeCluster and the topic's
// metadata; produces clientRecords keyed records with an idempotent acks=all
// producer, placing each at its offset from the acknowledged base offsets;
// consumes them all back in a consumer group, each identical to what its
// offset's acknowledgement promised and in offset order; commits, and reads
// the committed offsets back equal to the high watermarks; and deletes the
// topic.
func TestKafkajsEachCodec(t *testing.T) {
	node := kafkajsInstalled(t)
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, codec := range kafkajsCodecs {
				t.Run(codec, func(t *testing.T) {
					res := runKafkajs(t, node, c.bootstrap(), "kafkajs-"+codec, clientRecords, codec, cluster.size)
					want := interopSummary{Brokers: cluster.size, Produced: clientRecords, Consumed: clientRecords, Partitions: 3}
					if res != want {
						t.Fatalf("kafkajs summary %+v, want %+v", res, want)
					}
				})
			}
		})
	}
}

// kafkajsInstalled returns the node binary, with kafkajs installed under
// kafkajsDir (npm ci, from package-lock.json, when it is not yet). Without
// Node.js the test skips, as the kcat tests do without kcat; .ci/run and
// `make test` have node and install the packages first.
func kafkajsInstalled(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed: the kafkajs interop test needs node and npm")
	}
	if _, err := os.Stat(filepath.Join(kafkajsDir, "node_modules", "kafkajs")); err == nil {
		return node
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = kafkajsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", kafkajsDir, err, out)
	}
	return node
}

// runKafkajs runs interop.js against bootstrap and returns its summary;
// the script's own checks failing fails the test with its reason.
func runKafkajs(t *testing.T, node string, bootstrap []string, topic string, records int, codec string, replicationFactor int) interopSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "interop.js", strings.Join(bootstrap, ","), topic, strconv.Itoa(records), codec, strconv.Itoa(replicationFactor))
	cmd.Dir = kafkajsDir
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1")
	return runInteropScript(t, cmd, "kafkajs "+codec)
}

// runInteropScript runs an interop script and returns its summary line;
// the script failing (its own checks print why) fails the test.
func runInteropScript(t *testing.T, cmd *exec.Cmd, what string) interopSummary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s (%v): %v\nstderr:\n%s\nstdout:\n%s", what, cmd.Args, err, stderr.String(), stdout.String())
	}
	for line := range strings.Lines(stdout.String()) {
		if summary, ok := strings.CutPrefix(strings.TrimSpace(line), "RESULT "); ok {
			var res interopSummary
			if err := json.Unmarshal([]byte(summary), &res); err != nil {
				t.Fatalf("%s: summary %q: %v", what, summary, err)
			}
			t.Logf("%s: %+v in %v", what, res, time.Since(started).Round(time.Millisecond))
			return res
		}
	}
	t.Fatalf("%s printed no summary line\nstdout:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
	return interopSummary{}
}
