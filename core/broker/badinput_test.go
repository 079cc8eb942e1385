package broker

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// TestProduceBadInput checks the answer to each bad produce input of the
// production broker issue (§5) and the foundation's validation.
func TestProduceBadInput(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"message.max.bytes": "2000"})
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)

	good := recordBatch("ok")
	corrupt := recordBatch("x")
	corrupt[len(corrupt)-1] ^= 0xFF // CRC no longer matches
	big := recordBatch(string(make([]byte, 3000)))
	twoBatches := append(recordBatch("a"), recordBatch("b")...)
	control := batch.Build(batch.BuildSpec{Records: []batch.Record{{Value: []byte("v")}}})
	control[22] |= 0x20 // control bit in Attributes (byte 21..22)
	// recompute the CRC after touching Attributes
	setCRC(control)
	// A header without records spanning no offsets (last offset delta -1),
	// intact: Kafka's LogValidator answers INVALID_RECORD.
	empty := append([]byte(nil), good[:batch.HeaderBytes]...)
	binary.BigEndian.PutUint32(empty[8:], batch.HeaderBytes-batch.LogOverheadBytes) // Length
	binary.BigEndian.PutUint32(empty[23:], 0xFFFFFFFF)                              // LastOffsetDelta
	binary.BigEndian.PutUint32(empty[57:], 0)                                       // RecordCount
	setCRC(empty)

	cases := []struct {
		name    string
		topic   string
		p       int32
		acks    int16
		records []byte
		want    int16
	}{
		{"unknown topic", "nope", 0, 1, good, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", "t", 7, 1, good, kerr.UnknownTopicOrPartition.Code},
		{"corrupt batch", "t", 0, 1, corrupt, kerr.CorruptMessage.Code},
		{"too large", "t", 0, 1, big, kerr.MessageTooLarge.Code},
		{"two batches", "t", 0, 1, twoBatches, kerr.InvalidRecord.Code},
		{"control batch from a client", "t", 0, 1, control, kerr.InvalidRecord.Code},
		// Bytes holding no whole batch: Kafka's validateRecords finds none.
		{"truncated batch", "t", 0, 1, good[:len(good)-3], kerr.InvalidRecord.Code},
		{"empty records", "t", 0, 1, nil, kerr.InvalidRecord.Code},
		{"empty batch", "t", 0, 1, empty, kerr.InvalidRecord.Code},
		{"invalid acks", "t", 0, 2, good, kerr.InvalidRequiredAcks.Code},
	}
	for _, tc := range cases {
		r := c.produce(1, tc.topic, tc.p, tc.acks, tc.records)
		if r.ErrorCode != tc.want {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(tc.want))
		}
		if r.ErrorCode != 0 && r.BaseOffset != -1 {
			t.Errorf("%s: failed produce reports base offset %d", tc.name, r.BaseOffset)
		}
	}
	// Nothing bad was appended: the next good batch is offset 0.
	if r := c.produce(1, "t", 0, 1, recordBatch("first")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: error %d offset %d", r.ErrorCode, r.BaseOffset)
	}
}

func TestFetchBadInput(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a", "b"))

	if f := c.fetch(1, "t", 0, 3); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch beyond the LEO: error %d, want OFFSET_OUT_OF_RANGE", f.ErrorCode)
	}
	if f := c.fetch(1, "t", 0, -5); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below the log start: error %d, want OFFSET_OUT_OF_RANGE", f.ErrorCode)
	}
	if f := c.fetch(1, "nope", 0, 0); f.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: error %d", f.ErrorCode)
	}
	req := fetchReq("t", 0, 0, 0)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	if f := c.request(1, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]; f.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("future leader epoch: error %d, want UNKNOWN_LEADER_EPOCH", f.ErrorCode)
	}
}

func TestUnknownTopicAutoCreateAndMetadata(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"num.partitions": "3"})
	c.waitRegistered()
	md := func(allow bool, topic string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = allow
		return c.request(1, req).(*kmsg.MetadataResponse)
	}
	if r := md(false, "auto"); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("no auto-create: error %d", r.Topics[0].ErrorCode)
	}
	if r := md(true, "auto"); r.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("auto-create: error %d, want LEADER_NOT_AVAILABLE", r.Topics[0].ErrorCode)
	}
	c.run(100)
	r := md(true, "auto")
	mt := r.Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 3 || mt.TopicID == [16]byte{} {
		t.Fatalf("after auto-create: error %d, %d partitions, id %v", mt.ErrorCode, len(mt.Partitions), mt.TopicID)
	}
	if r.ControllerID != 1 || len(r.Brokers) != 1 || r.Brokers[0].Port != 9002 {
		t.Fatalf("controller %d brokers %+v", r.ControllerID, r.Brokers)
	}
	for _, p := range mt.Partitions {
		if p.Leader != 1 || p.LeaderEpoch != 0 || len(p.ISR) != 1 {
			t.Errorf("partition %d: leader %d epoch %d isr %v", p.Partition, p.Leader, p.LeaderEpoch, p.ISR)
		}
	}
	if r := c.produce(1, "auto", 2, 1, recordBatch("x")); r.ErrorCode != 0 {
		t.Fatalf("produce to auto-created topic: %d", r.ErrorCode)
	}
	// An invalid name is never created, and is INVALID_TOPIC_EXCEPTION as
	// in Kafka's AutoTopicCreationManager.
	if r := md(true, "bad/name"); r.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: error %d", r.Topics[0].ErrorCode)
	}
	c.run(100)
	if _, ok := c.nodes[1].node.meta.image.TopicByName("bad/name"); ok {
		t.Fatal("a topic with an invalid name was created")
	}
}

func TestCreateTopicsErrors(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "dup", 1, 1)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, spec := range []struct {
		name string
		p    int32
		rf   int16
	}{{"dup", 1, 1}, {"bad name!", 1, 1}, {"zero", 0, 1}, {"rf2", 1, 2}, {"fine", -1, -1}} {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = spec.name, spec.p, spec.rf
		req.Topics = append(req.Topics, t)
	}
	resp := c.request(1, req).(*kmsg.CreateTopicsResponse)
	want := []int16{kerr.TopicAlreadyExists.Code, kerr.InvalidTopicException.Code, kerr.InvalidPartitions.Code, kerr.InvalidReplicationFactor.Code, 0}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("%s: error %v, want %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode), kerr.ErrorForCode(want[i]))
		}
	}
}

func setCRC(b []byte) {
	crc := batch.ComputeCRC(b)
	b[17], b[18], b[19], b[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
}

// TestTopicConfigOverrides: a topic's own settings (ConfigRecords written by
// CreateTopics) govern its produce validation, not the broker defaults.
func TestTopicConfigOverrides(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, spec := range []struct{ name, key, value string }{
		{"small", "max.message.bytes", "200"},
		{"compacted", "cleanup.policy", "compact"},
	} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = spec.name, 1, 1
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = spec.key, &spec.value
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
	}
	for _, rt := range c.request(1, req).(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	c.createTopic(1, "plain", 1, 1)
	c.waitFor("topics hosted", 5000, func() bool {
		return c.nodes[1].node.parts.partitions[partitionKey{"small", 0}] != nil && c.nodes[1].node.parts.partitions[partitionKey{"compacted", 0}] != nil
	})
	big := recordBatch(string(make([]byte, 300)))
	if r := c.produce(1, "small", 0, 1, big); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("300 bytes to max.message.bytes=200: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.produce(1, "plain", 0, 1, big); r.ErrorCode != 0 {
		t.Errorf("300 bytes to a default topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	nullKey := batch.Build(batch.BuildSpec{Records: []batch.Record{{Value: []byte("no key")}}})
	if r := c.produce(1, "compacted", 0, 1, nullKey); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("null key to a compacted topic: %v, want INVALID_RECORD", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.produce(1, "compacted", 0, 1, recordBatch("keyed")); r.ErrorCode != 0 {
		t.Errorf("keyed record to a compacted topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
