package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/metadata"
)

// op is one IncrementalAlterConfigs operation.
type op struct {
	kind  kmsg.IncrementalAlterConfigOp
	key   string
	value *string
}

func set(key, value string) op { return op{kmsg.IncrementalAlterConfigOpSet, key, &value} }
func del(key string) op        { return op{kmsg.IncrementalAlterConfigOpDelete, key, nil} }
func appendOp(key, value string) op {
	return op{kmsg.IncrementalAlterConfigOpAppend, key, &value}
}
func subtract(key, value string) op {
	return op{kmsg.IncrementalAlterConfigOpSubtract, key, &value}
}

// incrementalAlter sends one IncrementalAlterConfigs v1 for one resource
// through node via and returns its result.
func (c *cluster) incrementalAlter(via int32, typ kmsg.ConfigResourceType, name string, validateOnly bool, ops ...op) kmsg.IncrementalAlterConfigsResponseResource {
	c.t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for _, o := range ops {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = o.key, o.kind, o.value
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	resp := c.request(via, req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 {
		c.t.Fatalf("IncrementalAlterConfigs: %d results for one resource", len(resp.Resources))
	}
	return resp.Resources[0]
}

// mustAlter is incrementalAlter on a topic that must succeed.
func (c *cluster) mustAlter(via int32, topic string, ops ...op) {
	c.t.Helper()
	if r := c.incrementalAlter(via, kmsg.ConfigResourceTypeTopic, topic, false, ops...); r.ErrorCode != 0 {
		c.t.Fatalf("alter %s: %v: %v", topic, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
	}
}

// describedTopic returns a topic's configs as node via describes them.
func (c *cluster) describedTopic(via int32, topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	c.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	resp := c.request(via, req).(*kmsg.DescribeConfigsResponse)
	if code := resp.Resources[0].ErrorCode; code != 0 {
		c.t.Fatalf("describe %s: %v", topic, kerr.ErrorForCode(code))
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, cfg := range resp.Resources[0].Configs {
		out[cfg.Name] = cfg
	}
	return out
}

// expectConfig fails unless node via describes topic's key with value and
// source.
func (c *cluster) expectConfig(via int32, topic, key, value string, source kmsg.ConfigSource) {
	c.t.Helper()
	cfg, ok := c.describedTopic(via, topic)[key]
	if !ok {
		c.t.Fatalf("describe %s: no %s", topic, key)
	}
	if deref(cfg.Value) != value || cfg.Source != source {
		c.t.Fatalf("describe %s: %s = %q (%v), want %q (%v)", topic, key, deref(cfg.Value), cfg.Source, value, source)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestAlterConfigsRetentionActsOnOpenLog(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.retention.check.interval.ms": "1000"})
	c.waitRegistered()
	c.createTopic(1, "ret", 1, 1)
	p := c.nodes[1].node.parts.partitions[partitionKey{"ret", 0}]

	// segment.ms reaches the open log: every append after 100 ms rolls.
	c.mustAlter(1, "ret", set("segment.ms", "100"))
	c.expectConfig(1, "ret", "segment.ms", "100", kmsg.ConfigSourceDynamicTopicConfig)
	c.expectConfig(1, "ret", "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	for i := range 4 {
		now := c.nodes[1].node.wallMs()
		b := batch.Build(batch.BuildSpec{FirstTimestamp: now, Records: []batch.Record{{Value: []byte{byte('a' + i)}}}})
		if r := c.produce(1, "ret", 0, -1, b); r.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		c.run(200)
	}
	if n := p.log.SegmentCount(); n < 4 {
		t.Fatalf("%d segments after 4 appends 200 ms apart with segment.ms=100", n)
	}

	// With the default retention (7 days) the retention checks keep
	// everything.
	c.run(12000)
	if s := p.log.LogStartOffset(); s != 0 {
		t.Fatalf("log start %d under the default retention", s)
	}

	c.mustAlter(1, "ret", set("retention.ms", "1000"))
	c.expectConfig(1, "ret", "retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	c.waitFor("retention.ms=1000 deletes old segments", 15000, func() bool { return p.log.LogStartOffset() > 0 })
	if f := c.fetch(1, "ret", 0, 0); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 0 after retention: %v", kerr.ErrorForCode(f.ErrorCode))
	}
}

func TestIncrementalAlterConfigsListOperations(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "lst", 1, 1)
	p := c.nodes[1].node.parts.partitions[partitionKey{"lst", 0}]

	steps := []struct {
		op   op
		want string
	}{
		// APPEND starts from Kafka's default when there is no override.
		{appendOp("cleanup.policy", "compact"), "delete,compact"},
		{subtract("cleanup.policy", "delete"), "compact"},
		{appendOp("cleanup.policy", "compact"), "compact"}, // no duplicates
		{set("cleanup.policy", "compact,delete"), "compact,delete"},
		{subtract("cleanup.policy", "absent"), "compact,delete"},
	}
	// The override keeps the order operations built; DescribeConfigs shows
	// the parsed policy.
	override := func() string { return c.nodes[1].node.meta.image.Configs(topicResource("lst"))["cleanup.policy"] }
	for _, s := range steps {
		c.mustAlter(1, "lst", s.op)
		if got := override(); got != s.want {
			t.Fatalf("after %v %q: cleanup.policy override %q, want %q", s.op.kind, deref(s.op.value), got, s.want)
		}
	}
	c.expectConfig(1, "lst", "cleanup.policy", "compact,delete", kmsg.ConfigSourceDynamicTopicConfig)
	if !p.log.Config().Compaction.Compact {
		t.Fatalf("cleanup.policy=compact,delete did not reach the open log")
	}

	r := c.incrementalAlter(1, kmsg.ConfigResourceTypeTopic, "lst", false, subtract("cleanup.policy", "compact,delete"))
	if r.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(deref(r.ErrorMessage), "cleanup.policy") {
		t.Fatalf("subtracting every policy: %v %q, want INVALID_CONFIG naming cleanup.policy", kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
	}
	r = c.incrementalAlter(1, kmsg.ConfigResourceTypeTopic, "lst", false, appendOp("retention.ms", "5"))
	if r.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(deref(r.ErrorMessage), "retention.ms") || !strings.Contains(deref(r.ErrorMessage), "LIST") {
		t.Fatalf("APPEND to retention.ms: %v %q, want INVALID_CONFIG: not a LIST", kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
	}
	if got := override(); got != "compact,delete" {
		t.Fatalf("failed alters changed cleanup.policy to %q", got)
	}

	c.mustAlter(1, "lst", del("cleanup.policy"))
	c.expectConfig(1, "lst", "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	if p.log.Config().Compaction.Compact {
		t.Fatalf("deleting cleanup.policy left the open log compacted")
	}
	c.mustAlter(1, "lst", del("cleanup.policy")) // deleting an absent key is a no-op
}

func TestAlterConfigsErrorsNameTheField(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "e", 1, 1)
	cases := []struct {
		name     string
		typ      kmsg.ConfigResourceType
		resource string
		ops      []op
		code     int16
		mentions []string
	}{
		{"unknown key", kmsg.ConfigResourceTypeTopic, "e", []op{set("retention.mss", "1")}, kerr.InvalidConfig.Code, []string{"retention.mss"}},
		{"bad value", kmsg.ConfigResourceTypeTopic, "e", []op{set("retention.ms", "soon")}, kerr.InvalidConfig.Code, []string{"retention.ms", "soon"}},
		{"below range", kmsg.ConfigResourceTypeTopic, "e", []op{set("min.insync.replicas", "0")}, kerr.InvalidConfig.Code, []string{"min.insync.replicas"}},
		{"SET without value", kmsg.ConfigResourceTypeTopic, "e", []op{{kmsg.IncrementalAlterConfigOpSet, "retention.ms", nil}}, kerr.InvalidConfig.Code, []string{"retention.ms"}},
		{"duplicate key", kmsg.ConfigResourceTypeTopic, "e", []op{set("retention.ms", "1"), del("retention.ms")}, kerr.InvalidRequest.Code, []string{"retention.ms"}},
		{"unknown operation", kmsg.ConfigResourceTypeTopic, "e", []op{{9, "retention.ms", nil}}, kerr.InvalidRequest.Code, []string{"retention.ms"}},
		{"unknown topic", kmsg.ConfigResourceTypeTopic, "nope", []op{set("retention.ms", "1")}, kerr.UnknownTopicOrPartition.Code, []string{"nope"}},
		{"broker resource", kmsg.ConfigResourceTypeBroker, "1", []op{set("log.retention.ms", "1")}, kerr.InvalidRequest.Code, []string{"server.properties"}},
	}
	for _, tc := range cases {
		r := c.incrementalAlter(1, tc.typ, tc.resource, false, tc.ops...)
		if r.ErrorCode != tc.code {
			t.Errorf("%s: %v (%q), want %v", tc.name, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage), kerr.ErrorForCode(tc.code))
			continue
		}
		for _, m := range tc.mentions {
			if !strings.Contains(deref(r.ErrorMessage), m) {
				t.Errorf("%s: message %q does not mention %q", tc.name, deref(r.ErrorMessage), m)
			}
		}
	}
	// Nothing above changed the topic.
	if got := c.nodes[1].node.meta.image.Configs(topicResource("e")); len(got) != 0 {
		t.Fatalf("failed alters left overrides %v", got)
	}

	// ValidateOnly validates and changes nothing.
	if r := c.incrementalAlter(1, kmsg.ConfigResourceTypeTopic, "e", true, set("retention.ms", "1234")); r.ErrorCode != 0 {
		t.Fatalf("validate only: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.incrementalAlter(1, kmsg.ConfigResourceTypeTopic, "e", true, set("retention.ms", "x")); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("validate only with a bad value: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.run(500)
	c.expectConfig(1, "e", "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
}

func TestAlterConfigsReplacesForwardsAndReachesEveryReplica(t *testing.T) {
	c := threeNodes(t) // min.insync.replicas=2 in server.properties; "r" has RF 3
	// Through node 2, a broker without the controller role: forwarded.
	c.mustAlter(2, "r", set("retention.ms", "60000"), set("segment.ms", "5000"), set("min.insync.replicas", "3"))
	c.waitFor("min.insync.replicas=3 on every replica", 5000, func() bool {
		for _, id := range []int32{1, 2, 3} {
			if c.nodes[id].node.parts.partitions[partitionKey{"r", 0}].replica.MinInsyncReplicas() != 3 {
				return false
			}
		}
		return true
	})
	c.expectConfig(3, "r", "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)

	// Legacy AlterConfigs replaces the whole set: keys left out go back to
	// the broker's values.
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(2)
	for _, topic := range []string{"r", "missing"} {
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		v := "2000"
		cfg.Name, cfg.Value = "max.message.bytes", &v
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
	}
	resp := c.request(3, req).(*kmsg.AlterConfigsResponse)
	if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 || resp.Resources[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AlterConfigs results: %+v", resp.Resources)
	}
	c.waitFor("the replaced configs on every replica", 5000, func() bool {
		for _, id := range []int32{1, 2, 3} {
			p := c.nodes[id].node.parts.partitions[partitionKey{"r", 0}]
			if p.replica.MinInsyncReplicas() != 2 || p.log.Config().RetentionMs != 7*24*3600*1000 {
				return false
			}
		}
		return true
	})
	c.expectConfig(1, "r", "max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig)
	c.expectConfig(1, "r", "min.insync.replicas", "2", kmsg.ConfigSourceStaticBrokerConfig)
	c.expectConfig(1, "r", "segment.ms", "604800000", kmsg.ConfigSourceDefaultConfig)

	// The new max.message.bytes is what produces are judged by.
	big := recordBatch(strings.Repeat("x", 3000))
	if r := c.produce(2, "r", 0, -1, big); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("a 3000-byte batch with max.message.bytes=2000: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func topicResource(name string) metadata.ConfigResource {
	return metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: name}
}

func TestAlterMinInsyncReplicasGatesAcksAll(t *testing.T) {
	c := newCluster(t, 3, nil) // min.insync.replicas=1 by default
	c.waitRegistered()
	c.createTopic(1, "m", 1, 3)
	leader := c.leaderOf("m", 0)
	victim := int32(3)
	if leader == 3 {
		victim = 2
	}
	c.nodes[victim].proc.Crash()
	c.waitFor("the leader's ISR shrinks to 2", 20000, func() bool {
		return len(c.nodes[leader].node.parts.partitions[partitionKey{"m", 0}].replica.State().ISR) == 2
	})
	if r := c.produce(leader, "m", 0, -1, recordBatch("two of three")); r.ErrorCode != 0 {
		t.Fatalf("acks=all, ISR 2, min.insync.replicas 1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.mustAlter(1, "m", set("min.insync.replicas", "3"))
	c.waitFor("the leader applies min.insync.replicas=3", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"m", 0}].replica.MinInsyncReplicas() == 3
	})
	if r := c.produce(leader, "m", 0, -1, recordBatch("refused")); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all, ISR 2, min.insync.replicas 3: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(r.ErrorCode))
	}
	c.mustAlter(1, "m", del("min.insync.replicas"))
	c.waitFor("the leader falls back to the broker's min.insync.replicas", 5000, func() bool {
		return c.nodes[leader].node.parts.partitions[partitionKey{"m", 0}].replica.MinInsyncReplicas() == 1
	})
	if r := c.produce(leader, "m", 0, -1, recordBatch("accepted again")); r.ErrorCode != 0 {
		t.Fatalf("acks=all after deleting the override: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
