package realnet

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// codecs are the compression codecs every interop test runs with.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// producedRecord is what the broker acknowledged for one record.
type producedRecord struct {
	key, value []byte
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
	var mu sync.Mutex
	acked := make(map[position]producedRecord, count)
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range count {
		// Values repeat enough to compress, and differ enough to be checked.
		value := fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 40+i%60))
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i), Value: value}
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
			acked[p] = producedRecord{key: r.Key, value: r.Value}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce to %s: %v", topic, firstErr)
	}
	if len(acked) != count {
		t.Fatalf("produce to %s: %d acknowledged, want %d", topic, len(acked), count)
	}
	return acked
}

// consumeAll reads want records from topic and checks each against what
// its position's acknowledgement promised: same key, same value, no
// duplicates, nothing missing.
func consumeAll(t *testing.T, cl *kgo.Client, topic string, want map[position]producedRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := make(map[position]bool, len(want))
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
			case !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value):
				t.Fatalf("partition %d offset %d: consumed %q=%q, produced %q=%q", p.partition, p.offset, r.Key, r.Value, w.key, w.value)
			}
			seen[p] = true
		})
	}
}

// TestSingleNodeKgoEachCodec produces 10,000 keyed records per codec to a
// real single-node broker with kgo and consumes them back identical.
func TestSingleNodeKgoEachCodec(t *testing.T) {
	c := startCluster(t, 1, nil)
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			topic := "kgo-" + codec.name
			c.createTopic(topic, 3, 1)
			producer := c.client(kgo.ProducerBatchCompression(codec.codec), kgo.RequiredAcks(kgo.AllISRAcks()))
			acked := produceKeyed(t, producer, topic, 10000)
			consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			consumeAll(t, consumer, topic, acked)
		})
	}
}

// TestThreeNodesRF3AcksAll produces with acks=all to a topic replicated on
// three real nodes (ISR of three checked before producing) and consumes
// everything back.
func TestThreeNodesRF3AcksAll(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3"})
	const topic = "replicated"
	c.createTopic(topic, 3, 3)
	producer := c.client(kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := produceKeyed(t, producer, topic, 10000)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeAll(t, consumer, topic, acked)
}
