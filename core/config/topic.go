package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicConfig is one topic's effective settings: the topic's own overrides
// (set by CreateTopics or AlterConfigs) over the broker's defaults. Field
// comments name the topic key and, in parentheses, the broker key that gives
// its default.
type TopicConfig struct {
	// CleanupPolicy is cleanup.policy (log.cleanup.policy).
	CleanupPolicy CleanupPolicy
	// RetentionMs is retention.ms (log.retention.ms/minutes/hours); -1 keeps
	// data forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes (log.retention.bytes); -1 is no limit.
	RetentionBytes int64
	// SegmentBytes is segment.bytes (log.segment.bytes).
	SegmentBytes int32
	// SegmentMs is segment.ms (log.roll.ms/hours).
	SegmentMs int64
	// MinInsyncReplicas is min.insync.replicas (min.insync.replicas).
	MinInsyncReplicas int32
	// MaxMessageBytes is max.message.bytes (message.max.bytes): the largest
	// record batch the topic accepts.
	MaxMessageBytes int32
	// MessageTimestampType is message.timestamp.type
	// (log.message.timestamp.type).
	MessageTimestampType TimestampType
	// MessageTimestampBeforeMaxMs is message.timestamp.before.max.ms
	// (log.message.timestamp.before.max.ms).
	MessageTimestampBeforeMaxMs int64
	// MessageTimestampAfterMaxMs is message.timestamp.after.max.ms
	// (log.message.timestamp.after.max.ms).
	MessageTimestampAfterMaxMs int64
	// UncleanLeaderElectionEnable is unclean.leader.election.enable
	// (unclean.leader.election.enable).
	UncleanLeaderElectionEnable bool
	// FlushMessages is flush.messages (log.flush.interval.messages).
	FlushMessages int64
	// FlushMs is flush.ms (log.flush.interval.ms).
	FlushMs int64
	// IndexIntervalBytes is index.interval.bytes (log.index.interval.bytes).
	IndexIntervalBytes int32
	// SegmentIndexBytes is segment.index.bytes (log.index.size.max.bytes).
	SegmentIndexBytes int32
	// CompressionType is compression.type (compression.type).
	CompressionType string
}

// topicKeyDef is one topic key Strand implements.
type topicKeyDef struct {
	// brokerKeys give the key's default, highest precedence first.
	brokerKeys []string
	apply      func(t *TopicConfig, key, value string) error
	format     func(t TopicConfig) string
}

// topicKeys are the topic keys Strand implements, with Kafka 4.0's ranges.
var topicKeys = map[string]topicKeyDef{
	"cleanup.policy": {[]string{"log.cleanup.policy"},
		func(t *TopicConfig, k, v string) (err error) {
			t.CleanupPolicy, err = parseCleanupPolicy(k, v)
			return err
		},
		func(t TopicConfig) string { return t.CleanupPolicy.String() }},
	"retention.ms": {[]string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		func(t *TopicConfig, k, v string) (err error) {
			t.RetentionMs, err = parseInt64(k, v, -1, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.RetentionMs, 10) }},
	"retention.bytes": {[]string{"log.retention.bytes"},
		func(t *TopicConfig, k, v string) (err error) {
			t.RetentionBytes, err = parseInt64(k, v, minInt64, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.RetentionBytes, 10) }},
	"segment.bytes": {[]string{"log.segment.bytes"},
		func(t *TopicConfig, k, v string) (err error) {
			t.SegmentBytes, err = parseInt32(k, v, segmentBytesMin, maxInt32)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(int64(t.SegmentBytes), 10) }},
	"segment.ms": {[]string{"log.roll.ms", "log.roll.hours"},
		func(t *TopicConfig, k, v string) (err error) {
			t.SegmentMs, err = parseInt64(k, v, 1, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.SegmentMs, 10) }},
	"min.insync.replicas": {[]string{"min.insync.replicas"},
		func(t *TopicConfig, k, v string) (err error) {
			t.MinInsyncReplicas, err = parseInt32(k, v, 1, maxInt32)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(int64(t.MinInsyncReplicas), 10) }},
	"max.message.bytes": {[]string{"message.max.bytes"},
		func(t *TopicConfig, k, v string) (err error) {
			t.MaxMessageBytes, err = parseInt32(k, v, 0, maxInt32)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(int64(t.MaxMessageBytes), 10) }},
	"message.timestamp.type": {[]string{"log.message.timestamp.type"},
		func(t *TopicConfig, k, v string) error {
			s, err := parseChoice(k, v, string(TimestampCreateTime), string(TimestampLogAppendTime))
			t.MessageTimestampType = TimestampType(s)
			return err
		},
		func(t TopicConfig) string { return string(t.MessageTimestampType) }},
	"message.timestamp.before.max.ms": {[]string{"log.message.timestamp.before.max.ms"},
		func(t *TopicConfig, k, v string) (err error) {
			t.MessageTimestampBeforeMaxMs, err = parseInt64(k, v, 0, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.MessageTimestampBeforeMaxMs, 10) }},
	"message.timestamp.after.max.ms": {[]string{"log.message.timestamp.after.max.ms"},
		func(t *TopicConfig, k, v string) (err error) {
			t.MessageTimestampAfterMaxMs, err = parseInt64(k, v, 0, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.MessageTimestampAfterMaxMs, 10) }},
	"unclean.leader.election.enable": {[]string{"unclean.leader.election.enable"},
		func(t *TopicConfig, k, v string) (err error) {
			t.UncleanLeaderElectionEnable, err = parseBool(k, v)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatBool(t.UncleanLeaderElectionEnable) }},
	"flush.messages": {[]string{"log.flush.interval.messages"},
		func(t *TopicConfig, k, v string) (err error) {
			t.FlushMessages, err = parseInt64(k, v, 1, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.FlushMessages, 10) }},
	"flush.ms": {[]string{"log.flush.interval.ms"},
		func(t *TopicConfig, k, v string) (err error) {
			t.FlushMs, err = parseInt64(k, v, 0, maxInt64)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(t.FlushMs, 10) }},
	"index.interval.bytes": {[]string{"log.index.interval.bytes"},
		func(t *TopicConfig, k, v string) (err error) {
			t.IndexIntervalBytes, err = parseInt32(k, v, 0, maxInt32)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(int64(t.IndexIntervalBytes), 10) }},
	"segment.index.bytes": {[]string{"log.index.size.max.bytes"},
		func(t *TopicConfig, k, v string) (err error) {
			t.SegmentIndexBytes, err = parseInt32(k, v, segmentIndexBytesMin, maxInt32)
			return err
		},
		func(t TopicConfig) string { return strconv.FormatInt(int64(t.SegmentIndexBytes), 10) }},
	"compression.type": {[]string{"compression.type"},
		func(t *TopicConfig, k, v string) (err error) {
			t.CompressionType, err = parseChoice(k, v, compressionTypes...)
			return err
		},
		func(t TopicConfig) string { return t.CompressionType }},
}

// topicKeyNames lists topicKeys sorted.
var topicKeyNames = slices.Sorted(maps.Keys(topicKeys))

// acceptedTopicKeys are Kafka topic keys Strand stores and reports but does
// not act on. Clients and tools set some of them routinely, so rejecting
// them would break those tools; Kafka itself rejects any other key.
var acceptedTopicKeys = map[string]bool{
	"compression.gzip.level": true, "compression.lz4.level": true, "compression.zstd.level": true,
	"delete.retention.ms": true, "file.delete.delay.ms": true,
	"follower.replication.throttled.replicas": true, "leader.replication.throttled.replicas": true,
	"local.retention.bytes": true, "local.retention.ms": true,
	"max.compaction.lag.ms": true, "min.cleanable.dirty.ratio": true, "min.compaction.lag.ms": true,
	"preallocate": true, "remote.storage.enable": true, "remote.log.copy.disable": true,
	"remote.log.delete.on.disable": true, "segment.jitter.ms": true,
}

// IsTopicKeyImplemented reports whether Strand acts on the topic key.
func IsTopicKeyImplemented(key string) bool { _, ok := topicKeys[key]; return ok }

// TopicDefaults returns the settings of a topic without overrides: the
// broker's values, mapped from broker keys to topic keys as Kafka does.
func (b Broker) TopicDefaults() TopicConfig {
	return TopicConfig{
		CleanupPolicy:               b.LogCleanupPolicy,
		RetentionMs:                 b.LogRetentionMs,
		RetentionBytes:              b.LogRetentionBytes,
		SegmentBytes:                b.LogSegmentBytes,
		SegmentMs:                   b.LogRollMs,
		MinInsyncReplicas:           b.MinInsyncReplicas,
		MaxMessageBytes:             b.MessageMaxBytes,
		MessageTimestampType:        b.LogMessageTimestampType,
		MessageTimestampBeforeMaxMs: b.LogMessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs:  b.LogMessageTimestampAfterMaxMs,
		UncleanLeaderElectionEnable: b.UncleanLeaderElectionEnable,
		FlushMessages:               b.LogFlushIntervalMessages,
		FlushMs:                     b.LogFlushIntervalMs,
		IndexIntervalBytes:          b.LogIndexIntervalBytes,
		SegmentIndexBytes:           b.LogIndexSizeMaxBytes,
		CompressionType:             b.CompressionType,
	}
}

// ResolveTopicConfig applies a topic's overrides to the broker's defaults.
// It fails as ValidateTopicConfig does.
func (b Broker) ResolveTopicConfig(overrides map[string]string) (TopicConfig, error) {
	t := b.TopicDefaults()
	if err := applyTopicOverrides(&t, overrides); err != nil {
		return TopicConfig{}, err
	}
	return t, nil
}

// ValidateTopicConfig checks a topic's overrides as CreateTopics and
// AlterConfigs receive them. The error is an *Error naming the first bad key
// in sorted order, which the caller answers with INVALID_CONFIG. Keys in
// acceptedTopicKeys pass unchecked; any other unknown key fails, as in Kafka.
func ValidateTopicConfig(overrides map[string]string) error {
	var t TopicConfig
	return applyTopicOverrides(&t, overrides)
}

func applyTopicOverrides(t *TopicConfig, overrides map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		def, ok := topicKeys[key]
		if !ok {
			if acceptedTopicKeys[key] {
				continue
			}
			return keyError(key, "is not a topic config")
		}
		if err := def.apply(t, key, overrides[key]); err != nil {
			return err
		}
	}
	return nil
}

// ConfigEntry is one row of a DescribeConfigs answer.
type ConfigEntry struct {
	// Name is the config key.
	Name string
	// Value is the effective value as text; nil when Kafka's value is null.
	Value *string
	// Source says where Value comes from.
	Source kmsg.ConfigSource
	// Synonyms are the settings that could give this one its value, the
	// effective one first (DescribeConfigs v1+ with IncludeSynonyms).
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one synonym of a ConfigEntry.
type ConfigSynonym struct {
	// Name is the synonym's key: the topic key or a broker key.
	Name string
	// Value is its value as text; nil when null.
	Value *string
	// Source says where it is set.
	Source kmsg.ConfigSource
}

// DescribeTopicConfig lists a topic's implemented settings in key order, each
// with its source: DYNAMIC_TOPIC_CONFIG for the topic's own overrides,
// STATIC_BROKER_CONFIG where server.properties set the broker key, else
// DEFAULT_CONFIG. Accepted-but-unimplemented overrides are listed too, as
// the topic's own. overrides must have passed ValidateTopicConfig.
func (b Broker) DescribeTopicConfig(overrides map[string]string) []ConfigEntry {
	effective, err := b.ResolveTopicConfig(overrides)
	if err != nil {
		panic("config: DescribeTopicConfig on unvalidated overrides: " + err.Error())
	}
	var entries []ConfigEntry
	for _, key := range topicKeyNames {
		def := topicKeys[key]
		var synonyms []ConfigSynonym
		if v, ok := overrides[key]; ok {
			synonyms = append(synonyms, ConfigSynonym{Name: key, Value: ptr(strings.TrimSpace(v)), Source: kmsg.ConfigSourceDynamicTopicConfig})
		}
		for _, brokerKey := range def.brokerKeys {
			if v, ok := b.Static[brokerKey]; ok {
				synonyms = append(synonyms, ConfigSynonym{Name: brokerKey, Value: ptr(v), Source: kmsg.ConfigSourceStaticBrokerConfig})
			}
		}
		for _, brokerKey := range def.brokerKeys {
			if d := brokerKeys[brokerKey]; d.hasDefault {
				synonyms = append(synonyms, ConfigSynonym{Name: brokerKey, Value: ptr(d.defaultValue), Source: kmsg.ConfigSourceDefaultConfig})
				break
			}
		}
		entries = append(entries, ConfigEntry{Name: key, Value: ptr(def.format(effective)), Source: synonyms[0].Source, Synonyms: synonyms})
	}
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		if acceptedTopicKeys[key] {
			v := strings.TrimSpace(overrides[key])
			entries = append(entries, ConfigEntry{Name: key, Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig,
				Synonyms: []ConfigSynonym{{Name: key, Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig}}})
		}
	}
	slices.SortFunc(entries, func(x, y ConfigEntry) int { return strings.Compare(x.Name, y.Name) })
	return entries
}

// DescribeBrokerConfig lists the broker keys Strand implements in key order:
// STATIC_BROKER_CONFIG with the file's or override's value where set, else
// DEFAULT_CONFIG with Kafka's default (nil where that is null).
func (b Broker) DescribeBrokerConfig() []ConfigEntry {
	entries := make([]ConfigEntry, 0, len(brokerKeyNames))
	for _, key := range brokerKeyNames {
		entry := ConfigEntry{Name: key, Source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := b.Static[key]; ok {
			entry.Value, entry.Source = ptr(v), kmsg.ConfigSourceStaticBrokerConfig
		} else if def := brokerKeys[key]; def.hasDefault {
			entry.Value = ptr(def.defaultValue)
		}
		entry.Synonyms = []ConfigSynonym{{Name: key, Value: entry.Value, Source: entry.Source}}
		entries = append(entries, entry)
	}
	return entries
}

func ptr(s string) *string { return &s }
