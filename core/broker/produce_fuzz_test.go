package broker

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/wire"
)

// produceFrame is a Produce request frame (after the size prefix) of the
// given version with body as everything after the request header.
func produceFrame(version int16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(kmsg.Produce.Int16()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7) // correlation id
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if version >= 9 {
		b = append(b, 0) // flexible header: no tagged fields
	}
	return append(b, body...)
}

// fuzzProduceSeeds are request bodies a client could send to topic "f",
// one per interesting shape.
func fuzzProduceSeeds() [][]byte {
	good := func(codec batch.Codec, keyed bool) []byte {
		recs := []batch.Record{{Value: []byte("v0")}, {Value: []byte("v1"), TimestampDelta: 3}}
		if keyed {
			recs[0].Key, recs[1].Key = []byte("k0"), []byte("k1")
		}
		return batch.Build(batch.BuildSpec{Codec: codec, FirstTimestamp: 1_767_225_600_000, Records: recs})
	}
	idempotent := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Idempotent: true, ProducerID: 1000, ProducerEpoch: 0,
		BaseSequence: 0, Records: []batch.Record{{Key: []byte("k"), Value: []byte("v")}}})
	corrupt := good(batch.CodecNone, true)
	corrupt[len(corrupt)-1] ^= 0xff
	var seeds [][]byte
	for _, tc := range []struct {
		version int16
		acks    int16
		topic   string
		records []byte
	}{
		{3, 1, "f", good(batch.CodecNone, true)},
		{7, -1, "f", good(batch.CodecSnappy, false)},
		{9, 1, "f", good(batch.CodecZstd, true)},
		{11, 0, "f", good(batch.CodecGzip, true)},
		{9, 1, "f", good(batch.CodecLZ4, true)},
		{9, 1, "f", idempotent},
		{9, 1, "f", corrupt},
		{9, 1, "compacted", good(batch.CodecSnappy, false)},
		{9, 1, "absent", good(batch.CodecNone, true)},
		{9, 5, "f", good(batch.CodecNone, true)},
	} {
		req := produceReq(tc.topic, 0, tc.acks, tc.records)
		req.SetVersion(tc.version)
		seeds = append(seeds, append([]byte{byte(tc.version - 3)}, req.AppendTo(nil)...))
	}
	return seeds
}

// FuzzProduceRequest feeds arbitrary Produce request bodies through the
// path realnet runs: the request decoder (core/wire, kmsg), the pre-check
// (the published pre-check, as on a connection goroutine) or none (as in the
// simulator), and the core's Produce handler on a simulated single-node
// cluster with topics "f" and "compacted". The first byte picks the version
// (3..11) and whether the pre-check runs; the rest is the body after the
// request header. Nothing may panic, and a decoded request must get a
// well-formed answer: one partition answer per partition asked, each with a
// known error code (never UNKNOWN_SERVER_ERROR), a base offset exactly when
// it succeeded, and bytes that encode and decode again.
func FuzzProduceRequest(f *testing.F) {
	for _, s := range fuzzProduceSeeds() {
		f.Add(s)
	}
	c := newCluster(&testing.T{}, 1, map[string]string{"log.segment.bytes": "1048576"})
	c.waitRegistered()
	c.createTopicWith("f", nil)
	c.createTopicWith("compacted", map[string]string{"cleanup.policy": "compact"})
	tn := c.nodes[1]
	wrapper := &switchablePrecheck{prechecking: prechecking{node: tn.node}}
	tn.nn.SetHandler(wrapper)
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) == 0 {
			return
		}
		version := 3 + int16(input[0]%9)
		wrapper.precheck = input[0]&0x80 != 0
		frame := produceFrame(version, input[1:])
		_, decoded, err := wire.ParseRequest(frame, wire.VersionsSupported(tn.node.AdvertisedVersions("PLAINTEXT")), wire.DefaultRequestLimits())
		if err != nil {
			return // refused by the decoder: realnet closes the connection
		}
		req := decoded.(*kmsg.ProduceRequest)
		req.TimeoutMillis = min(max(req.TimeoutMillis, 0), 2000) // bounded simulated waits
		resp, err := c.send(1, req)()
		if err != nil {
			t.Fatalf("no answer to a decoded Produce v%d: %v", version, err)
		}
		if req.Acks == 0 {
			return // acks=0 gets no response
		}
		checkProduceAnswer(t, req, resp)
	})
}

// checkProduceAnswer checks that resp is a well-formed answer to req.
func checkProduceAnswer(t *testing.T, req *kmsg.ProduceRequest, r kmsg.Response) {
	resp, ok := r.(*kmsg.ProduceResponse)
	if !ok || resp.GetVersion() != req.GetVersion() {
		t.Fatalf("answer %T to a Produce v%d", r, req.GetVersion())
	}
	if len(resp.Topics) != len(req.Topics) {
		t.Fatalf("%d topics answered, %d asked", len(resp.Topics), len(req.Topics))
	}
	for i, rt := range resp.Topics {
		if rt.Topic != req.Topics[i].Topic || len(rt.Partitions) != len(req.Topics[i].Partitions) {
			t.Fatalf("topic %d: answered %q with %d partitions, asked %q with %d", i, rt.Topic, len(rt.Partitions), req.Topics[i].Topic, len(req.Topics[i].Partitions))
		}
		for j, rp := range rt.Partitions {
			if rp.Partition != req.Topics[i].Partitions[j].Partition {
				t.Fatalf("topic %d partition %d: answered partition %d", i, j, rp.Partition)
			}
			if rp.ErrorCode != 0 && (kerr.ErrorForCode(rp.ErrorCode) == kerr.UnknownServerError) {
				t.Fatalf("%s[%d]: error code %d is unknown or UNKNOWN_SERVER_ERROR", rt.Topic, rp.Partition, rp.ErrorCode)
			}
			if (rp.ErrorCode == 0) != (rp.BaseOffset >= 0) {
				t.Fatalf("%s[%d]: error %v with base offset %d", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset)
			}
		}
	}
	again := kmsg.NewPtrProduceResponse()
	again.SetVersion(resp.GetVersion())
	if err := again.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("the answer does not decode after encoding: %v", err)
	}
}

// switchablePrecheck runs the published pre-check before the node's HandleRequest
// when precheck is set, as realnet does.
type switchablePrecheck struct {
	prechecking
	precheck bool
}

func (s *switchablePrecheck) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if s.precheck {
		s.prechecking.HandleRequest(conn, hdr, req)
		return
	}
	s.node.HandleRequest(conn, hdr, req)
}
