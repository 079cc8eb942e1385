package broker

import (
	"math"

	"strand/core/batch"
	"strand/core/config"
	"strand/core/log"
	"strand/core/metadata"
)

// topicConfig is a topic's effective configuration: its ConfigRecords in
// the metadata image over the broker's defaults. Overrides that do not
// resolve (the controller validated them, so only a newer Strand could have
// written them) fall back to the defaults.
//
// Resolved configurations are cached until the image next changes, so the
// produce path does not parse overrides per batch.
func (pm *partitionManager) topicConfig(topic string) config.TopicConfig {
	if pm.topicConfigs == nil || pm.topicConfigsAt != pm.meta.image.Offset() {
		pm.topicConfigs, pm.topicConfigsAt = map[string]config.TopicConfig{}, pm.meta.image.Offset()
	}
	if t, ok := pm.topicConfigs[topic]; ok {
		return t
	}
	overrides := pm.meta.image.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic})
	t, err := pm.cfg.Broker.ResolveTopicConfig(overrides)
	if err != nil {
		t = pm.cfg.Broker.TopicDefaults()
	}
	if len(pm.topicConfigs) < topicConfigsCachedMax {
		pm.topicConfigs[topic] = t
	}
	return t
}

// topicConfigsCachedMax bounds the resolved-configuration cache.
const topicConfigsCachedMax = 10000

// logConfigFor is the log configuration of a topic's partitions, read when
// a log is opened or created; applyTopicConfigs hands later changes to open
// logs.
func (pm *partitionManager) logConfigFor(topic string) log.Config {
	if c := logConfigOf(pm.topicConfig(topic)); c.Validate() == nil {
		return c
	}
	return pm.logConfig
}

// applyTopicConfigs brings every hosted partition in line with its topic's
// configuration in the image, after metadata is applied: AlterConfigs
// changes take effect on the next append, flush, retention check or
// cleaning pass (log.SetConfig), and on the replica's min.insync.replicas
// at once, as Kafka's brokers reconfigure their logs when a ConfigRecord
// arrives. Unchanged partitions are left alone.
func (pm *partitionManager) applyTopicConfigs() {
	for _, p := range pm.sortedPartitions() {
		t := pm.topicConfig(p.key.topic)
		if c := pm.logConfigFor(p.key.topic); c != p.log.Config() {
			_ = p.log.SetConfig(c) // logConfigFor returns only valid configurations
		}
		if minISR := int(t.MinInsyncReplicas); minISR != p.replica.MinInsyncReplicas() {
			_ = p.replica.SetMinInsyncReplicas(minISR, pm.nowMs()) // ResolveTopicConfig keeps it ≥ 1
			pm.afterReplicaChange(p)
		}
		p.syncAcks = t.FlushMessages == 1
	}
	pm.publishPrecheckView()
}

// logConfigOf maps a topic's settings onto its logs' configuration.
func logConfigOf(t config.TopicConfig) log.Config {
	c := log.DefaultConfig()
	c.SegmentBytes = int64(t.SegmentBytes)
	c.SegmentMs = t.SegmentMs
	c.SegmentIndexBytes = int64(t.SegmentIndexBytes)
	c.IndexIntervalBytes = int64(t.IndexIntervalBytes)
	c.RetentionMs = t.RetentionMs
	c.RetentionBytes = t.RetentionBytes
	c.FlushIntervalMessages = t.FlushMessages
	c.FlushIntervalMs = t.FlushMs
	// min.cleanable.dirty.ratio and the compaction lags are not topic
	// settings in core/config yet: Kafka's defaults apply.
	c.Compaction.Compact = t.CleanupPolicy.Compact
	return c
}

// produceLimits are the topic settings a produced batch is judged by.
func (pm *partitionManager) produceLimits(topic string) batch.ProduceLimits {
	t := pm.topicConfig(topic)
	tsType := batch.CreateTime
	if t.MessageTimestampType == config.TimestampLogAppendTime {
		tsType = batch.LogAppendTime
	}
	before, after := t.MessageTimestampBeforeMaxMs, t.MessageTimestampAfterMaxMs
	if before < 0 {
		before = math.MaxInt64
	}
	if after < 0 {
		after = math.MaxInt64
	}
	return batch.ProduceLimits{
		BatchBytesMax:        int(t.MaxMessageBytes),
		DecompressedBytesMax: decompressedBytesMaxOf(t.MaxMessageBytes),
		RequireKeys:          t.CleanupPolicy.Compact,
		TimestampType:        tsType,
		TimestampBeforeMaxMs: before,
		TimestampAfterMaxMs:  after,
		NowMs:                pm.wallMs(),
	}
}

// storedCodec is the codec a topic's compression.type asks produced batches
// to be stored in, and false for "producer": keep the producer's codec, as
// Kafka's default does.
func storedCodec(compressionType string) (batch.Codec, bool) {
	switch compressionType {
	case "uncompressed":
		return batch.CodecNone, true
	case "gzip":
		return batch.CodecGzip, true
	case "snappy":
		return batch.CodecSnappy, true
	case "lz4":
		return batch.CodecLZ4, true
	case "zstd":
		return batch.CodecZstd, true
	}
	return 0, false
}
