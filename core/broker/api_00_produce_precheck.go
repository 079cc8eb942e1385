package broker

// The part of Produce that runs off the event loop (CLARIFICATIONS.md,
// "Zero copy and mmap ... Snappy"): the checks of every batch
// (core/batch.PrecheckProduced: framing, CRC, decompression, every record,
// the topic's key and timestamp rules) and the recompression into the codec
// the topic's compression.type names. The environment runs it on its own
// goroutines (realnet: the connection readers) through the PrecheckView
// the loop last published, an immutable value, so that the loop only
// assigns offsets and appends. Cheap checks come first: a batch is
// decompressed only for a partition the view says this node leads, within
// the topic's max.message.bytes, and within the request's decompression
// budget (strand.produce.request.decompressed.bytes.max). A request that
// was not pre-checked (the simulator's other branch, tests, the group
// coordinators' own appends), or whose topic changed its configuration in
// between, is checked on the loop, against the same budget.

import (
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/batch"
	"strand/core/env"
	"strand/core/replica"
)

// PrecheckView is what the produce pre-check knows of the node, as the
// loop last published it (publishPrecheckView): the partitions it leads and
// each of their topics' produce rules and storage codec. It is immutable:
// the loop builds a new one whenever any of that changes and hands it to
// the environment (env.Network.SetPrechecker). The core keeps no reference
// a connection goroutine could see change.
type PrecheckView struct {
	// clock is the node's clock: the pre-check validates batches at
	// clock.WallMs(), read off the loop (env.Clock allows it).
	clock env.Clock
	// batchBytesMax is the broker's message.max.bytes: the largest
	// recompressed batch the pre-check keeps a copy of.
	batchBytesMax int
	// requestDecompressedBytesMax is
	// strand.produce.request.decompressed.bytes.max.
	requestDecompressedBytesMax int64
	// produceListeners are the listeners that serve Produce: a request on
	// any other is refused before a batch is decompressed.
	produceListeners map[string]bool
	// topics are the topics of the partitions this node leads, internal
	// topics excepted (no client may produce to them).
	topics map[string]*precheckTopic
	// authorizer decides WRITE on each topic (nil: authorization off): a
	// batch of a topic the principal may not write is never decompressed.
	authorizer *acl.Authorizer
}

// precheckTopic is what the pre-check knows of one topic.
type precheckTopic struct {
	// rules are the topic's produce limits, NowMs aside.
	rules batch.ProduceLimits
	// codec is what compression.type stores batches in, when recompress.
	codec      batch.Codec
	recompress bool
	// led are the partitions of the topic this node leads.
	led map[int32]bool
}

func (t *precheckTopic) equal(o *precheckTopic) bool {
	return t.rules == o.rules && t.codec == o.codec && t.recompress == o.recompress && maps.Equal(t.led, o.led)
}

// PrecheckedProduce is a Produce request a PrecheckView examined. Only
// Precheck makes one (its verdicts are unexported), so a verdict the
// handler finds here is trusted; the handler still checks that each
// verdict belongs to the very slice it judges.
type PrecheckedProduce struct {
	*kmsg.ProduceRequest
	// verdicts[i][j] is the pre-check of Topics[i].Partitions[j].Records,
	// if checked.
	verdicts [][]batchPrecheck
	// budget is the request's decompression budget as the pre-check left
	// it; the loop charges the batches it checks itself to it too.
	budget *batch.DecompressionBudget
}

// batchPrecheck is one partition's pre-check, and the bytes it describes.
type batchPrecheck struct {
	// checked is false for a batch the pre-check left to the loop: a
	// partition this node did not lead, or a batch over max.message.bytes.
	checked bool
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

// Precheck runs the checks of req that need no state the loop owns and
// returns the request to hand to HandleRequest: a *PrecheckedProduce for a
// Produce, req itself otherwise. It may run on any goroutine, in parallel
// with the event loop and with itself: the view is immutable. Each batch's
// decompression holds its buffer from buffers (nil: unbounded).
func (v *PrecheckView) Precheck(hdr env.RequestHeader, req kmsg.Request, buffers env.BufferBudget) kmsg.Request {
	produce, ok := req.(*kmsg.ProduceRequest)
	if !ok || hdr.APIKey != kmsg.Produce.Int16() || !v.produceListeners[hdr.Listener] || !validAcks(produce.Acks) {
		// A listener that does not serve Produce closes the connection
		// (SPEC.md §10) and an invalid acks is refused on the loop for
		// every partition, before anything is decompressed.
		return req
	}
	nowMs := v.clock.WallMs()
	budget := batch.NewDecompressionBudget(v.requestDecompressedBytesMax)
	// keepBytes bounds the copies the request keeps in all (see
	// recompression.stored): its own batch bytes plus one
	// message.max.bytes, as tiny batches may expand a thousandfold.
	keepBytes := v.batchBytesMax
	for i := range produce.Topics {
		for j := range produce.Topics[i].Partitions {
			keepBytes += len(produce.Topics[i].Partitions[j].Records)
		}
	}
	verdicts := make([][]batchPrecheck, len(produce.Topics))
	who := acl.Requester{Principal: hdr.Principal, Host: strings.TrimPrefix(hdr.ClientHost, "/")}
	for i := range produce.Topics {
		topic := v.topics[produce.Topics[i].Topic]
		if !v.mayWrite(who, produce.Topics[i].Topic) {
			topic = nil // the loop refuses it, without decompressing
		}
		partitions := produce.Topics[i].Partitions
		verdicts[i] = make([]batchPrecheck, len(partitions))
		for j := range partitions {
			records := partitions[j].Records
			if !v.admits(topic, partitions[j].Partition) || len(records) > topic.rules.BatchBytesMax {
				continue // the loop answers without decompressing
			}
			limits := topic.rules
			limits.NowMs = nowMs
			verdict := &verdicts[i][j]
			*verdict = batchPrecheck{checked: true, records: records}
			reserved := int64(batch.DecompressionBufferBytes(records, limits.DecompressedBytesMax))
			if reserved > 0 && buffers != nil && !buffers.Acquire(reserved) {
				*verdict = batchPrecheck{} // stopping: the loop will never see it
				continue
			}
			verdict.check = batch.PrecheckProduced(records, limits, budget)
			if topic.recompress && verdict.check.Passed() {
				verdict.recompression = v.precheckRecompression(records, topic.codec, limits.DecompressedBytesMax, &keepBytes,
					budget, verdict.check.DecompressedBytes())
			}
			if reserved > 0 && buffers != nil {
				buffers.Release(reserved)
			}
		}
	}
	return &PrecheckedProduce{ProduceRequest: produce, verdicts: verdicts, budget: budget}
}

// admits reports whether the pre-check examines a batch for partition of
// topic (nil if the view does not know it): the cheap checks that come
// before any decompression, as CLARIFICATIONS.md ("Fail closed, answer
// fast") demands. This node must lead the partition; a batch it does not
// lead, or of a topic that does not exist, is answered by the loop
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION) without being
// decompressed. Precheck has already dropped the topics the request's
// principal may not write (mayWrite): their batches are never
// decompressed either.
func (v *PrecheckView) admits(topic *precheckTopic, partition int32) bool {
	return topic != nil && topic.led[partition]
}

// mayWrite reports whether who may write topic: the pre-check's part of
// authorization. The loop decides again, with the ACLs it holds then.
func (v *PrecheckView) mayWrite(who acl.Requester, topic string) bool {
	return v.authorizer == nil || v.authorizer.Allowed(who, acl.Action{Operation: acl.Write, Type: acl.Topic, Name: topic})
}

// validAcks reports whether acks is one Kafka accepts.
func validAcks(acks int16) bool {
	return acks == replica.AcksNone || acks == replica.AcksLeader || acks == replica.AcksAll
}

// precheckRecompression is records, which passed the pre-check, in codec,
// or nil if they are in it already. Decompressing them again costs the
// request's budget what the check's decompression did
// (decompressedBytes); when the budget cannot pay it, or on a failure
// (which only a broken invariant could cause), it gives nil: the loop then
// answers (storedForm charges the budget too, and refuses the batch over
// it). The copy is kept only within keepBytes, which it then takes from.
func (v *PrecheckView) precheckRecompression(records []byte, codec batch.Codec, decompressedBytesMax int, keepBytes *int,
	budget *batch.DecompressionBudget, decompressedBytes int) *recompression {
	h, err := batch.ParseHeader(records)
	if err != nil || h.Codec() == codec {
		return nil
	}
	if !budget.Charge(decompressedBytes) {
		return nil
	}
	out, err := recompressed(records, codec, decompressedBytesMax)
	if err != nil {
		return nil
	}
	r := &recompression{codec: codec, batchBytes: len(out), stored: out}
	if len(out) > v.batchBytesMax || len(out) > *keepBytes {
		r.stored = nil
	} else {
		*keepBytes -= len(out)
	}
	return r
}

// publishPrecheckView builds the view of what this node leads now and hands
// it to the environment if it differs from the one last published. It runs
// on the loop after every metadata apply (applyTopicConfigs), where
// leaderships and topic configurations change. A view behind the loop
// costs only work: a batch it wrongly admits was decompressed for an
// answer the loop gives anyway, one it wrongly leaves out is checked on
// the loop, and a topic whose rules changed is checked again there.
func (pm *partitionManager) publishPrecheckView() {
	view := &PrecheckView{
		clock:                       pm.clock,
		batchBytesMax:               int(pm.cfg.Broker.MessageMaxBytes),
		requestDecompressedBytesMax: pm.cfg.Broker.Limits.ProduceRequestDecompressedBytesMax,
		produceListeners:            map[string]bool{},
		topics:                      map[string]*precheckTopic{},
		authorizer:                  pm.acls.authorizer,
	}
	maps.Copy(view.produceListeners, pm.produceListeners)
	for key, p := range pm.partitions { // order-independent: fills a map
		if key.topic == offsetsTopic || p.replica.Role() != replica.RoleLeader || p.storageFailed() {
			continue
		}
		topic := view.topics[key.topic]
		if topic == nil {
			rules := pm.produceLimits(key.topic)
			rules.NowMs = 0
			codec, recompress := storedCodec(pm.topicConfig(key.topic).CompressionType)
			topic = &precheckTopic{rules: rules, codec: codec, recompress: recompress, led: map[int32]bool{}}
			view.topics[key.topic] = topic
		}
		topic.led[key.index] = true
	}
	if pm.precheckView != nil && pm.precheckView.equal(view) {
		return
	}
	pm.precheckView = view
	pm.net.SetPrechecker(view)
}

// equal reports whether v and o decide every pre-check alike.
func (v *PrecheckView) equal(o *PrecheckView) bool {
	return v.batchBytesMax == o.batchBytesMax && v.requestDecompressedBytesMax == o.requestDecompressedBytesMax &&
		v.authorizer == o.authorizer && maps.Equal(v.produceListeners, o.produceListeners) && maps.EqualFunc(v.topics, o.topics, (*precheckTopic).equal)
}

// precheckOf returns the pre-check of Topics[topic].Partitions[partition] if
// one was made for exactly records, else nil (check everything on the loop).
func (p *PrecheckedProduce) precheckOf(topic, partition int, records []byte) *batchPrecheck {
	if p == nil || topic >= len(p.verdicts) || partition >= len(p.verdicts[topic]) {
		return nil
	}
	v := &p.verdicts[topic][partition]
	if !v.checked || !sameSlice(v.records, records) {
		return nil
	}
	return v
}

// decompressionBudget is the request's decompression budget for the loop's
// own checks: what the pre-check left of it, or a whole one.
func (p *PrecheckedProduce) decompressionBudget(bytesMax int64) *batch.DecompressionBudget {
	if p == nil {
		return batch.NewDecompressionBudget(bytesMax)
	}
	return p.budget
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

// decompressedBytesMaxOf bounds the decompression of one batch for a
// topic's max.message.bytes.
func decompressedBytesMaxOf(messageMaxBytes int32) int {
	return max(decompressedBytesMaxFloor, 4*int(messageMaxBytes))
}

// LoopRecompressions is how many produced batches the node recompressed on
// its event loop (storedForm) since it started, for tests and diagnostics:
// with realnet's pre-check it grows only when a topic's compression.type
// changed between a batch's pre-check and its append.
func (n *Node) LoopRecompressions() int64 { return n.parts.loopRecompressions }
