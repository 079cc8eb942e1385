package broker

// DeleteTopics (key 20), versions 1..6 (v6 names topics by id).
//
// Served by core/controller, forwarded like CreateTopics. When the
// RemoveTopicRecord reaches this broker, its replicas of the topic stop
// serving and their directories are renamed aside
// (<topic>-<partition>.<topic id>-delete, as Kafka does), so a topic
// created again with the same name starts empty (metadata_follower.go).
//
// Skipped: the renamed directories are not yet removed from disk.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (n *Node) handleDeleteTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteTopicsRequest) {
	n.handleControllerRequest(conn, hdr, req)
}
