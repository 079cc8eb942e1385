package group

import (
	"fmt"

	"strand/core/env"
)

// Config is one coordinator's configuration. Defaults are Kafka's.
type Config struct {
	// Partition is the __consumer_offsets partition this coordinator serves.
	Partition int32
	// OffsetsTopicPartitions is offsets.topic.num.partitions: with it,
	// PartitionFor decides which groups are this coordinator's.
	OffsetsTopicPartitions int32
	// GroupMinSessionTimeoutMs and GroupMaxSessionTimeoutMs are
	// group.min.session.timeout.ms and group.max.session.timeout.ms: a
	// JoinGroup outside them gets INVALID_SESSION_TIMEOUT.
	GroupMinSessionTimeoutMs int32
	GroupMaxSessionTimeoutMs int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms: how
	// long the first rebalance of an empty group waits for more members,
	// extended by each newcomer up to the rebalance timeout.
	GroupInitialRebalanceDelayMs int32
	// GroupMaxSize is group.max.size. Kafka's default is unbounded; Strand
	// bounds every group (and its KIP-394 pending member ids) so memory is
	// bounded.
	GroupMaxSize int32
	// NewMemberJoinTimeoutMs bounds how long a new member's parked JoinGroup
	// may wait (Kafka's group.classic.new.member.join.timeout, 5 minutes).
	NewMemberJoinTimeoutMs int32
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: a commit whose
	// metadata string is longer gets OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int32
	// OffsetsRetentionMs is offsets.retention.minutes in milliseconds: how
	// long committed offsets outlive their group's last member, or a simple
	// consumer's last commit, before ExpireOffsets deletes them (KIP-211).
	OffsetsRetentionMs int64
	// PartitionExists, when set, says whether a topic partition exists; a
	// commit for one that does not gets UNKNOWN_TOPIC_OR_PARTITION, as
	// Kafka's broker answers before the coordinator sees it.
	PartitionExists func(topic string, partition int32) bool
	// Bugs are the planted bugs; the zero value is correct.
	Bugs Bugs
	// Log receives the coordinator's operator log lines (rebalances,
	// generations, members removed); the zero Log discards them. Logging
	// never changes a decision.
	Log env.Log
}

// Kafka's defaults.
const (
	defaultGroupMinSessionTimeoutMs     = 6000
	defaultGroupMaxSessionTimeoutMs     = 1800000
	defaultGroupInitialRebalanceDelayMs = 3000
	defaultGroupMaxSize                 = 1000
	defaultNewMemberJoinTimeoutMs       = 300000
	defaultOffsetMetadataMaxBytes       = 4096
	defaultOffsetsRetentionMs           = 10080 * 60 * 1000 // offsets.retention.minutes, 7 days
)

// DefaultConfig is Kafka's defaults for partition of partitions.
func DefaultConfig(partition, partitions int32) Config {
	return Config{
		Partition:                    partition,
		OffsetsTopicPartitions:       partitions,
		GroupMinSessionTimeoutMs:     defaultGroupMinSessionTimeoutMs,
		GroupMaxSessionTimeoutMs:     defaultGroupMaxSessionTimeoutMs,
		GroupInitialRebalanceDelayMs: defaultGroupInitialRebalanceDelayMs,
		GroupMaxSize:                 defaultGroupMaxSize,
		NewMemberJoinTimeoutMs:       defaultNewMemberJoinTimeoutMs,
		OffsetMetadataMaxBytes:       defaultOffsetMetadataMaxBytes,
		OffsetsRetentionMs:           defaultOffsetsRetentionMs,
	}
}

// Validate names the first setting that is out of range.
func (c Config) Validate() error {
	switch {
	case c.OffsetsTopicPartitions <= 0:
		return fmt.Errorf("group: offsets.topic.num.partitions %d is not positive", c.OffsetsTopicPartitions)
	case c.Partition < 0 || c.Partition >= c.OffsetsTopicPartitions:
		return fmt.Errorf("group: partition %d is outside 0..%d", c.Partition, c.OffsetsTopicPartitions-1)
	case c.GroupMinSessionTimeoutMs <= 0:
		return fmt.Errorf("group: group.min.session.timeout.ms %d is not positive", c.GroupMinSessionTimeoutMs)
	case c.GroupMaxSessionTimeoutMs < c.GroupMinSessionTimeoutMs:
		return fmt.Errorf("group: group.max.session.timeout.ms %d is below the minimum %d", c.GroupMaxSessionTimeoutMs, c.GroupMinSessionTimeoutMs)
	case c.GroupInitialRebalanceDelayMs < 0:
		return fmt.Errorf("group: group.initial.rebalance.delay.ms %d is negative", c.GroupInitialRebalanceDelayMs)
	case c.GroupMaxSize <= 0:
		return fmt.Errorf("group: group.max.size %d is not positive", c.GroupMaxSize)
	case c.NewMemberJoinTimeoutMs <= 0:
		return fmt.Errorf("group: new member join timeout %d is not positive", c.NewMemberJoinTimeoutMs)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("group: offset.metadata.max.bytes %d is negative", c.OffsetMetadataMaxBytes)
	case c.OffsetsRetentionMs <= 0:
		return fmt.Errorf("group: offsets retention %d ms is not positive", c.OffsetsRetentionMs)
	}
	return nil
}
