package broker

// The part of Produce that needs only the request's bytes: framing, CRC,
// decompression and every record (core/batch.PrecheckProduced), and the
// recompression into the codec the topic's compression.type names, as last
// published by the loop (publishPrecheckCodecs). realnet runs it on
// connection goroutines before posting the request to the event loop, so
// the loop only finishes the topic- and clock-dependent checks, assigns
// offsets and appends (CLARIFICATIONS.md, "Zero copy and mmap ... Snappy").
// A request that did not pass through PrecheckRequest (the simulator, tests,
// the group coordinators' own appends), or whose topic changed its
// compression.type in between, is checked or recompressed on the loop.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// PrecheckedProduce is a Produce request whose batches PrecheckRequest has
// examined. Only PrecheckRequest makes one (its verdicts are unexported), so
// a verdict the handler finds here is trusted; the handler still checks that
// each verdict belongs to the very slice it judges.
type PrecheckedProduce struct {
	*kmsg.ProduceRequest
	// verdicts[i][j] is the pre-check of Topics[i].Partitions[j].Records.
	verdicts [][]batchPrecheck
}

// batchPrecheck is one partition's pre-check, and the bytes it describes.
type batchPrecheck struct {
	records []byte
	check   batch.Precheck
	// recompression is records in the codec the topic's compression.type
	// named at the pre-check, made when that differs from the producer's
	// and the bytes passed; nil otherwise.
	recompression *recompression
}

// recompression is a batch the pre-check recompressed.
type recompression struct {
	codec batch.Codec
	// batchBytes is the recompressed batch's size, which decides
	// MESSAGE_TOO_LARGE.
	batchBytes int
	// stored is the recompressed batch: a copy the request does not alias,
	// with the producer's header (MaxTimestamp not yet stamped). It is nil
	// when over the broker's message.max.bytes (such a batch is refused by
	// every topic but one whose max.message.bytes is larger, where the loop
	// recompresses it), or when the request's copies would pass its own
	// batch bytes plus one message.max.bytes (the loop recompresses the
	// rest): requests waiting for the loop keep at most about twice what
	// the connection budgets count.
	stored []byte
}

// PrecheckRequest runs the checks of req that need only its bytes and returns
// the request to hand to HandleRequest: a *PrecheckedProduce for a Produce,
// req itself otherwise. A batch that passes them, sent in another codec
// than the one its topic's compression.type names, is recompressed here
// too. Unlike every other Node method it may run on any goroutine, in
// parallel with the event loop and with itself: it reads only
// precheckDecompressedBytesMax and precheckBatchBytesMax, fixed at New, and
// the codecs the loop publishes atomically (precheckCodecOf). The answer to
// the request is exactly what it would be without the pre-check.
func (n *Node) PrecheckRequest(hdr env.RequestHeader, req kmsg.Request) kmsg.Request {
	produce, ok := req.(*kmsg.ProduceRequest)
	if !ok || hdr.APIKey != kmsg.Produce.Int16() || !n.listenerServes(hdr.Listener, hdr.APIKey) {
		return req // nothing is decompressed for a listener that refuses the request (SPEC.md §10)
	}
	// keepBytes bounds the copies the request keeps in all (see
	// recompression.stored): its own batch bytes plus one
	// message.max.bytes, as tiny batches may expand a thousandfold.
	keepBytes := n.precheckBatchBytesMax
	for i := range produce.Topics {
		for j := range produce.Topics[i].Partitions {
			keepBytes += len(produce.Topics[i].Partitions[j].Records)
		}
	}
	verdicts := make([][]batchPrecheck, len(produce.Topics))
	for i := range produce.Topics {
		codec, recompress := n.precheckCodecOf(produce.Topics[i].Topic)
		partitions := produce.Topics[i].Partitions
		verdicts[i] = make([]batchPrecheck, len(partitions))
		for j := range partitions {
			v := &verdicts[i][j]
			v.records = partitions[j].Records
			v.check = batch.PrecheckProduced(v.records, n.precheckDecompressedBytesMax)
			if recompress && v.check.Passed() {
				v.recompression = n.precheckRecompression(v.records, codec, &keepBytes)
			}
		}
	}
	return &PrecheckedProduce{ProduceRequest: produce, verdicts: verdicts}
}

// precheckRecompression is records, which passed the pre-check, in codec,
// or nil if they are in it already. A failure (which only a broken
// invariant could cause) also gives nil: the loop then recompresses and
// answers for it. The copy is kept only within keepBytes, which it then
// takes from.
func (n *Node) precheckRecompression(records []byte, codec batch.Codec, keepBytes *int) *recompression {
	h, err := batch.ParseHeader(records)
	if err != nil || h.Codec() == codec {
		return nil
	}
	out, err := recompressed(records, codec, n.precheckDecompressedBytesMax)
	if err != nil {
		return nil
	}
	r := &recompression{codec: codec, batchBytes: len(out), stored: out}
	if len(out) > n.precheckBatchBytesMax || len(out) > *keepBytes {
		r.stored = nil
	} else {
		*keepBytes -= len(out)
	}
	return r
}

// precheckOf returns the pre-check of Topics[topic].Partitions[partition] if
// one was made for exactly records, else nil (check everything on the loop).
func (p *PrecheckedProduce) precheckOf(topic, partition int, records []byte) *batchPrecheck {
	if p == nil || topic >= len(p.verdicts) || partition >= len(p.verdicts[topic]) {
		return nil
	}
	v := &p.verdicts[topic][partition]
	if !sameSlice(v.records, records) {
		return nil
	}
	return v
}

// recompressionTo returns the pre-check's recompression of the batch into
// codec, or nil if it made none into that codec (the topic's
// compression.type changed since, or the request was not pre-checked).
func (v *batchPrecheck) recompressionTo(codec batch.Codec) *recompression {
	if v == nil || v.recompression == nil || v.recompression.codec != codec {
		return nil
	}
	return v.recompression
}

// sameSlice reports whether a and b are the same bytes in memory, not merely
// equal ones.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// decompressedBytesMaxOf bounds decompression for a topic's
// max.message.bytes. The pre-check uses the bound of the broker's
// message.max.bytes, so that for topics that keep it its verdict stands.
func decompressedBytesMaxOf(messageMaxBytes int32) int {
	return max(decompressedBytesMaxFloor, 4*int(messageMaxBytes))
}

// LoopRecompressions is how many produced batches the node recompressed on
// its event loop (storedForm) since it started, for tests and diagnostics:
// with realnet's pre-check it grows only when a topic's compression.type
// changed between a batch's pre-check and its append.
func (n *Node) LoopRecompressions() int64 { return n.loopRecompressions }
