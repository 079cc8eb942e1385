package broker

// Behaviours a real Kafka client relies on beyond the happy path, each
// checked against what Apache Kafka's broker does.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// TestDeleteRecordsOnCompactedTopicIsPolicyViolation: Kafka refuses to
// delete records of a topic whose cleanup.policy lacks delete
// (Partition.deleteRecordsOnLeader: POLICY_VIOLATION) and leaves its log
// start offset alone; compact,delete topics allow it.
func TestDeleteRecordsOnCompactedTopicIsPolicyViolation(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("compactonly", map[string]string{"cleanup.policy": "compact"})
	c.createTopicWith("compactdelete", map[string]string{"cleanup.policy": "compact,delete"})
	for _, topic := range []string{"compactonly", "compactdelete"} {
		if r := c.produce(1, topic, 0, -1, recordBatch("a", "b", "c")); r.ErrorCode != 0 {
			t.Fatalf("produce to %s: error %d", topic, r.ErrorCode)
		}
	}

	r := c.deleteRecords(1, "compactonly", 2, 5000)
	code, low := r.ErrorCode, r.LowWatermark
	if code != kerr.PolicyViolation.Code || low != -1 {
		t.Fatalf("DeleteRecords of a compact-only topic: error %d low watermark %d; want POLICY_VIOLATION (%d), -1", code, low, kerr.PolicyViolation.Code)
	}
	if start := c.nodes[1].node.parts.partitions[partitionKey{"compactonly", 0}].log.LogStartOffset(); start != 0 {
		t.Fatalf("refused DeleteRecords moved the log start offset to %d", start)
	}

	if r := c.deleteRecords(1, "compactdelete", 2, 5000); r.ErrorCode != 0 || r.LowWatermark != 2 {
		t.Fatalf("DeleteRecords of a compact,delete topic: error %d low watermark %d; want 0, 2", r.ErrorCode, r.LowWatermark)
	}
}

// TestMetadataInvalidTopicNameIsInvalidTopic: Kafka answers a Metadata
// request for a name no topic can have with INVALID_TOPIC_EXCEPTION, with
// auto-creation allowed or not, so producers fail at once instead of
// retrying UNKNOWN_TOPIC_OR_PARTITION until they time out. A valid unknown
// name stays UNKNOWN_TOPIC_OR_PARTITION without auto-creation.
func TestMetadataInvalidTopicNameIsInvalidTopic(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"auto.create.topics.enable": "true"})
	c.waitRegistered()
	for _, auto := range []bool{true, false} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.AllowAutoTopicCreation = auto
		names := []string{"bad name!", "", ".", "..", strings.Repeat("x", 250)}
		if !auto {
			names = append(names, "valid-but-absent") // with auto-creation it would be created
		}
		for _, name := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.request(1, req).(*kmsg.MetadataResponse)
		for _, mt := range resp.Topics {
			want := kerr.InvalidTopicException.Code
			if *mt.Topic == "valid-but-absent" {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if mt.ErrorCode != want {
				t.Errorf("auto-create %t: topic %q answered error %d, want %d", auto, *mt.Topic, mt.ErrorCode, want)
			}
		}
		if len(resp.Topics) != len(req.Topics) {
			t.Fatalf("auto-create %t: %d topics answered for %d asked", auto, len(resp.Topics), len(req.Topics))
		}
	}
}

// TestMetadataAnswersEachTopicOnce: Kafka takes a Metadata request's topics
// as a set (KafkaApis.getTopicMetadata), so a name or an id asked for many
// times is answered once, in the order first asked, and a request repeating
// one name costs no more than asking it once.
func TestMetadataAnswersEachTopicOnce(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("present", nil)
	present, ok := c.nodes[1].node.meta.image.TopicByName("present")
	if !ok {
		t.Fatal("topic present not in the image")
	}
	id := [16]byte(present.ID)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	ask := func(name *string, topicID [16]byte) {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic, rt.TopicID = name, topicID
		req.Topics = append(req.Topics, rt)
	}
	for range 1000 {
		ask(kmsg.StringPtr(""), [16]byte{})
		ask(kmsg.StringPtr("present"), [16]byte{})
		ask(kmsg.StringPtr("absent"), [16]byte{})
		ask(nil, id)
	}
	resp := c.request(1, req).(*kmsg.MetadataResponse)
	var got []string
	for _, mt := range resp.Topics {
		got = append(got, fmt.Sprintf("%s/%d", deref(mt.Topic), mt.ErrorCode))
	}
	want := []string{
		fmt.Sprintf("/%d", kerr.InvalidTopicException.Code),
		"present/0",
		fmt.Sprintf("absent/%d", kerr.UnknownTopicOrPartition.Code),
		"present/0", // asked by id: answered with its name
	}
	if !slices.Equal(got, want) {
		t.Fatalf("4000 topics asked, 4 distinct: answered %v, want %v", got, want)
	}
}

// TestProduceRecordValidationErrorMessage: Kafka answers a batch that fails
// record validation (a keyless record on a compacted topic, a timestamp out
// of bounds) with INVALID_RECORD or INVALID_TIMESTAMP and, from Produce v8,
// an ErrorMessage saying why; other errors carry none.
func TestProduceRecordValidationErrorMessage(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("keyed", map[string]string{"cleanup.policy": "compact"})
	c.createTopicWith("recent", map[string]string{"message.timestamp.before.max.ms": "60000"})

	keyless := batch.Build(batch.BuildSpec{FirstTimestamp: 1, Records: []batch.Record{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("no key")}}})
	old := batch.Build(batch.BuildSpec{FirstTimestamp: 1, Records: []batch.Record{{Key: []byte("k"), Value: []byte("1970")}}})
	cases := []struct {
		topic   string
		records []byte
		want    int16
		mention string
	}{
		{"keyed", keyless, kerr.InvalidRecord.Code, "records[1].key"},
		{"recent", old, kerr.InvalidTimestamp.Code, "message.timestamp.before.max.ms"},
	}
	for _, tc := range cases {
		r := c.produce(1, tc.topic, 0, -1, tc.records)
		if r.ErrorCode != tc.want {
			t.Fatalf("%s: error %d, want %d", tc.topic, r.ErrorCode, tc.want)
		}
		if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.mention) {
			t.Errorf("%s: ErrorMessage %v, want one naming %q", tc.topic, r.ErrorMessage, tc.mention)
		}
	}
	if r := c.produce(1, "keyed", 5, -1, recordBatch("x")); r.ErrorCode != kerr.UnknownTopicOrPartition.Code || r.ErrorMessage != nil {
		t.Errorf("unknown partition: error %d message %v; want UNKNOWN_TOPIC_OR_PARTITION without a message", r.ErrorCode, r.ErrorMessage)
	}
}

// TestDescribeConfigsErrorsAsKafka: Kafka's ConfigHelper validates a topic
// name before looking it up (INVALID_TOPIC_EXCEPTION), answers an unknown
// topic UNKNOWN_TOPIC_OR_PARTITION without a message, and explains each
// INVALID_REQUEST (another broker's id, a name that is no id, a resource
// type it does not serve) in ErrorMessage.
func TestDescribeConfigsErrorsAsKafka(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{
		{kmsg.ConfigResourceTypeTopic, "bad name!"},
		{kmsg.ConfigResourceTypeTopic, "absent"},
		{kmsg.ConfigResourceTypeBroker, "2"},
		{kmsg.ConfigResourceTypeBroker, "one"},
		{kmsg.ConfigResourceTypeBrokerLogger, "1"},
		{kmsg.ConfigResourceTypeBroker, "1"},
	} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, res)
	}
	resp := c.request(1, req).(*kmsg.DescribeConfigsResponse)
	want := []struct {
		code    int16
		message string // "" for none
	}{
		{kerr.InvalidTopicException.Code, "bad name!"},
		{kerr.UnknownTopicOrPartition.Code, ""},
		{kerr.InvalidRequest.Code, "this is broker 1"},
		{kerr.InvalidRequest.Code, "must be a broker id"},
		{kerr.InvalidRequest.Code, "only TOPIC and BROKER"},
		{0, ""},
	}
	if len(resp.Resources) != len(want) {
		t.Fatalf("%d resources answered, want %d", len(resp.Resources), len(want))
	}
	for i, w := range want {
		got := resp.Resources[i]
		if got.ErrorCode != w.code {
			t.Errorf("%v %q: error %d, want %d", got.ResourceType, got.ResourceName, got.ErrorCode, w.code)
		}
		switch {
		case w.message == "" && got.ErrorMessage != nil:
			t.Errorf("%v %q: ErrorMessage %q, want none", got.ResourceType, got.ResourceName, *got.ErrorMessage)
		case w.message != "" && (got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, w.message)):
			t.Errorf("%v %q: ErrorMessage %v, want one with %q", got.ResourceType, got.ResourceName, got.ErrorMessage, w.message)
		}
	}
	if len(resp.Resources[5].Configs) == 0 {
		t.Error("this broker's own configuration came back empty")
	}
}

// storedBatch checks the one batch a fetch returned (framing and CRC), and
// returns its codec, its timestamp type bit and its record values.
func storedBatch(t *testing.T, b []byte) (batch.Codec, bool, []string) {
	t.Helper()
	h, err := batch.Verify(b)
	if err != nil {
		t.Fatalf("stored batch: %v", err)
	}
	if int(h.TotalBytes()) != len(b) {
		t.Fatalf("fetched %d bytes, want exactly one batch of %d", len(b), h.TotalBytes())
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("stored batch: %v", err)
	}
	if rb.Records, err = batch.Decompress(h.Codec(), rb.Records, 1<<20); err != nil {
		t.Fatalf("stored %s records: %v", h.Codec(), err)
	}
	vals, err := decodeRecords(rb)
	if err != nil {
		t.Fatal(err)
	}
	return h.Codec(), h.Attributes&batch.AttrLogAppendTime != 0, vals
}

// TestTopicCompressionTypeRecompresses: Kafka stores produced batches in
// the codec the topic's compression.type names, recompressing those sent
// in another (LogValidator); "producer" keeps the producer's codec. The
// records, their offsets and a LogAppendTime stamp survive the rewrite.
func TestTopicCompressionTypeRecompresses(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("to-gzip", map[string]string{"compression.type": "gzip"})
	c.createTopicWith("to-none", map[string]string{"compression.type": "uncompressed", "message.timestamp.type": "LogAppendTime"})
	c.createTopicWith("as-sent", map[string]string{"compression.type": "producer"})
	c.createTopicWith("to-zstd-small", map[string]string{"compression.type": "zstd", "max.message.bytes": "200"})

	recs := []batch.Record{{Key: []byte("a"), Value: []byte("one one one one")}, {Key: []byte("b"), Value: []byte("two two two two")}}
	plain := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: recs})
	lz4 := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: batch.CodecLZ4, Records: recs})
	cases := []struct {
		topic     string
		sent      []byte
		wantCodec batch.Codec
		wantLAT   bool
	}{
		{"to-gzip", plain, batch.CodecGzip, false},
		{"to-gzip", lz4, batch.CodecGzip, false},
		{"to-none", lz4, batch.CodecNone, true},
		{"as-sent", lz4, batch.CodecLZ4, false},
	}
	next := map[string]int64{}
	for _, tc := range cases {
		sent := append([]byte(nil), tc.sent...)
		r := c.produce(1, tc.topic, 0, -1, sent)
		if r.ErrorCode != 0 || r.BaseOffset != next[tc.topic] {
			t.Fatalf("%s: produce error %d base offset %d, want 0 and %d", tc.topic, r.ErrorCode, r.BaseOffset, next[tc.topic])
		}
		f := c.fetch(1, tc.topic, 0, next[tc.topic])
		codec, lat, vals := storedBatch(t, f.RecordBatches)
		if codec != tc.wantCodec || lat != tc.wantLAT {
			t.Errorf("%s: stored %s (LogAppendTime %t), want %s (%t)", tc.topic, codec, lat, tc.wantCodec, tc.wantLAT)
		}
		if joined(vals) != "one one one one,two two two two" {
			t.Errorf("%s: stored values %q", tc.topic, vals)
		}
		next[tc.topic] += 2
	}

	// The size limit applies to the batch as stored, as Kafka re-checks it
	// after recompressing: incompressible values grow under zstd's framing.
	noise := make([]byte, 120)
	for i := range noise {
		noise[i] = byte(i*151 + 7)
	}
	small := batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: []batch.Record{{Key: []byte("k"), Value: noise}}})
	if len(small) > 200 {
		t.Fatalf("test batch of %d bytes is over the limit already", len(small))
	}
	if r := c.produce(1, "to-zstd-small", 0, -1, small); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("batch of %d bytes growing past max.message.bytes when recompressed: error %d, want MESSAGE_TOO_LARGE", len(small), r.ErrorCode)
	}
}

// TestCreateTopicsAnswersTheNewTopicsConfigs: CreateTopics v5+ answers each
// created topic with its partitions, replication factor and effective
// configs (KIP-525), as Kafka's controller does, for a validate-only request
// too: the values and sources DescribeConfigs would give, none read-only.
// Sent through a node that forwards to the controller.
func TestCreateTopicsAnswersTheNewTopicsConfigs(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"log.retention.hours": "24"})
	c.waitRegistered()
	for _, validateOnly := range []bool{true, false} {
		name := "configured"
		if validateOnly {
			name = "validated"
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 2
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "segment.bytes", kmsg.StringPtr("2097152")
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		via := int32(2)
		if c.nodes[via].node.ControllerActive() {
			via = 3
		}
		got := c.request(via, req).(*kmsg.CreateTopicsResponse).Topics[0]
		if got.ErrorCode != 0 || got.NumPartitions != 3 || got.ReplicationFactor != 2 {
			t.Fatalf("validate-only %t: error %d, %d partitions, replication factor %d; want 0, 3, 2", validateOnly, got.ErrorCode, got.NumPartitions, got.ReplicationFactor)
		}
		bySource := map[string]int8{}
		for i, e := range got.Configs {
			if i > 0 && got.Configs[i-1].Name >= e.Name {
				t.Errorf("validate-only %t: configs not sorted at %s", validateOnly, e.Name)
			}
			if e.ReadOnly || e.IsSensitive || e.Value == nil {
				t.Errorf("validate-only %t: %s read-only %t sensitive %t value %v", validateOnly, e.Name, e.ReadOnly, e.IsSensitive, e.Value)
			}
			bySource[e.Name+"="+deref(e.Value)] = e.Source
		}
		want := map[string]kmsg.ConfigSource{
			"segment.bytes=2097152":     kmsg.ConfigSourceDynamicTopicConfig,
			"retention.ms=86400000":     kmsg.ConfigSourceStaticBrokerConfig,
			"min.insync.replicas=1":     kmsg.ConfigSourceDefaultConfig,
			"cleanup.policy=delete":     kmsg.ConfigSourceDefaultConfig,
			"max.message.bytes=1048588": kmsg.ConfigSourceDefaultConfig,
		}
		for kv, source := range want { // order-independent: each checked alone
			if s, ok := bySource[kv]; !ok || s != int8(source) {
				t.Errorf("validate-only %t: %s answered %t with source %d; want source %d (configs %v)", validateOnly, kv, ok, s, source, bySource)
			}
		}
		if validateOnly {
			continue
		}
		// The answer agrees with what DescribeConfigs says of the topic.
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dreq.SetVersion(4)
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, name
		dreq.Resources = append(dreq.Resources, dr)
		described := c.request(via, dreq).(*kmsg.DescribeConfigsResponse).Resources[0].Configs
		if len(described) != len(got.Configs) {
			t.Fatalf("CreateTopics answered %d configs, DescribeConfigs %d", len(got.Configs), len(described))
		}
		for i, d := range described {
			e := got.Configs[i]
			if d.Name != e.Name || deref(d.Value) != deref(e.Value) || int8(d.Source) != e.Source {
				t.Errorf("config %d: CreateTopics %s=%v (source %d), DescribeConfigs %s=%v (source %d)", i, e.Name, deref(e.Value), e.Source, d.Name, deref(d.Value), d.Source)
			}
		}
	}
}

// TestOffsetDeleteOfUnknownPartitionsIsUnknownTopic: Kafka's broker answers
// each OffsetDelete partition its metadata lacks (an unknown topic, a
// partition past the topic's count) with UNKNOWN_TOPIC_OR_PARTITION before
// the coordinator sees the request, and deletes the rest; an unknown group
// is GROUP_ID_NOT_FOUND for the whole answer.
func TestOffsetDeleteOfUnknownPartitionsIsUnknownTopic(t *testing.T) {
	c := groupCluster(t, 1)
	c.createTopic(1, "events", 2, 3)
	coord := c.waitCoordinator(1, "g")
	c.waitServing(coord, "g")
	commit := simpleCommitReq("g", map[string]int64{"events 0": 3, "events 1": 4}, []string{"events 0", "events 1"})
	for _, rt := range c.request(coord, commit).(*kmsg.OffsetCommitResponse).Topics {
		if code := rt.Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s: %v", rt.Topic, kerr.ErrorForCode(code))
		}
	}

	offsetDelete := func(groupID string) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = groupID
		for topic, partitions := range map[string][]int32{"events": {0, 7}, "nosuch": {0}} { // order-independent: answers looked up by name
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			for _, p := range partitions {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return c.request(coord, req).(*kmsg.OffsetDeleteResponse)
	}

	r := offsetDelete("g")
	if r.ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	got := map[string]int16{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			got[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	want := map[string]int16{"events-0": 0, "events-7": kerr.UnknownTopicOrPartition.Code, "nosuch-0": kerr.UnknownTopicOrPartition.Code}
	if !maps.Equal(got, want) {
		t.Fatalf("OffsetDelete answered %v, want %v", got, want)
	}
	if offsets := fetchedOffsets(t, c.request(coord, offsetFetchReq("g")).(*kmsg.OffsetFetchResponse)); offsets[0] != -1 || offsets[1] != 4 {
		t.Fatalf("offsets after OffsetDelete of events-0: %v, want 0 gone and 1 at 4", offsets)
	}

	if r := offsetDelete("nogroup"); r.ErrorCode != kerr.GroupIDNotFound.Code || len(r.Topics) != 0 {
		t.Fatalf("OffsetDelete of an unknown group: error %d with %d topics; want GROUP_ID_NOT_FOUND (%d) alone", r.ErrorCode, len(r.Topics), kerr.GroupIDNotFound.Code)
	}
}

// TestDescribeLogDirsListsEachPartitionsSize: DescribeLogDirs answers each
// log directory, named as log.dirs names it, with the partitions it holds
// (all, or those asked for), each with its log's size and an offset lag of
// 0, as Kafka's ReplicaManager.describeLogDirs does; space stays unknown.
func TestDescribeLogDirsListsEachPartitionsSize(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "d", 2, 1)
	if r := c.produce(1, "d", 0, -1, recordBatch("a", "b", "c")); r.ErrorCode != 0 {
		t.Fatalf("produce: error %d", r.ErrorCode)
	}
	size0 := c.nodes[1].node.parts.partitions[partitionKey{"d", 0}].log.SizeBytes()
	if size0 == 0 {
		t.Fatal("d-0 holds no bytes after a produce")
	}

	describe := func(topics map[string][]int32) kmsg.DescribeLogDirsResponseDir {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(4)
		for topic, partitions := range topics { // order-independent: one topic
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = topic, partitions
			req.Topics = append(req.Topics, rt)
		}
		resp := c.request(1, req).(*kmsg.DescribeLogDirsResponse)
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
			t.Fatalf("DescribeLogDirs: error %d, %d dirs; want 0 and one", resp.ErrorCode, len(resp.Dirs))
		}
		d := resp.Dirs[0]
		if d.Dir != "/data/node1" || d.ErrorCode != 0 || d.TotalBytes != -1 || d.UsableBytes != -1 {
			t.Fatalf("dir %q error %d total %d usable %d; want /data/node1, 0, -1, -1", d.Dir, d.ErrorCode, d.TotalBytes, d.UsableBytes)
		}
		return d
	}
	sizes := func(d kmsg.DescribeLogDirsResponseDir) map[string]int64 {
		out := map[string]int64{}
		for _, rt := range d.Topics {
			for _, p := range rt.Partitions {
				if p.OffsetLag != 0 || p.IsFuture {
					t.Errorf("%s-%d: offset lag %d, future %t; want 0, false", rt.Topic, p.Partition, p.OffsetLag, p.IsFuture)
				}
				out[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.Size
			}
		}
		return out
	}
	if got, want := sizes(describe(nil)), map[string]int64{"d-0": size0, "d-1": 0}; !maps.Equal(got, want) {
		t.Fatalf("every partition: %v, want %v", got, want)
	}
	if got, want := sizes(describe(map[string][]int32{"d": {1}})), map[string]int64{"d-1": 0}; !maps.Equal(got, want) {
		t.Fatalf("d-1 only: %v, want %v", got, want)
	}
}

// TestAclRequestsAreSecurityDisabled: Strand has no authorizer, so the ACL
// APIs answer as a Kafka broker without authorizer.class.name does:
// SECURITY_DISABLED for DescribeAcls and for each creation and deletion.
func TestAclRequestsAreSecurityDisabled(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.SetVersion(3)
	if r := c.request(1, describe).(*kmsg.DescribeACLsResponse); r.ErrorCode != kerr.SecurityDisabled.Code || r.ErrorMessage == nil {
		t.Errorf("DescribeAcls: error %d message %v; want SECURITY_DISABLED (%d) with a message", r.ErrorCode, r.ErrorMessage, kerr.SecurityDisabled.Code)
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.SetVersion(3)
	create.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	r := c.request(1, create).(*kmsg.CreateACLsResponse)
	if len(r.Results) != 2 {
		t.Fatalf("CreateAcls of 2: %d results", len(r.Results))
	}
	for i, res := range r.Results {
		if res.ErrorCode != kerr.SecurityDisabled.Code {
			t.Errorf("CreateAcls result %d: error %d, want SECURITY_DISABLED", i, res.ErrorCode)
		}
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	del.Filters = make([]kmsg.DeleteACLsRequestFilter, 1)
	if d := c.request(1, del).(*kmsg.DeleteACLsResponse); len(d.Results) != 1 || d.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DeleteAcls of 1 filter: %+v, want one SECURITY_DISABLED result", d.Results)
	}
}

// TestListOffsetsRefusesDuplicatesAndUndefinedTimestamps: as Kafka, a
// partition named twice in one ListOffsets is INVALID_REQUEST (each time),
// and a negative timestamp the version does not define is
// UNSUPPORTED_VERSION: max timestamp (-3) before v7, v8's -4 and any other
// negative, instead of a search for the first record after it.
func TestListOffsetsRefusesDuplicatesAndUndefinedTimestamps(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "lo", 2, 1)
	if r := c.produce(1, "lo", 0, -1, recordBatch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: error %d", r.ErrorCode)
	}
	listOffsets := func(version int16, asks ...[2]int64) []kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		for _, a := range asks {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = int32(a[0]), a[1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return c.request(1, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	}
	check := func(what string, got kmsg.ListOffsetsResponseTopicPartition, code int16, offset int64) {
		t.Helper()
		if got.ErrorCode != code || got.Offset != offset {
			t.Errorf("%s: error %d offset %d; want error %d offset %d", what, got.ErrorCode, got.Offset, code, offset)
		}
	}
	got := listOffsets(6, [2]int64{1, -1}, [2]int64{1, -2}, [2]int64{0, -1})
	check("v6 lo-1 latest, named twice", got[0], kerr.InvalidRequest.Code, -1)
	check("v6 lo-1 earliest, named twice", got[1], kerr.InvalidRequest.Code, -1)
	check("v6 lo-0 latest", got[2], 0, 2)
	got = listOffsets(6, [2]int64{0, -3})
	check("v6 max timestamp", got[0], kerr.UnsupportedVersion.Code, -1)
	got = listOffsets(7, [2]int64{0, -3}, [2]int64{1, -4})
	check("v7 max timestamp", got[0], 0, 0) // both records carry the same timestamp
	check("v7 timestamp -4", got[1], kerr.UnsupportedVersion.Code, -1)
	got = listOffsets(7, [2]int64{0, -7})
	check("v7 timestamp -7", got[0], kerr.UnsupportedVersion.Code, -1)
}

// TestOffsetsTopicIsCreatedWithKafkasSegmentBytes: __consumer_offsets is
// created with segment.bytes = offsets.topic.segment.bytes (Kafka's
// groupMetadataTopicConfigs, 100 MiB by default), beside cleanup.policy
// compact, so that compaction, which leaves the active segment alone,
// reaches old commits long before log.segment.bytes' 1 GiB.
func TestOffsetsTopicIsCreatedWithKafkasSegmentBytes(t *testing.T) {
	for _, tc := range []struct {
		setting string // offsets.topic.segment.bytes, "" for the default
		want    string
	}{{"", "104857600"}, {"2097152", "2097152"}} {
		extra := map[string]string{"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"}
		if tc.setting != "" {
			extra["offsets.topic.segment.bytes"] = tc.setting
		}
		c := newCluster(t, 1, extra)
		c.waitRegistered()
		c.waitCoordinator(1, "g")
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, offsetsTopic, []string{"segment.bytes", "cleanup.policy"}
		req.Resources = append(req.Resources, r)
		got := map[string]string{}
		for _, e := range c.request(1, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			if e.Source == kmsg.ConfigSourceDynamicTopicConfig {
				got[e.Name] = deref(e.Value)
			}
		}
		if want := map[string]string{"segment.bytes": tc.want, "cleanup.policy": "compact"}; !maps.Equal(got, want) {
			t.Errorf("offsets.topic.segment.bytes %q: %s's topic configs %v, want %v", tc.setting, offsetsTopic, got, want)
		}
		if got := c.nodes[1].node.parts.topicConfig(offsetsTopic).SegmentBytes; fmt.Sprint(got) != tc.want {
			t.Errorf("offsets.topic.segment.bytes %q: the log's segment.bytes %d, want %s", tc.setting, got, tc.want)
		}
	}
}
