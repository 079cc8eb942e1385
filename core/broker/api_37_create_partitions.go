package broker

// CreatePartitions (key 37), versions 0..3.
//
// Served by core/controller, forwarded like CreateTopics. The new
// partitions are opened here when their PartitionRecords arrive.
//
// Skipped: nothing beyond what core/controller skips.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (cr *controllerRole) handleCreatePartitions(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreatePartitionsRequest) {
	cr.forwardCreatePartitions(conn, hdr, req)
}
