package realnet

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codecs are the compression codecs every interop test runs with
// (production broker issue §6). Uncompressed batches are what every other
// realnet test produces.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// producedRecord is what the broker acknowledged for one record, and the
// order it was produced in (its index in one produceKeyed call).
type producedRecord struct {
	key, value []byte
	seq        int
}

// position is a record's place in the log.
type position struct {
	partition int32
	offset    int64
}

// produceKeyed produces count keyed records to topic and returns them by the
// position each acknowledgement reported.
func produceKeyed(t *testing.T, cl *kgo.Client, topic string, count int) map[position]producedRecord {
	t.Helper()
	acked, err := produceKeyedErr(cl, topic, count)
	if err != nil {
		t.Fatal(err)
	}
	return acked
}

// produceKeyedErr is produceKeyed for any goroutine: it reports a failed
// or missing acknowledgement as an error.
func produceKeyedErr(cl *kgo.Client, topic string, count int) (map[position]producedRecord, error) {
	var mu sync.Mutex
	acked := make(map[position]producedRecord, count)
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for i := range count {
		// Values repeat enough to compress, and differ enough to be checked.
		value := fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 40+i%60))
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i), Value: value}
		seq := i
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			p := position{r.Partition, r.Offset}
			if _, dup := acked[p]; dup {
				firstErr = fmt.Errorf("two records acknowledged at partition %d offset %d", p.partition, p.offset)
			}
			acked[p] = producedRecord{key: r.Key, value: r.Value, seq: seq}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	if len(acked) != count {
		return nil, fmt.Errorf("produce to %s: %d acknowledged, want %d", topic, len(acked), count)
	}
	return acked, nil
}

// checkProduceOrder checks that within each partition the records of one
// produceKeyed call sit in the order they were produced: without faults
// the client never retries, so the log must keep its order.
func checkProduceOrder(t *testing.T, acked map[position]producedRecord) {
	t.Helper()
	byPartition := map[int32][]position{}
	for p := range acked { // order-independent: sorted below
		byPartition[p.partition] = append(byPartition[p.partition], p)
	}
	for partition, ps := range byPartition { // order-independent: each partition checked alone
		slices.SortFunc(ps, func(a, b position) int { return cmp.Compare(a.offset, b.offset) })
		for i := 1; i < len(ps); i++ {
			if acked[ps[i]].seq <= acked[ps[i-1]].seq {
				t.Fatalf("partition %d: record %d at offset %d follows record %d at offset %d: produce order not kept",
					partition, acked[ps[i]].seq, ps[i].offset, acked[ps[i-1]].seq, ps[i-1].offset)
			}
		}
	}
}

// consumeAll reads want records from topic and checks each against what
// its position's acknowledgement promised: same key, same value, no
// duplicates, nothing missing, offsets rising within each partition.
func consumeAll(t *testing.T, cl *kgo.Client, topic string, want map[position]producedRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seen := make(map[position]bool, len(want))
	last := map[int32]int64{}
	for len(seen) < len(want) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: got %d of %d records before the deadline", topic, len(seen), len(want))
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("consume %s: partition %d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			p := position{r.Partition, r.Offset}
			w, ok := want[p]
			switch {
			case !ok:
				t.Fatalf("consumed partition %d offset %d, which no acknowledgement reported", p.partition, p.offset)
			case seen[p]:
				t.Fatalf("consumed partition %d offset %d twice", p.partition, p.offset)
			case hasLast(last, p):
				t.Fatalf("partition %d: consumed offset %d after offset %d", p.partition, p.offset, last[p.partition])
			case !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value):
				t.Fatalf("partition %d offset %d: consumed %q=%q, produced %q=%q", p.partition, p.offset, r.Key, r.Value, w.key, w.value)
			}
			seen[p] = true
			last[p.partition] = p.offset
		})
	}
}

// interopRecords is how many keyed records each interop test produces per
// codec (production broker issue §6).
const interopRecords = 100_000

// hasLast reports whether p's partition already gave an offset at or past
// p's.
func hasLast(last map[int32]int64, p position) bool {
	l, ok := last[p.partition]
	return ok && l >= p.offset
}

// interopCluster is what the interop tests need of a cluster, in process
// (testCluster) or as processes (procCluster).
type interopCluster interface {
	bootstrap() []string
	client(opts ...kgo.Opt) *kgo.Client
	createTopic(name string, partitions int32, rf int16)
	// brokerAddrs is each broker's client address by node id.
	brokerAddrs() map[int32]string
}

// interopClusters starts the two clusters every interop test runs on: one
// node in this process (its realnet code under -race) and three `strand
// serve` processes (RF 3, min.insync.replicas 2; the binary is built
// without -race, which keeps 100,000 records per codec affordable).
var interopClusters = []struct {
	name  string
	size  int
	start func(t *testing.T) interopCluster
}{
	{"1-node", 1, func(t *testing.T) interopCluster { return startCluster(t, 1, nil) }},
	{"3-node", 3, func(t *testing.T) interopCluster { return startProcCluster(t, 3, everyNodeVotes, nil) }},
}

// TestKgoEachCodec drives the interopClusters (the 3-node one with RF 3,
// acks=all, ISR of three checked before producing) with kgo, its
// idempotence off: metadata lists every broker, then per codec 100,000
// keyed records are produced and consumed back identical, each at the
// offset its acknowledgement gave and in produce order per partition.
func TestKgoEachCodec(t *testing.T) {
	for _, cluster := range interopClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			checkKgoMetadata(t, c)
			for _, codec := range codecs {
				t.Run(codec.name, func(t *testing.T) {
					topic := "kgo-" + codec.name
					c.createTopic(topic, 3, int16(cluster.size))
					producer := c.client(kgo.ProducerBatchCompression(codec.codec), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
					acked := produceKeyed(t, producer, topic, interopRecords)
					checkProduceOrder(t, acked)
					consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
					consumeAll(t, consumer, topic, acked)
				})
			}
		})
	}
}

// checkKgoMetadata checks a Metadata request through kgo lists every node
// at its address.
func checkKgoMetadata(t *testing.T, c interopCluster) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	got := map[int32]string{}
	for _, b := range resp.Brokers {
		got[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	if want := c.brokerAddrs(); !maps.Equal(got, want) {
		t.Fatalf("metadata lists brokers %v; want %v", got, want)
	}
}
