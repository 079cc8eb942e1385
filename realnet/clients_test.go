package realnet

import (
	"bytes"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
)

// This file holds what the sarama and kafka-go interop tests share: the
// clusters they run on, the records they produce, and the ledgers that
// check what came back.

// clientLog, set by STRAND_CLIENT_LOG=1, logs what sarama and kafka-go
// log (retries, errors they recover from) to stderr; nil otherwise.
var clientLog = func() *log.Logger {
	if os.Getenv("STRAND_CLIENT_LOG") == "" {
		return nil
	}
	l := log.New(os.Stderr, "", log.Lmicroseconds)
	sarama.Logger = l
	return l
}()

// kafkaGoLogger is clientLog for kafka-go's Writer and Reader options.
func kafkaGoLogger() kafka.Logger {
	if clientLog == nil {
		return nil
	}
	return kafka.LoggerFunc(clientLog.Printf)
}

// clientRecords is how many keyed records each sarama and kafka-go case
// produces: enough for many batches per partition, few enough that the
// package stays affordable under -race.
const clientRecords = 10_000

// clientClusters are the clusters the sarama and kafka-go tests run on: one
// node in this process (its realnet code under -race) and three `strand
// serve` processes (RF 3, min.insync.replicas 2, as interopClusters). The
// in-process node starts its groups without the initial rebalance delay,
// as procDefaults do, and keeps its group offsets at replication factor 1:
// at Kafka's default of 3 a single broker cannot create the offsets topic,
// and Kafka too answers COORDINATOR_NOT_AVAILABLE until it can.
var clientClusters = []struct {
	name  string
	size  int
	start func(t *testing.T) interopCluster
}{
	{"1-node", 1, func(t *testing.T) interopCluster {
		return startCluster(t, 1, map[string]string{
			"group.initial.rebalance.delay.ms": "0",
			"offsets.topic.replication.factor": "1",
		})
	}},
	{"3-node", 3, func(t *testing.T) interopCluster { return startProcCluster(t, 3, everyNodeVotes, nil) }},
}

// clientKey and clientValue are record i's key and value: values repeat
// enough to compress and differ enough to be checked.
func clientKey(i int) []byte { return fmt.Appendf(nil, "key-%d", i) }

func clientValue(i int) []byte {
	return fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 40+i%60))
}

// consumeChecker checks consumed records against what the acknowledgements
// promised: same key and value at each position, nothing twice, offsets
// rising within each partition.
type consumeChecker struct {
	want map[position]producedRecord
	seen map[position]bool
	last map[int32]int64
}

func newConsumeChecker(want map[position]producedRecord) *consumeChecker {
	return &consumeChecker{want: want, seen: make(map[position]bool, len(want)), last: map[int32]int64{}}
}

// check takes one consumed record.
func (c *consumeChecker) check(partition int32, offset int64, key, value []byte) error {
	p := position{partition, offset}
	w, ok := c.want[p]
	switch {
	case !ok:
		return fmt.Errorf("consumed partition %d offset %d, which no acknowledgement reported", partition, offset)
	case c.seen[p]:
		return fmt.Errorf("consumed partition %d offset %d twice", partition, offset)
	case hasLast(c.last, p):
		return fmt.Errorf("partition %d: consumed offset %d after offset %d", partition, offset, c.last[partition])
	case !bytes.Equal(key, w.key) || !bytes.Equal(value, w.value):
		return fmt.Errorf("partition %d offset %d: consumed %q=%q, produced %q=%q", partition, offset, key, value, w.key, w.value)
	}
	c.seen[p] = true
	c.last[partition] = offset
	return nil
}

// perPartition counts the wanted records of each partition.
func perPartition(want map[position]producedRecord) map[int32]int {
	counts := map[int32]int{}
	for p := range want { // order-independent: counting
		counts[p.partition]++
	}
	return counts
}

// memberLedger records what the members of a consumer group consumed, to
// find a record delivered twice (after its offset was committed) or never.
type memberLedger struct {
	mu sync.Mutex
	// by is the member that consumed each position; twice lists positions
	// consumed a second time.
	by    map[position]int
	twice []string
	// partitions is what each member consumed from, since reset.
	partitions map[int]map[int32]bool
}

func newMemberLedger() *memberLedger {
	return &memberLedger{by: map[position]int{}, partitions: map[int]map[int32]bool{}}
}

// record takes member's consumed record.
func (l *memberLedger) record(member int, partition int32, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := position{partition, offset}
	if first, dup := l.by[p]; dup {
		l.twice = append(l.twice, fmt.Sprintf("partition %d offset %d by member %d, then member %d", partition, offset, first, member))
	}
	l.by[p] = member
	if l.partitions[member] == nil {
		l.partitions[member] = map[int32]bool{}
	}
	l.partitions[member][partition] = true
}

// distinct is how many positions were consumed.
func (l *memberLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.by)
}

// consumedFrom returns the partitions member consumed from, sorted.
func (l *memberLedger) consumedFrom(member int) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.partitions[member]))
}

// checkPhase waits until total distinct positions were consumed, then a
// little longer to catch a late redelivery, and fails on any position
// consumed twice.
func (l *memberLedger) checkPhase(t *testing.T, what string, total int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s: %d records consumed", what, total), 60*time.Second, func() bool { return l.distinct() >= total })
	time.Sleep(300 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.twice) > 0 {
		t.Fatalf("%s: %d records consumed twice, first %s", what, len(l.twice), l.twice[0])
	}
	if len(l.by) != total {
		t.Fatalf("%s: %d distinct records consumed, want %d", what, len(l.by), total)
	}
}

// checkAll checks the ledger holds exactly want's positions.
func (l *memberLedger) checkAll(t *testing.T, want map[position]producedRecord) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range want { // order-independent: each position checked alone
		if _, ok := l.by[p]; !ok {
			t.Fatalf("partition %d offset %d was produced but never consumed", p.partition, p.offset)
		}
	}
	if len(l.by) != len(want) {
		t.Fatalf("consumed %d positions, produced %d", len(l.by), len(want))
	}
}
