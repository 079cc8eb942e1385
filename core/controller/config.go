package controller

import (
	"fmt"
	"slices"

	"strand/core/config"
	"strand/core/env"
	"strand/core/metadata"
)

// Config is the controller's configuration. Names follow Kafka's keys.
type Config struct {
	// NodeID is node.id.
	NodeID int32
	// Voters are the node ids of controller.quorum.voters; the one whose
	// Raft voter leads is the active controller.
	Voters []int32
	// VoterEndpoints are the voters' controller listeners, which
	// DescribeQuorum v2 names; nil names none.
	VoterEndpoints []VoterEndpoint
	// ClusterID is cluster.id; registrations naming another are refused.
	// Empty accepts any.
	ClusterID string
	// BrokerSessionTimeoutMs is broker.session.timeout.ms (Kafka 9000).
	BrokerSessionTimeoutMs int64
	// DefaultPartitions is num.partitions (Kafka 1).
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor (Kafka 1).
	DefaultReplicationFactor int16
	// MinInsyncReplicas is the cluster default min.insync.replicas (1); a
	// topic config overrides it.
	MinInsyncReplicas int
	// UncleanLeaderElectionEnable is the cluster default of
	// unclean.leader.election.enable (false); a topic config overrides it.
	UncleanLeaderElectionEnable bool
	// ELRDisabled turns eligible leader replicas (KIP-966) off. Strand
	// keeps them on by default (replication issue §4).
	ELRDisabled bool
	// ProducerIDBlockSize is the size of an AllocateProducerIds block
	// (Kafka 1000).
	ProducerIDBlockSize int32
	// FetchWaitersMax bounds the metadata fetches held by long polling;
	// beyond it a fetch is answered at once, empty.
	FetchWaitersMax int
	// FetchMaxBytes caps the records in one metadata fetch response.
	FetchMaxBytes int32
	// LeaderImbalanceCheckIntervalMs is leader.imbalance.check.interval.ms
	// (Kafka 300000): how often leadership moves back to preferred
	// replicas. 0 turns it off (auto.leader.rebalance.enable=false).
	LeaderImbalanceCheckIntervalMs int64
	// SnapshotIntervalRecords is how many committed records may follow
	// the latest snapshot before the controller takes the next (Kafka
	// counts bytes, metadata.log.max.record.bytes.between.snapshots).
	SnapshotIntervalRecords int64
	// DescribeTopicConfig gives a new topic's effective configs from its
	// overrides (config.Broker.DescribeTopicConfig of this node's static
	// configuration), which CreateTopics v5+ answers with (KIP-525), as
	// Kafka's controller resolves them from its own. Nil leaves them out.
	DescribeTopicConfig func(overrides map[string]string) []config.ConfigEntry
	// BootstrapRecords are the records the first active controller of a
	// new cluster appends before anything else (metadata.DecodeBootstrap:
	// SCRAM credentials, `strand format --add-scram`); nil for none.
	BootstrapRecords []metadata.Record
	// Log receives the controller's operator log lines (activation,
	// broker fencing, elections, topic changes); the zero Log discards
	// them. Logging never changes a decision.
	Log env.Log
}

// DefaultConfig returns Kafka's defaults for a single-node controller.
func DefaultConfig(nodeID int32) Config {
	return Config{
		NodeID:                   nodeID,
		Voters:                   []int32{nodeID},
		BrokerSessionTimeoutMs:   9000,
		DefaultPartitions:        1,
		DefaultReplicationFactor: 1,
		MinInsyncReplicas:        1,
		ProducerIDBlockSize:      1000,
		FetchWaitersMax:          1024,
		FetchMaxBytes:            8 << 20,

		LeaderImbalanceCheckIntervalMs: 300_000,
		SnapshotIntervalRecords:        20_000,
	}
}

func (c Config) validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("controller config: node.id %d is negative", c.NodeID)
	case len(c.Voters) == 0:
		return fmt.Errorf("controller config: controller.quorum.voters is empty")
	case !slices.Contains(c.Voters, c.NodeID):
		return fmt.Errorf("controller config: node.id %d is not in controller.quorum.voters %v", c.NodeID, c.Voters)
	case c.BrokerSessionTimeoutMs <= 0:
		return fmt.Errorf("controller config: broker.session.timeout.ms %d is not positive", c.BrokerSessionTimeoutMs)
	case c.DefaultPartitions < 1:
		return fmt.Errorf("controller config: num.partitions %d is below 1", c.DefaultPartitions)
	case c.DefaultReplicationFactor < 1:
		return fmt.Errorf("controller config: default.replication.factor %d is below 1", c.DefaultReplicationFactor)
	case c.MinInsyncReplicas < 1:
		return fmt.Errorf("controller config: min.insync.replicas %d is below 1", c.MinInsyncReplicas)
	case c.ProducerIDBlockSize < 1:
		return fmt.Errorf("controller config: producer id block size %d is below 1", c.ProducerIDBlockSize)
	case c.FetchWaitersMax < 0:
		return fmt.Errorf("controller config: FetchWaitersMax %d is negative", c.FetchWaitersMax)
	case c.LeaderImbalanceCheckIntervalMs < 0:
		return fmt.Errorf("controller config: leader.imbalance.check.interval.ms %d is negative", c.LeaderImbalanceCheckIntervalMs)
	case c.FetchMaxBytes < 1:
		return fmt.Errorf("controller config: FetchMaxBytes %d is below 1", c.FetchMaxBytes)
	case c.SnapshotIntervalRecords < 1:
		return fmt.Errorf("controller config: SnapshotIntervalRecords %d is below 1", c.SnapshotIntervalRecords)
	}
	return checkBootstrap(c.BootstrapRecords)
}
