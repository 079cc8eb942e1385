package broker

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// zstdBatch is a zstd batch of one record whose value inflates to
// valueBytes.
func zstdBatch(valueBytes int) []byte {
	return batch.Build(batch.BuildSpec{Codec: batch.CodecZstd, FirstTimestamp: 1_767_225_600_000,
		Records: []batch.Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("z"), valueBytes)}}})
}

// produceOf is a Produce v9 of one batch per (topic, partition) entry.
func produceOf(acks int16, entries ...struct {
	topic     string
	partition int32
	records   []byte
}) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	for _, e := range entries {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = e.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = e.partition, e.records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

type produceEntry = struct {
	topic     string
	partition int32
	records   []byte
}

// TestPrecheckCheapChecksFirst: a batch to a topic that does not exist is
// never decompressed. The pre-check decompresses a batch only for a
// partition the node leads, within the topic's max.message.bytes, with a
// valid acks; the others are left to the loop, which answers them without
// decompressing (UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE,
// INVALID_REQUIRED_ACKS).
func TestPrecheckCheapChecksFirst(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("led", nil)
	c.createTopicWith("small", map[string]string{"max.message.bytes": "100"})
	n := c.nodes[1].node
	bomb := zstdBatch(1 << 20)
	req := produceOf(1,
		produceEntry{"led", 0, bomb},
		produceEntry{"absent", 0, bomb},
		produceEntry{"led", 7, bomb},
		produceEntry{"small", 0, bomb},
		produceEntry{"__consumer_offsets", 0, bomb},
	)
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1, Listener: "PLAINTEXT"}
	prechecked, ok := precheckOn(n, hdr, req).(*PrecheckedProduce)
	if !ok {
		t.Fatal("the produce was not pre-checked")
	}
	for i, want := range []bool{true, false, false, false, false} {
		if got := prechecked.verdicts[i][0].checked; got != want {
			t.Errorf("entry %d (%s-%d): checked %v, want %v", i, req.Topics[i].Topic, req.Topics[i].Partitions[0].Partition, got, want)
		}
	}
	if spent := prechecked.budget.Spent(); spent < 1<<20 || spent > 1<<20+100 {
		t.Errorf("the pre-check decompressed %d bytes, want one batch's", spent)
	}
	req.Acks = 2
	if _, ok := precheckOn(n, hdr, req).(*PrecheckedProduce); ok {
		t.Errorf("a produce with acks 2 was pre-checked: the loop refuses it whole")
	}
}

// TestProduceDecompressionBudget: a request's batches
// decompress to at most strand.produce.request.decompressed.bytes.max, on
// the pre-check and on the loop alike. The batch that crosses it and every
// compressed batch after it are MESSAGE_TOO_LARGE with a message naming
// the limit; an uncompressed batch after them is still appended.
func TestProduceDecompressionBudget(t *testing.T) {
	compressed, plain := zstdBatch(10_000), recordBatch("plain")
	tooLarge := kerr.MessageTooLarge.Code
	checkDecompressionBudget(t, nil, [][]byte{compressed, compressed, compressed, plain, compressed},
		[]int16{0, 0, tooLarge, 0, tooLarge})
}

// TestRecompressionIsChargedToTheDecompressionBudget: a topic that stores
// lz4 recompresses zstd batches, decompressing each a second time, and the
// request's decompression budget pays for both: with 25,000 bytes, the first
// 10,000-byte batch costs 20,000 (checked, then recompressed), so the second
// is refused MESSAGE_TOO_LARGE naming the limit, pre-checked off the loop or
// checked on it. Charged once, the first two batches would pass.
func TestRecompressionIsChargedToTheDecompressionBudget(t *testing.T) {
	compressed := zstdBatch(10_000)
	tooLarge := kerr.MessageTooLarge.Code
	checkDecompressionBudget(t, map[string]string{"compression.type": "lz4"}, [][]byte{compressed, compressed, compressed},
		[]int16{0, tooLarge, tooLarge})
}

// checkDecompressionBudget produces batches, one entry each to one partition
// of a topic with topicConfigs, in one request to a node whose
// strand.produce.request.decompressed.bytes.max is 25,000, once checked on
// the loop and once pre-checked, and wants the answers' error codes, each
// MESSAGE_TOO_LARGE naming the limit.
func checkDecompressionBudget(t *testing.T, topicConfigs map[string]string, batches [][]byte, want []int16) {
	t.Helper()
	c := newCluster(t, 1, map[string]string{"strand.produce.request.decompressed.bytes.max": "25000"})
	c.waitRegistered()
	c.createTopicWith("bombs", topicConfigs)
	tn := c.nodes[1]
	for _, prechecked := range []bool{false, true} {
		if prechecked {
			tn.nn.SetHandler(&prechecking{node: tn.node})
		}
		var entries []produceEntry
		for _, b := range batches {
			entries = append(entries, produceEntry{"bombs", 0, b})
		}
		resp := c.request(1, produceOf(1, entries...)).(*kmsg.ProduceResponse)
		tn.nn.SetHandler(tn.node)
		var codes []int16
		for _, rt := range resp.Topics {
			p := rt.Partitions[0]
			codes = append(codes, p.ErrorCode)
			if p.ErrorCode == kerr.MessageTooLarge.Code && (p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "strand.produce.request.decompressed.bytes.max")) {
				t.Errorf("prechecked %v: MESSAGE_TOO_LARGE without naming the limit: %v", prechecked, p.ErrorMessage)
			}
		}
		if !slices.Equal(codes, want) {
			t.Errorf("prechecked %v: answers %v, want %v", prechecked, codes, want)
		}
	}
}
