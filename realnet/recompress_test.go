package realnet

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/broker"
	"strand/core/metadata"
)

// TestTopicCodecRecompressedOffTheLoop: kgo producers (snappy, kgo's
// default) into a topic whose compression.type is gzip, on a real node:
// every record comes back, every stored batch is gzip, and the event loop
// recompressed none of them (the published pre-check did, on the connection
// goroutines: CLARIFICATIONS.md, "Snappy"). Then compression.type becomes
// lz4 while a producer keeps going: nothing is lost, every stored batch is
// gzip or lz4, and the batches produced once the node applied the change
// are lz4. Under -race it also checks the codecs the loop publishes to the
// connection goroutines.
func TestTopicCodecRecompressedOffTheLoop(t *testing.T) {
	c := startCluster(t, 1, nil)
	const topic, partitions = "recompressed", 3
	c.createTopic(topic, partitions, 1)
	admin := c.client()
	setCodec := func(codec string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "compression.type", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(codec)
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("set compression.type %s: %v %+v", codec, err, resp)
		}
		c.waitFor("compression.type "+codec+" applied", 10*time.Second, func() bool {
			var got string
			c.nodes[0].Call(func(b *broker.Node) {
				got = b.Image().Configs(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic})["compression.type"]
			})
			return got == codec
		})
	}
	loopRecompressions := func() int64 {
		var n int64
		c.nodes[0].Call(func(b *broker.Node) { n = b.LoopRecompressions() })
		return n
	}

	setCodec("gzip")
	producer := c.client(kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(8<<10))
	before := loopRecompressions()
	acked := produceKeyed(t, producer, topic, 3000)
	if n := loopRecompressions() - before; n != 0 {
		t.Errorf("the event loop recompressed %d batches produced to a gzip topic", n)
	}
	for p, codecs := range storedCodecs(t, c, admin, topic, partitions) {
		for i, codec := range codecs {
			if codec != batch.CodecGzip {
				t.Fatalf("partition %d batch %d stored in %s, want gzip", p, i, codec)
			}
		}
	}

	// The change races with a producer: batches pre-checked before it and
	// appended after are recompressed on the loop instead.
	racing := make(chan error, 1)
	var raced map[position]producedRecord
	go func() {
		var err error
		raced, err = produceKeyedErr(producer, topic, 3000)
		racing <- err
	}()
	setCodec("lz4")
	if err := <-racing; err != nil {
		t.Fatal(err)
	}
	after, err := produceKeyedErr(producer, topic, 300)
	if err != nil {
		t.Fatal(err)
	}
	for p, codecs := range storedCodecs(t, c, admin, topic, partitions) {
		for i, codec := range codecs {
			if codec != batch.CodecGzip && codec != batch.CodecLZ4 {
				t.Fatalf("partition %d batch %d stored in %s, want gzip or lz4", p, i, codec)
			}
		}
		if last := codecs[len(codecs)-1]; last != batch.CodecLZ4 {
			t.Errorf("partition %d: last batch, produced after the change, stored in %s, want lz4", p, last)
		}
	}
	maps.Copy(acked, raced)
	maps.Copy(acked, after)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeAll(t, consumer, topic, acked)
}

// storedCodecs fetches every batch of topic's partitions with raw Fetch
// requests through cl and returns each partition's batch codecs in offset
// order. kgo sends its newest Fetch, which names the topic by id.
func storedCodecs(t *testing.T, c *testCluster, cl *kgo.Client, topic string, partitions int32) [][]batch.Codec {
	t.Helper()
	var topicID [16]byte
	c.nodes[0].Call(func(b *broker.Node) {
		if tp, ok := b.Image().TopicByName(topic); ok {
			topicID = tp.ID
		}
	})
	out := make([][]batch.Codec, partitions)
	for p := range partitions {
		for offset := int64(0); ; {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := req.RequestWith(ctx, cl)
			cancel()
			if err != nil {
				t.Fatalf("fetch partition %d at %d: %v", p, offset, err)
			}
			part := resp.Topics[0].Partitions[0]
			if part.ErrorCode != 0 {
				t.Fatalf("fetch partition %d at %d: error %d", p, offset, part.ErrorCode)
			}
			b := part.RecordBatches
			if len(b) == 0 {
				break
			}
			from := offset
			for len(b) >= batch.HeaderBytes {
				h, err := batch.ParseHeader(b)
				if err != nil || h.TotalBytes() > int64(len(b)) {
					break // a partial batch at the end of the answer
				}
				out[p] = append(out[p], h.Codec())
				offset = h.NextOffset()
				b = b[h.TotalBytes():]
			}
			if offset == from {
				t.Fatalf("fetch partition %d at %d: no whole batch in %d bytes", p, offset, len(part.RecordBatches))
			}
			if offset >= part.HighWatermark {
				break
			}
		}
	}
	return out
}
