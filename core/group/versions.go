package group

import "github.com/twmb/franz-go/pkg/kmsg"

// VersionRange is one API key and the versions Handle serves for it.
type VersionRange struct {
	Key, Min, Max int16
}

// Versions lists what Handle serves, for the broker's ApiVersions table
// (each api_NN file says what its versions skip). It starts at v0 for every
// key, so kafka-go (JoinGroup v2, OffsetCommit v2, OffsetFetch v1), kafkajs
// (JoinGroup v5, OffsetCommit v5), sarama (JoinGroup v7) and kgo all fit.
// Not served: OffsetCommit and OffsetFetch v10 (topic ids) and KIP-848's
// ConsumerGroupHeartbeat (key 68), whose advertisement would switch kgo to
// the new protocol. FindCoordinator (key 10) is the broker's: it needs the
// metadata to name the partition leader (PartitionFor names the partition).
func Versions() []VersionRange {
	return []VersionRange{
		{kmsg.OffsetCommit.Int16(), 0, 9},
		{kmsg.OffsetFetch.Int16(), 0, 9},
		{kmsg.JoinGroup.Int16(), 0, 9},
		{kmsg.Heartbeat.Int16(), 0, 4},
		{kmsg.LeaveGroup.Int16(), 0, 5},
		{kmsg.SyncGroup.Int16(), 0, 5},
		{kmsg.DescribeGroups.Int16(), 0, 6},
		{kmsg.ListGroups.Int16(), 0, 5},
		{kmsg.DeleteGroups.Int16(), 0, 3},
		{kmsg.OffsetDelete.Int16(), 0, 0},
	}
}
