package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicDefaultsFollowBrokerKeys(t *testing.T) {
	b, _, err := Parse([]byte(minimal), map[string]string{
		"log.retention.minutes": "5", "log.segment.bytes": "2097152", "log.roll.ms": "1234",
		"min.insync.replicas": "2", "message.max.bytes": "500", "log.cleanup.policy": "compact",
		"log.index.size.max.bytes": "4096", "log.flush.interval.messages": "1", "compression.type": "zstd",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := b.TopicDefaults()
	want := TopicConfig{
		CleanupPolicy: CleanupPolicy{Compact: true}, RetentionMs: 5 * 60 * 1000, RetentionBytes: -1,
		SegmentBytes: 2097152, SegmentMs: 1234, MinInsyncReplicas: 2, MaxMessageBytes: 500,
		MessageTimestampType: TimestampCreateTime, MessageTimestampBeforeMaxMs: 1<<63 - 1,
		MessageTimestampAfterMaxMs: 3600000, FlushMessages: 1, FlushMs: 1<<63 - 1,
		IndexIntervalBytes: 4096, SegmentIndexBytes: 4096, CompressionType: "zstd",
	}
	if got != want {
		t.Errorf("TopicDefaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestResolveTopicConfigOverrides(t *testing.T) {
	b, _, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := b.ResolveTopicConfig(map[string]string{
		"retention.ms": "-1", "cleanup.policy": "compact,delete", "min.insync.replicas": "2",
		"message.timestamp.type": "LogAppendTime", "delete.retention.ms": "100",
	})
	if err != nil {
		t.Fatal(err)
	}
	if tc.RetentionMs != -1 || tc.CleanupPolicy != (CleanupPolicy{Compact: true, Delete: true}) ||
		tc.MinInsyncReplicas != 2 || tc.MessageTimestampType != TimestampLogAppendTime {
		t.Errorf("overrides not applied: %+v", tc)
	}
	if tc.SegmentBytes != b.LogSegmentBytes {
		t.Errorf("a key without override lost the broker default: %d", tc.SegmentBytes)
	}
}

func TestValidateTopicConfigNamesTheKey(t *testing.T) {
	cases := []struct {
		overrides map[string]string
		key       string
	}{
		{map[string]string{"retention.ms": "-2"}, "retention.ms"},
		{map[string]string{"segment.bytes": "100"}, "segment.bytes"},
		{map[string]string{"segment.ms": "0"}, "segment.ms"},
		{map[string]string{"min.insync.replicas": "zero"}, "min.insync.replicas"},
		{map[string]string{"cleanup.policy": ""}, "cleanup.policy"},
		{map[string]string{"compression.type": "brotli"}, "compression.type"},
		{map[string]string{"unclean.leader.election.enable": "1"}, "unclean.leader.election.enable"},
		{map[string]string{"flush.messages": "0"}, "flush.messages"},
		{map[string]string{"segment.index.bytes": "2"}, "segment.index.bytes"},
		{map[string]string{"message.timestamp.after.max.ms": "-1"}, "message.timestamp.after.max.ms"},
		{map[string]string{"no.such.key": "1"}, "no.such.key"},
		// The first bad key in sorted order is the one reported.
		{map[string]string{"segment.ms": "0", "retention.ms": "x"}, "retention.ms"},
	}
	for _, c := range cases {
		err := ValidateTopicConfig(c.overrides)
		var cfgErr *Error
		if !errors.As(err, &cfgErr) || cfgErr.Key != c.key {
			t.Errorf("%v: got %v, want an *Error naming %s", c.overrides, err, c.key)
		}
	}
	if err := ValidateTopicConfig(map[string]string{"retention.ms": "1000", "preallocate": "true"}); err != nil {
		t.Errorf("valid overrides rejected: %v", err)
	}
}

func TestDescribeTopicConfigSources(t *testing.T) {
	b, _, err := Parse([]byte(minimal), map[string]string{"log.retention.hours": "24"})
	if err != nil {
		t.Fatal(err)
	}
	entries := b.DescribeTopicConfig(map[string]string{"segment.bytes": "2097152", "preallocate": "true"})
	byName := map[string]ConfigEntry{}
	for i, e := range entries {
		byName[e.Name] = e
		if i > 0 && entries[i-1].Name >= e.Name {
			t.Errorf("entries not sorted at %s", e.Name)
		}
	}
	check := func(name, value string, source kmsg.ConfigSource) {
		t.Helper()
		e, ok := byName[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if e.Value == nil || *e.Value != value || e.Source != source {
			t.Errorf("%s = %v from %v, want %s from %v", name, deref(e.Value), e.Source, value, source)
		}
		if e.Synonyms[0].Source != e.Source {
			t.Errorf("%s: first synonym %+v is not the effective one", name, e.Synonyms[0])
		}
	}
	check("segment.bytes", "2097152", kmsg.ConfigSourceDynamicTopicConfig)
	check("retention.ms", "86400000", kmsg.ConfigSourceStaticBrokerConfig)
	check("min.insync.replicas", "1", kmsg.ConfigSourceDefaultConfig)
	check("preallocate", "true", kmsg.ConfigSourceDynamicTopicConfig)
	if len(entries) != len(topicKeys)+1 {
		t.Errorf("%d entries, want %d", len(entries), len(topicKeys)+1)
	}
	syn := byName["retention.ms"].Synonyms
	if len(syn) != 2 || syn[0].Name != "log.retention.hours" || syn[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms synonyms = %+v", syn)
	}
}

func TestDescribeBrokerConfig(t *testing.T) {
	b, _, err := Parse(readExample(t, "node2.properties"), nil)
	if err != nil {
		t.Fatal(err)
	}
	entries := b.DescribeBrokerConfig()
	if len(entries) != len(KnownBrokerKeys()) {
		t.Fatalf("%d entries for %d keys", len(entries), len(KnownBrokerKeys()))
	}
	for _, e := range entries {
		switch e.Name {
		case "node.id":
			if deref(e.Value) != "2" || e.Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("node.id: %v %v", deref(e.Value), e.Source)
			}
		case "num.network.threads":
			t.Error("an unimplemented key was described")
		case "log.retention.ms":
			if e.Value != nil || e.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("log.retention.ms: want a null default, got %v", deref(e.Value))
			}
		case "log.segment.bytes":
			if deref(e.Value) != "1073741824" || e.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("log.segment.bytes: %v %v", deref(e.Value), e.Source)
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strings.Clone(*s)
}
