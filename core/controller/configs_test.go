package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

func (h *harness) overrides(topic string) map[string]string {
	return h.c.Image().Configs(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic})
}

func (h *harness) incrementalAlter(topic string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	h.t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version, req.ValidateOnly = 1, validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	req.Resources = append(req.Resources, res)
	return h.send(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
}

func setOp(key, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: key, Op: kmsg.IncrementalAlterConfigOpSet, Value: &value}
}

func TestAlterConfigsAppendsOnlyChangedKeys(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(1)
	if rt := h.createTopic("t", 1, 1, map[string]string{"retention.ms": "1000"}); rt.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(rt.ErrorCode))
	}
	before := h.c.Image().Offset()
	if r := h.incrementalAlter("t", false, setOp("retention.ms", "1000"), setOp("segment.ms", "5000")); r.ErrorCode != 0 {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if got := h.c.Image().Offset() - before; got != 1 {
		t.Fatalf("%d records for one changed key, want 1", got)
	}
	if want := map[string]string{"retention.ms": "1000", "segment.ms": "5000"}; !maps.Equal(h.overrides("t"), want) {
		t.Fatalf("overrides %v, want %v", h.overrides("t"), want)
	}

	before = h.c.Image().Offset()
	if r := h.incrementalAlter("t", true, setOp("retention.ms", "7")); r.ErrorCode != 0 {
		t.Fatalf("validate only: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if h.c.Image().Offset() != before || h.overrides("t")["retention.ms"] != "1000" {
		t.Fatalf("validateOnly changed the metadata: offset %d→%d, overrides %v", before, h.c.Image().Offset(), h.overrides("t"))
	}

	// Legacy AlterConfigs replaces the set: both keys go, one comes.
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	v := "compact"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Value: &v}}
	req.Resources = append(req.Resources, res)
	before = h.c.Image().Offset()
	if r := h.send(req).(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := h.c.Image().Offset() - before; got != 3 {
		t.Fatalf("%d records for two removals and one set, want 3", got)
	}
	if want := map[string]string{"cleanup.policy": "compact"}; !maps.Equal(h.overrides("t"), want) {
		t.Fatalf("overrides %v, want %v", h.overrides("t"), want)
	}
}

func TestCreateTopicsValidatesConfigs(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(1)
	rt := h.createTopic("t", 1, 1, map[string]string{"segment.bytes": "12"})
	if rt.ErrorCode != kerr.InvalidConfig.Code || rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, "segment.bytes") {
		t.Fatalf("segment.bytes=12: %v %v, want INVALID_CONFIG naming segment.bytes", kerr.ErrorForCode(rt.ErrorCode), rt.ErrorMessage)
	}
	if _, ok := h.c.Image().TopicByName("t"); ok {
		t.Fatal("the topic was created anyway")
	}
}

func TestConfigsErrorResponseAnswersEveryResource(t *testing.T) {
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	legacy := kmsg.NewPtrAlterConfigsRequest()
	for _, name := range []string{"a", "b"} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		inc.Resources = append(inc.Resources, r)
		l := kmsg.NewAlterConfigsRequestResource()
		l.ResourceType, l.ResourceName = kmsg.ConfigResourceTypeTopic, name
		legacy.Resources = append(legacy.Resources, l)
	}
	incResp := ErrorResponse(inc, codeNotController).(*kmsg.IncrementalAlterConfigsResponse)
	legacyResp := ErrorResponse(legacy, codeNotController).(*kmsg.AlterConfigsResponse)
	if len(incResp.Resources) != 2 || len(legacyResp.Resources) != 2 {
		t.Fatalf("%d and %d answers for two resources", len(incResp.Resources), len(legacyResp.Resources))
	}
	for i, name := range []string{"a", "b"} {
		if r := incResp.Resources[i]; r.ResourceName != name || r.ErrorCode != codeNotController {
			t.Fatalf("incremental answer %d: %+v", i, r)
		}
		if r := legacyResp.Resources[i]; r.ResourceName != name || r.ErrorCode != codeNotController {
			t.Fatalf("legacy answer %d: %+v", i, r)
		}
	}
}

// TestTopicNamesAsKafkaValidates: a topic whose name differs from an
// existing one only in '.' against '_' is refused (INVALID_TOPIC_EXCEPTION,
// naming the other), as Kafka refuses it: metric names replace '.' with
// '_'. Altering the configs of the empty topic name is INVALID_REQUEST
// ("Default topic resources are not allowed."), of an invalid name
// INVALID_TOPIC_EXCEPTION, as Kafka's ConfigAdminManager answers.
func TestTopicNamesAsKafkaValidates(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(1)
	if rt := h.createTopic("a.b_c", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create a.b_c: %v", kerr.ErrorForCode(rt.ErrorCode))
	}
	rt := h.createTopic("a_b.c", 1, 1, nil)
	if rt.ErrorCode != kerr.InvalidTopicException.Code || rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, `"a.b_c"`) {
		t.Fatalf("create a_b.c beside a.b_c: %v %v, want INVALID_TOPIC_EXCEPTION naming a.b_c", kerr.ErrorForCode(rt.ErrorCode), rt.ErrorMessage)
	}
	if rt := h.createTopic("a-b-c", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create a-b-c: %v", kerr.ErrorForCode(rt.ErrorCode))
	}
	for _, tc := range []struct {
		name string
		code int16
	}{{"", kerr.InvalidRequest.Code}, {"bad name!", kerr.InvalidTopicException.Code}, {"..", kerr.InvalidTopicException.Code}, {"missing", kerr.UnknownTopicOrPartition.Code}} {
		if r := h.incrementalAlter(tc.name, false, setOp("retention.ms", "1000")); r.ErrorCode != tc.code || r.ErrorMessage == nil {
			t.Fatalf("IncrementalAlterConfigs of topic %q: %v %v, want %v with a message", tc.name, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, kerr.ErrorForCode(tc.code))
		}
	}
}
