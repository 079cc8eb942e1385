package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// TestPrecheckCopiesBoundedPerRequest: a Produce whose batches are tiny but
// expand when recompressed (zstd of zeros into an uncompressed topic) must
// not make the pre-check hold copies many times the request's size: the
// request waits for the loop with them, and realnet's connection budgets
// count only the request's bytes. Each copy is within message.max.bytes,
// so the bound per batch alone lets a request of a few kilobytes hold
// megabytes. The copies a request keeps stay within its own batch bytes
// plus one message.max.bytes; the batches beyond are recompressed on the
// loop, stored all the same.
func TestPrecheckCopiesBoundedPerRequest(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("to-none", map[string]string{"compression.type": "uncompressed"})
	n := c.nodes[1].node

	zeros := make([]byte, 200_000)
	tiny := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: batch.CodecZstd,
		Records: []batch.Record{{Key: []byte("k"), Value: zeros}}})
	const batches = 40
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "to-none"
	requestBytes := 0
	for range batches {
		tp := kmsg.NewProduceRequestTopicPartition()
		tp.Partition, tp.Records = 0, bytes.Clone(tiny)
		rt.Partitions = append(rt.Partitions, tp)
		requestBytes += len(tiny)
	}
	req.Topics = append(req.Topics, rt)
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1, Listener: "PLAINTEXT"}
	prechecked, ok := precheckOn(n, hdr, req).(*PrecheckedProduce)
	if !ok {
		t.Fatalf("the published pre-check did not pre-check a Produce")
	}
	kept := 0
	for _, v := range prechecked.verdicts[0] {
		if v.recompression != nil {
			kept += len(v.recompression.stored)
		}
	}
	if bound := requestBytes + n.parts.precheckView.batchBytesMax; kept > bound {
		t.Errorf("a request of %d batch bytes keeps %d bytes of recompressed copies, want at most %d", requestBytes, kept, bound)
	}

	// Every batch is stored uncompressed whichever recompressed it.
	tn := c.nodes[1]
	tn.nn.SetHandler(&replacing{node: tn.node, with: prechecked})
	resp := c.request(1, produceReq("to-none", 0, 1, recordBatch("placeholder"))).(*kmsg.ProduceResponse)
	tn.nn.SetHandler(tn.node)
	for i, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.BaseOffset != int64(i) {
			t.Fatalf("batch %d: error %d base %d, want 0 and %d", i, p.ErrorCode, p.BaseOffset, i)
		}
	}
	for i := range batches {
		fetched := c.fetch(1, "to-none", 0, int64(i)).RecordBatches
		h, err := batch.ParseHeader(fetched)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		codec, _, vals := storedBatch(t, fetched[:h.TotalBytes()])
		if codec != batch.CodecNone || len(vals) != 1 || len(vals[0]) != len(zeros) {
			t.Fatalf("batch %d stored as %s with %d values, want uncompressed with one of %d bytes", i, codec, len(vals), len(zeros))
		}
	}
}
