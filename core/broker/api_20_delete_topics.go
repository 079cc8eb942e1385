package broker

// DeleteTopics (key 20), versions 1..6 (v6 names topics by id).
//
// Served by core/controller, forwarded like CreateTopics. When the
// RemoveTopicRecord reaches this broker, its replicas of the topic stop
// serving and their logs are deleted (metadata_follower.go
// retirePartition), and the group coordinators it leads remove every
// group's committed offsets of the topic (coordinators.go
// onTopicsDeleted, as Kafka's onPartitionsDeleted), so a topic created
// again with the same name starts empty and is read from its start.
//
// Skipped: Kafka renames the directories aside first
// (<topic>-<partition>.<topic id>-delete) and removes them after
// file.delete.delay.ms; Strand removes them at once.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleDeleteTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteTopicsRequest) {
	cr.forwardDeleteTopics(conn, hdr, req)
}
