package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// precheckProduce runs the published pre-check on a one-partition Produce of
// records to topic, as realnet's connection reader does, and returns the
// pre-checked request and the partition's verdict.
func precheckProduce(t *testing.T, n *Node, topic string, records []byte) (*PrecheckedProduce, *batchPrecheck) {
	t.Helper()
	req := produceReq(topic, 0, -1, records)
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1, Listener: "PLAINTEXT"}
	prechecked, ok := precheckOn(n, hdr, req).(*PrecheckedProduce)
	if !ok {
		t.Fatalf("the published pre-check did not pre-check a Produce")
	}
	return prechecked, &prechecked.verdicts[0][0]
}

// sendPrechecked hands the node prechecked in place of a Produce, as if it
// had been posted by a connection goroutine, and returns the answer.
func (c *cluster) sendPrechecked(prechecked *PrecheckedProduce) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	tn := c.nodes[1]
	tn.nn.SetHandler(&replacing{node: tn.node, with: prechecked})
	defer tn.nn.SetHandler(tn.node)
	topic := prechecked.Topics[0].Topic
	resp := c.request(1, produceReq(topic, 0, -1, recordBatch("placeholder"))).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

// withoutBaseOffset is a stored batch with its base offset zeroed (the CRC
// does not cover it), so that batches stored at different offsets compare.
func withoutBaseOffset(b []byte) []byte {
	out := bytes.Clone(b)
	clear(out[:8])
	return out
}

// TestPrecheckRecompressesOffTheLoop: a topic with compression.type=gzip,
// produced to in other codecs. The pre-check (a connection goroutine in
// realnet) recompresses each batch, the loop appends the pre-check's copy
// and recompresses nothing itself, and the stored batch is what the loop's
// own recompression stores: gzip, with the producer's id, epoch, sequence
// and timestamps, the records intact, and a retry recognised as one.
// Batches the topic keeps as they are, or that fail the pre-check, are not
// recompressed, and a batch that grows past max.message.bytes when
// recompressed off the loop is refused as when recompressed on it.
func TestPrecheckRecompressesOffTheLoop(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("to-gzip", map[string]string{"compression.type": "gzip"})
	c.createTopicWith("as-sent", map[string]string{"compression.type": "producer"})
	c.createTopicWith("to-zstd-small", map[string]string{"compression.type": "zstd", "max.message.bytes": "200"})
	n := c.nodes[1].node
	if topic := n.parts.precheckView.topics["to-gzip"]; topic == nil || !topic.recompress || topic.codec != batch.CodecGzip {
		t.Fatalf("codec published for to-gzip: %+v, want gzip", topic)
	}
	if topic := n.parts.precheckView.topics["as-sent"]; topic == nil || topic.recompress {
		t.Fatalf("codec published for a topic keeping the producer's: %+v", topic)
	}

	recs := []batch.Record{{Key: []byte("a"), Value: []byte("one one one one"), TimestampDelta: 0}, {Key: []byte("b"), Value: []byte("two two two two"), TimestampDelta: 5}}
	next := int64(0)
	for i, from := range []batch.Codec{batch.CodecNone, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		pid := int64(200 + i)
		spec := batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: from, Records: recs,
			Idempotent: true, ProducerID: pid, ProducerEpoch: 3, BaseSequence: 0}
		sent := batch.Build(spec)
		prechecked, v := precheckProduce(t, n, "to-gzip", bytes.Clone(sent))
		if r := v.recompression; r == nil || r.codec != batch.CodecGzip || r.stored == nil || r.batchBytes != len(r.stored) {
			t.Fatalf("from %s: the pre-check made no gzip copy: %+v", from, r)
		}
		loopBefore := n.parts.loopRecompressions
		if r := c.sendPrechecked(prechecked); r.ErrorCode != 0 || r.BaseOffset != next {
			t.Fatalf("from %s: error %d base %d, want 0 and %d", from, r.ErrorCode, r.BaseOffset, next)
		}
		if n.parts.loopRecompressions != loopBefore {
			t.Errorf("from %s: the loop recompressed %d batches of a pre-checked produce", from, n.parts.loopRecompressions-loopBefore)
		}
		f := c.fetch(1, "to-gzip", 0, next)
		codec, lat, vals := storedBatch(t, f.RecordBatches)
		h, _ := batch.ParseHeader(f.RecordBatches)
		if codec != batch.CodecGzip || lat || joined(vals) != "one one one one,two two two two" {
			t.Fatalf("from %s: stored %s (LogAppendTime %t) values %q", from, codec, lat, vals)
		}
		if h.ProducerID != pid || h.ProducerEpoch != 3 || h.BaseSequence != 0 || h.LastOffsetDelta != 1 ||
			h.FirstTimestamp != 1_767_225_600_000 || h.MaxTimestamp != 1_767_225_600_005 {
			t.Fatalf("from %s: stored header %+v", from, h)
		}
		// The retry, sent as the producer sent it, is the same batch.
		retry, _ := precheckProduce(t, n, "to-gzip", bytes.Clone(sent))
		if r := c.sendPrechecked(retry); r.ErrorCode != 0 || r.BaseOffset != next {
			t.Fatalf("from %s: retry answered error %d base %d, want the first answer (0, %d)", from, r.ErrorCode, r.BaseOffset, next)
		}

		// A batch recompressed by the pre-check is stored byte for byte as
		// the same batch checked and recompressed on the loop (as the
		// simulator sends it). Without a producer id both are appended.
		spec.Idempotent = false
		plain := batch.Build(spec)
		viaPrecheck, _ := precheckProduce(t, n, "to-gzip", bytes.Clone(plain))
		if r := c.sendPrechecked(viaPrecheck); r.ErrorCode != 0 {
			t.Fatalf("from %s: batch without a producer id: error %d", from, r.ErrorCode)
		}
		if r := c.produce(1, "to-gzip", 0, -1, bytes.Clone(plain)); r.ErrorCode != 0 {
			t.Fatalf("from %s: unchecked batch: error %d", from, r.ErrorCode)
		}
		if n.parts.loopRecompressions != loopBefore+1 {
			t.Fatalf("from %s: %d loop recompressions for one batch produced without a pre-check", from, n.parts.loopRecompressions-loopBefore)
		}
		offPrecheck, offLoop := c.fetch(1, "to-gzip", 0, next+2), c.fetch(1, "to-gzip", 0, next+4)
		a, _ := batch.ParseHeader(offPrecheck.RecordBatches)
		b, _ := batch.ParseHeader(offLoop.RecordBatches)
		first, second := offPrecheck.RecordBatches[:a.TotalBytes()], offLoop.RecordBatches[:b.TotalBytes()]
		if !bytes.Equal(withoutBaseOffset(first), withoutBaseOffset(second)) {
			t.Fatalf("from %s: the pre-check stored\n%x\nthe loop\n%x", from, first, second)
		}
		next += 6
	}

	// Nothing to recompress: a batch in the topic's codec, a topic keeping
	// the producer's, a batch that fails the pre-check.
	gzipped := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: batch.CodecGzip, Records: recs})
	lz4 := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: batch.CodecLZ4, Records: recs})
	flipped := bytes.Clone(lz4)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct {
		topic   string
		records []byte
	}{
		"in the topic's codec":  {"to-gzip", gzipped},
		"topic keeps the codec": {"as-sent", lz4},
		"corrupt":               {"to-gzip", flipped},
	} { // order-independent: separate cases
		if _, v := precheckProduce(t, n, tc.topic, tc.records); v.recompression != nil {
			t.Errorf("%s: the pre-check recompressed to %s", name, v.recompression.codec)
		}
	}

	// max.message.bytes applies to the pre-check's copy too: incompressible
	// values grow under zstd's framing.
	noise := make([]byte, 120)
	for i := range noise {
		noise[i] = byte(i*151 + 7)
	}
	small := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: []batch.Record{{Key: []byte("k"), Value: noise}}})
	prechecked, v := precheckProduce(t, n, "to-zstd-small", small)
	if r := v.recompression; len(small) > 200 || r == nil || len(r.stored) <= 200 {
		t.Fatalf("test batch of %d bytes, recompressed %+v: want a copy that fits only before", len(small), r)
	}
	loopBefore := n.parts.loopRecompressions
	if r := c.sendPrechecked(prechecked); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("batch growing past max.message.bytes when recompressed by the pre-check: error %d, want MESSAGE_TOO_LARGE", r.ErrorCode)
	}
	if n.parts.loopRecompressions != loopBefore {
		t.Errorf("the loop recompressed the oversized batch again")
	}
}

// TestPrecheckRecompressionRaceFallsBackToTheLoop: the topic's
// compression.type changes between a batch's pre-check and its append. The
// loop stores the batch in the codec the topic names at append time:
// recompressing it itself when the pre-check's copy is in another codec or
// there is none, and storing the batch as sent when the topic now keeps
// the producer's codec.
func TestPrecheckRecompressionRaceFallsBackToTheLoop(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("changing", map[string]string{"compression.type": "gzip"})
	n := c.nodes[1].node
	recs := []batch.Record{{Key: []byte("a"), Value: []byte("one one one one")}, {Key: []byte("b"), Value: []byte("two two two two")}}
	snappy := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: batch.CodecSnappy, Records: recs})
	alterTo := func(compressionType string) {
		t.Helper()
		c.mustAlter(1, "changing", set("compression.type", compressionType))
		c.waitFor("compression.type "+compressionType+" applied", 10000, func() bool {
			return n.parts.topicConfig("changing").CompressionType == compressionType
		})
	}
	steps := []struct {
		// precheckedAs is the codec the pre-check should copy the batch
		// into, or -1 for none; then the topic changes to alteredTo.
		precheckedAs batch.Codec
		alteredTo    string
		wantStored   batch.Codec
		wantLoop     int64
	}{
		{batch.CodecGzip, "lz4", batch.CodecLZ4, 1},
		{batch.CodecLZ4, "producer", batch.CodecSnappy, 0},
		{-1, "zstd", batch.CodecZstd, 1},
		{batch.CodecZstd, "snappy", batch.CodecSnappy, 0},
	}
	for i, step := range steps {
		prechecked, v := precheckProduce(t, n, "changing", bytes.Clone(snappy))
		r := v.recompression
		if step.precheckedAs < 0 && r != nil {
			t.Fatalf("step %d: the pre-check recompressed to %s, want no copy", i, r.codec)
		}
		if step.precheckedAs >= 0 && (r == nil || r.stored == nil || r.codec != step.precheckedAs) {
			t.Fatalf("step %d: the pre-check's copy is %+v, want one in %s", i, r, step.precheckedAs)
		}
		alterTo(step.alteredTo)
		loopBefore := n.parts.loopRecompressions
		if r := c.sendPrechecked(prechecked); r.ErrorCode != 0 || r.BaseOffset != int64(2*i) {
			t.Fatalf("step %d: error %d base %d, want 0 and %d", i, r.ErrorCode, r.BaseOffset, 2*i)
		}
		if got := n.parts.loopRecompressions - loopBefore; got != step.wantLoop {
			t.Errorf("step %d: %d recompressions on the loop, want %d", i, got, step.wantLoop)
		}
		codec, _, vals := storedBatch(t, c.fetch(1, "changing", 0, int64(2*i)).RecordBatches)
		if codec != step.wantStored || joined(vals) != "one one one one,two two two two" {
			t.Errorf("step %d: stored %s with values %q after compression.type became %s, want %s", i, codec, vals, step.alteredTo, step.wantStored)
		}
	}
}

// TestPrecheckKeepsNoCopyOverMessageMaxBytes: the pre-check keeps a
// recompressed batch only within the broker's message.max.bytes (200
// here), so that requests waiting for the loop hold little beyond their
// own bytes. Over it, only the copy's size is kept: a topic with the
// broker's limit refuses the batch (MESSAGE_TOO_LARGE) without the loop
// recompressing it, and a topic allowing more gets it recompressed on the
// loop and stored.
func TestPrecheckKeepsNoCopyOverMessageMaxBytes(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"message.max.bytes": "200"})
	c.waitRegistered()
	c.createTopicWith("zstd-default", map[string]string{"compression.type": "zstd"})
	c.createTopicWith("zstd-large", map[string]string{"compression.type": "zstd", "max.message.bytes": "1000"})
	n := c.nodes[1].node
	noise := make([]byte, 120)
	for i := range noise {
		noise[i] = byte(i*151 + 7)
	}
	small := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: []batch.Record{{Key: []byte("k"), Value: noise}}})
	for _, tc := range []struct {
		topic    string
		wantCode int16
		wantLoop int64
	}{
		{"zstd-default", kerr.MessageTooLarge.Code, 0},
		{"zstd-large", 0, 1},
	} {
		prechecked, v := precheckProduce(t, n, tc.topic, bytes.Clone(small))
		if r := v.recompression; len(small) > 200 || r == nil || r.stored != nil || r.batchBytes <= 200 || r.codec != batch.CodecZstd {
			t.Fatalf("%s: batch of %d bytes recompressed %+v: want its zstd size over 200 and no copy", tc.topic, len(small), r)
		}
		loopBefore := n.parts.loopRecompressions
		if r := c.sendPrechecked(prechecked); r.ErrorCode != tc.wantCode {
			t.Errorf("%s: error %v, want %v", tc.topic, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(tc.wantCode))
		}
		if got := n.parts.loopRecompressions - loopBefore; got != tc.wantLoop {
			t.Errorf("%s: %d recompressions on the loop, want %d", tc.topic, got, tc.wantLoop)
		}
		if tc.wantCode == 0 {
			if codec, _, _ := storedBatch(t, c.fetch(1, tc.topic, 0, 0).RecordBatches); codec != batch.CodecZstd {
				t.Errorf("%s: stored %s, want zstd", tc.topic, codec)
			}
		}
	}
}

// TestRecompressionKeepsIdempotenceAndHeader: every producer codec into
// every topic codec: the stored batch verifies (length, CRC), keeps the
// producer id, epoch, sequence, offsets and timestamps, holds the records,
// and a retry of the same batch (same sequence, as sent: in the producer's
// codec) is recognised as a duplicate and answered with the first offsets,
// then the next sequence appends after it.
func TestRecompressionKeepsIdempotenceAndHeader(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
	types := map[batch.Codec]string{batch.CodecNone: "uncompressed", batch.CodecGzip: "gzip", batch.CodecSnappy: "snappy", batch.CodecLZ4: "lz4", batch.CodecZstd: "zstd"}
	recs := []batch.Record{{Key: []byte("a"), Value: []byte("one one one one"), TimestampDelta: 0}, {Key: []byte("b"), Value: []byte("two two two two"), TimestampDelta: 5}}
	pid := int64(100)
	for _, to := range codecs {
		topic := "to-" + types[to]
		c.createTopicWith(topic, map[string]string{"compression.type": types[to]})
		next := int64(0)
		for _, from := range codecs {
			pid++
			spec := batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: from, Records: recs,
				Idempotent: true, ProducerID: pid, ProducerEpoch: 3, BaseSequence: 0}
			sent := batch.Build(spec)
			r := c.produce(1, topic, 0, -1, append([]byte(nil), sent...))
			if r.ErrorCode != 0 || r.BaseOffset != next {
				t.Fatalf("%s from %s: error %d base %d, want 0 and %d", topic, from, r.ErrorCode, r.BaseOffset, next)
			}
			f := c.fetch(1, topic, 0, next)
			h, err := batch.Verify(f.RecordBatches)
			if err != nil {
				t.Fatalf("%s from %s: stored batch: %v", topic, from, err)
			}
			if int(h.TotalBytes()) != len(f.RecordBatches) {
				t.Fatalf("%s from %s: fetched %d bytes, batch says %d", topic, from, len(f.RecordBatches), h.TotalBytes())
			}
			if h.Codec() != to || h.ProducerID != pid || h.ProducerEpoch != 3 || h.BaseSequence != 0 ||
				h.BaseOffset != next || h.LastOffsetDelta != 1 || h.RecordCount != 2 ||
				h.FirstTimestamp != 1_767_225_600_000 || h.MaxTimestamp != 1_767_225_600_005 ||
				h.Attributes&batch.AttrLogAppendTime != 0 {
				t.Fatalf("%s from %s: stored header %+v", topic, from, h)
			}
			if _, _, vals := storedBatch(t, f.RecordBatches); joined(vals) != "one one one one,two two two two" {
				t.Fatalf("%s from %s: values %q", topic, from, vals)
			}
			retry := c.produce(1, topic, 0, -1, append([]byte(nil), sent...))
			if retry.ErrorCode != 0 || retry.BaseOffset != next {
				t.Fatalf("%s from %s: retry of the same sequence: error %d base %d, want the first answer (0, %d)", topic, from, retry.ErrorCode, retry.BaseOffset, next)
			}
			spec.BaseSequence = 2
			if r := c.produce(1, topic, 0, -1, batch.Build(spec)); r.ErrorCode != 0 || r.BaseOffset != next+2 {
				t.Fatalf("%s from %s: next sequence: error %d base %d, want 0 and %d", topic, from, r.ErrorCode, r.BaseOffset, next+2)
			}
			next += 4
		}
	}
}

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
