package realnet

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests in this file drive Strand with kafka-python 2.0.2, Debian's
// python3-kafka, unchanged: testdata/kafkapython/interop.py does the
// client's side and checks it, and the Go side checks its summary again.
// kafka-python is a sixth implementation of the protocol, pure Python, and
// the oldest client here: it probes the broker's version (ApiVersions v0,
// then Metadata v0 on the same connection) and speaks Kafka 2.4's request
// versions.

// kafkaPython is Debian's interpreter, the one apt installs python3-kafka
// for (a python3 earlier on the PATH, such as pyenv's, does not see it).
const kafkaPython = "/usr/bin/python3"

// kafkaPythonCodecs are every codec: python3-snappy, python3-lz4 and
// python3-zstandard give kafka-python the three that need a library.
var kafkaPythonCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// TestKafkaPythonEachCodec drives both clientClusters with kafka-python. Per
// codec the script checks describe_cluster (every broker, the controller
// among them); creates a 3-partition topic (replication factor the
// cluster's size) and checks describe_topics (replicas and ISR) and
// describe_configs; produces clientRecords keyed records with acks=all,
// placing each at its acknowledged offset and checking that a key always
// goes to one partition (murmur2, Java's partitioner); consumes them all
// back in a consumer group, each identical to what its offset's
// acknowledgement promised and in offset order; commits, and reads the
// group's offsets back equal to the end offsets with the admin client,
// with list_consumer_groups and describe_consumer_groups (state Empty);
// and deletes the topic.
func TestKafkaPythonEachCodec(t *testing.T) {
	kafkaPythonInstalled(t)
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, codec := range kafkaPythonCodecs {
				t.Run(codec, func(t *testing.T) {
					res := runKafkaPython(t, c.bootstrap(), "kafka-python-"+codec, clientRecords, codec, cluster.size)
					want := interopSummary{Brokers: cluster.size, Produced: clientRecords, Consumed: clientRecords, Partitions: 3}
					if res != want {
						t.Fatalf("kafka-python summary %+v, want %+v", res, want)
					}
				})
			}
		})
	}
}

// kafkaPythonInstalled skips the test without kafka-python and its codec
// libraries, as the kcat tests skip without kcat; .ci/run installs them.
func kafkaPythonInstalled(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kafkaPython, "-c", "import kafka, snappy, lz4, zstandard; print(kafka.__version__)").CombinedOutput()
	if err != nil {
		t.Skipf("kafka-python is not installed (apt-get install python3-kafka python3-snappy python3-lz4 python3-zstandard): %v: %s", err, out)
	}
	t.Logf("kafka-python %s", strings.TrimSpace(string(out)))
}

// runKafkaPython runs interop.py against bootstrap and returns its summary;
// the script's own checks failing fails the test with its reason.
func runKafkaPython(t *testing.T, bootstrap []string, topic string, records int, codec string, replicationFactor int) interopSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kafkaPython, "testdata/kafkapython/interop.py", strings.Join(bootstrap, ","), topic, strconv.Itoa(records), codec, strconv.Itoa(replicationFactor))
	return runInteropScript(t, cmd, "kafka-python "+codec)
}
