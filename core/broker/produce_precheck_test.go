package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// precheckOn runs the pre-check n last published (its PrecheckView) on req,
// as realnet's connection readers do, without a buffer budget; before n
// published one, req is handed on unchecked, as realnet does.
func precheckOn(n *Node, hdr env.RequestHeader, req kmsg.Request) kmsg.Request {
	if n.parts.precheckView == nil {
		return req
	}
	return n.parts.precheckView.Precheck(hdr, req, nil)
}

// prechecking is the handler realnet presents: every request goes through
// the published pre-check before HandleRequest, as on a connection
// goroutine. It counts the Produce requests that reached the node
// pre-checked.
type prechecking struct {
	node       *Node
	prechecked int
}

func (p *prechecking) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	req = precheckOn(p.node, hdr, req)
	if _, ok := req.(*PrecheckedProduce); ok {
		p.prechecked++
	}
	p.node.HandleRequest(conn, hdr, req)
}

func (p *prechecking) HandleClosed(conn env.ConnID) { p.node.HandleClosed(conn) }

// createTopicWith creates a one-partition topic with configs and waits for
// its leader.
func (c *cluster) createTopicWith(name string, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	for k, v := range configs { // order-independent: a set of configs
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: error %d", name, code)
	}
	c.waitFor("leader of "+name, 10000, func() bool { return c.nodes[1].node.parts.partitions[partitionKey{name, 0}] != nil })
}

// precheckCase is one batch and the error code Produce must answer for it.
type precheckCase struct {
	name  string
	topic string
	batch func() []byte
	want  int16
}

func precheckCases() []precheckCase {
	const nowMs = 1_767_225_600_000 // the sim clock's start (recordBatch's timestamps)
	snappy := func(keyed bool, deltaMs int64) []byte {
		recs := make([]batch.Record, 20)
		for i := range recs {
			recs[i] = batch.Record{Value: bytes.Repeat([]byte("value "), 20), TimestampDelta: int64(i)}
			if keyed {
				recs[i].Key = []byte(fmt.Sprint("k", i))
			}
		}
		return batch.Build(batch.BuildSpec{Codec: batch.CodecSnappy, FirstTimestamp: nowMs + deltaMs, Records: recs})
	}
	return []precheckCase{
		{"snappy", "plain", func() []byte { return snappy(true, 0) }, 0},
		{"snappy, topic with its own max.message.bytes", "big", func() []byte { return snappy(true, 0) }, 0},
		{"null keys on a plain topic", "plain", func() []byte { return snappy(false, 0) }, 0},
		{"null keys on a compacted topic", "compacted", func() []byte { return snappy(false, 0) }, kerr.InvalidRecord.Code},
		{"keys on a compacted topic", "compacted", func() []byte { return snappy(true, 0) }, 0},
		{"timestamps a day old on a strict topic", "strict", func() []byte { return snappy(true, -86_400_000) }, kerr.InvalidTimestamp.Code},
		{"flipped CRC", "plain", func() []byte { b := snappy(true, 0); b[20] ^= 1; return b }, kerr.CorruptMessage.Code},
		{"snappy garbage under a good CRC", "plain", func() []byte {
			b := snappy(true, 0)
			for i := batch.HeaderBytes; i < len(b); i++ {
				b[i] = 0xff
			}
			binary.BigEndian.PutUint32(b[17:], batch.ComputeCRC(b))
			return b
		}, kerr.CorruptMessage.Code},
		{"over the topic's max.message.bytes", "small", func() []byte { return snappy(true, 0) }, kerr.MessageTooLarge.Code},
		{"unknown topic", "absent", func() []byte { return snappy(true, 0) }, kerr.UnknownTopicOrPartition.Code},
	}
}

// TestPrecheckedProduceAnswersAsUnchecked sends each batch twice, once as
// the simulator does (checked on the loop) and once through the published pre-check
// as realnet does, and demands the same answer from both, the expected one,
// and that the second really was pre-checked.
func TestPrecheckedProduceAnswersAsUnchecked(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("plain", nil)
	c.createTopicWith("big", map[string]string{"max.message.bytes": "8000000"})
	c.createTopicWith("small", map[string]string{"max.message.bytes": "100"})
	c.createTopicWith("compacted", map[string]string{"cleanup.policy": "compact"})
	c.createTopicWith("strict", map[string]string{"message.timestamp.before.max.ms": "60000"})
	tn := c.nodes[1]
	wrapper := &prechecking{node: tn.node}
	for _, tc := range precheckCases() {
		var answers [2]kmsg.ProduceResponseTopicPartition
		for i, prechecked := range []bool{false, true} {
			if prechecked {
				tn.nn.SetHandler(wrapper)
			} else {
				tn.nn.SetHandler(tn.node)
			}
			answers[i] = c.produce(1, tc.topic, 0, 1, tc.batch())
		}
		tn.nn.SetHandler(tn.node)
		for i, a := range answers {
			if a.ErrorCode != tc.want {
				t.Errorf("%s (prechecked %v): error %v, want %v", tc.name, i == 1, kerr.ErrorForCode(a.ErrorCode), kerr.ErrorForCode(tc.want))
			}
		}
		if tc.want == 0 && answers[1].BaseOffset <= answers[0].BaseOffset {
			t.Errorf("%s: pre-checked batch appended at %d, after the first at %d", tc.name, answers[1].BaseOffset, answers[0].BaseOffset)
		}
	}
	if wrapper.prechecked != len(precheckCases()) {
		t.Fatalf("%d produces reached the node pre-checked, want %d", wrapper.prechecked, len(precheckCases()))
	}
}

// TestPrecheckOfOtherBytesIsIgnored swaps a partition's records after the
// pre-check: the verdict belongs to other bytes, so the handler must check
// the new ones itself and refuse them.
func TestPrecheckOfOtherBytesIsIgnored(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("plain", nil)
	tn := c.nodes[1]
	good := recordBatch("a", "b")
	req := produceReq("plain", 0, 1, good)
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1, Listener: "PLAINTEXT"}
	prechecked := precheckOn(tn.node, hdr, req).(*PrecheckedProduce)
	// The last byte is the last record's header count: 2 headers in no
	// bytes is malformed, which only the record walk sees (the CRC is
	// repaired, so the log's own Verify would take it).
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] = 4 // zigzag varint 2
	binary.BigEndian.PutUint32(corrupt[17:], batch.ComputeCRC(corrupt))
	req.Topics[0].Partitions[0].Records = corrupt
	var got *kmsg.ProduceResponse
	tn.nn.SetHandler(&replacing{node: tn.node, with: prechecked})
	got = c.request(1, produceReq("plain", 0, 1, good)).(*kmsg.ProduceResponse)
	if code := got.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRecord.Code {
		t.Fatalf("swapped records answered %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
}

// replacing hands the node a prepared request in place of the next Produce.
type replacing struct {
	node *Node
	with kmsg.Request
}

func (r *replacing) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if _, ok := req.(*kmsg.ProduceRequest); ok && r.with != nil {
		req, r.with = r.with, nil
	}
	r.node.HandleRequest(conn, hdr, req)
}

func (r *replacing) HandleClosed(conn env.ConnID) { r.node.HandleClosed(conn) }

// BenchmarkProduceOnLoop measures what one acks=1 Produce of a snappy batch
// (100 records of 100 bytes) costs the event loop: the time inside
// HandleRequest, reported as loop-ns/produce, with the batch checked on the
// loop ("unchecked", as before the pre-check existed and as in the
// simulator) or pre-checked beforehand ("prechecked", the published pre-check run
// outside the measured time, as realnet's connection goroutines do), into a
// topic keeping the producer's codec or one whose compression.type is gzip
// ("to-gzip": recompressed on the loop, or by the pre-check). ns/op also
// counts the simulated network and client.
func BenchmarkProduceOnLoop(b *testing.B) {
	recs := make([]batch.Record, 100)
	for i := range recs {
		recs[i] = batch.Record{Key: []byte(fmt.Sprint("key-", i)), Value: bytes.Repeat([]byte(fmt.Sprintf("%04d", i)), 25)}
	}
	template := batch.Build(batch.BuildSpec{Codec: batch.CodecSnappy, FirstTimestamp: 1_767_225_600_000, Records: recs})
	for _, tc := range []struct {
		prechecked bool
		topic      map[string]string
		name       string
	}{
		{false, nil, "unchecked"},
		{true, nil, "prechecked"},
		{false, map[string]string{"compression.type": "gzip"}, "unchecked-to-gzip"},
		{true, map[string]string{"compression.type": "gzip"}, "prechecked-to-gzip"},
	} {
		prechecked := tc.prechecked
		b.Run(tc.name, func(b *testing.B) {
			c := newCluster(&testing.T{}, 1, map[string]string{"log.segment.bytes": "1073741824"})
			c.waitRegistered()
			c.createTopicWith("bench", tc.topic)
			timing := &timingHandler{node: c.nodes[1].node, precheck: prechecked}
			c.nodes[1].nn.SetHandler(timing)
			b.SetBytes(int64(len(template)))
			for b.Loop() {
				resp := c.request(1, produceReq("bench", 0, 1, bytes.Clone(template))).(*kmsg.ProduceResponse)
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					b.Fatalf("produce: %v", kerr.ErrorForCode(code))
				}
			}
			b.ReportMetric(float64(timing.produceNs)/float64(timing.produces), "loop-ns/produce")
		})
	}
}

// timingHandler times the node's HandleRequest for Produce requests,
// pre-checking them first (untimed) if precheck is set.
type timingHandler struct {
	node      *Node
	precheck  bool
	produces  int64
	produceNs int64
}

func (h *timingHandler) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if _, ok := req.(*kmsg.ProduceRequest); !ok {
		h.node.HandleRequest(conn, hdr, req)
		return
	}
	if h.precheck {
		req = precheckOn(h.node, hdr, req)
	}
	start := time.Now()
	h.node.HandleRequest(conn, hdr, req)
	h.produceNs += time.Since(start).Nanoseconds()
	h.produces++
}

func (h *timingHandler) HandleClosed(conn env.ConnID) { h.node.HandleClosed(conn) }
