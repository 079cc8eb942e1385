package cluster

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/models"
)

// alterRecorder is a node's network as its core sees it: the node's
// NodeNet, with every AlterPartition the node sends its controller
// recorded (call and return times, request and answer) for the metadata
// registers of models.CheckMetadataRegisters. An AlterPartition that a
// partition leader hands to the active controller on its own node never
// crosses the network and is not recorded; the model treats it as one of
// the controller's unseen changes.
type alterRecorder struct {
	env.Network
	node int32
	c    *Cluster
}

// Send records AlterPartition exchanges and forwards everything.
func (a alterRecorder) Send(peer env.NodeID, req kmsg.Request, done func(kmsg.Response, error)) {
	ap, ok := req.(*kmsg.AlterPartitionRequest)
	if !ok {
		a.Network.Send(peer, req, done)
		return
	}
	first := len(a.c.alters)
	for _, t := range ap.Topics {
		for _, p := range t.Partitions {
			isr := slices.Clone(p.NewISR)
			for _, m := range p.NewEpochISR {
				isr = append(isr, m.BrokerID)
			}
			a.c.alters = append(a.c.alters, models.AlterPartitionOp{TopicID: t.TopicID, Partition: p.Partition,
				Broker: a.node, CallNs: a.c.S.NowNs(), ReturnNs: models.NeverReturnedNs,
				ReqLeaderEpoch: p.LeaderEpoch, ReqPartitionEpoch: p.PartitionEpoch, ReqISR: isr})
		}
	}
	last := len(a.c.alters)
	a.Network.Send(peer, req, func(resp kmsg.Response, err error) {
		if r, ok := resp.(*kmsg.AlterPartitionResponse); ok && err == nil {
			a.recordAnswer(r, first, last)
		}
		done(resp, err)
	})
}

// recordAnswer fills in the answers of the ops [first, last) from resp.
// A top-level error is every partition's.
func (a alterRecorder) recordAnswer(resp *kmsg.AlterPartitionResponse, first, last int) {
	for i := first; i < last; i++ {
		op := &a.c.alters[i]
		op.ReturnNs, op.ErrorCode = a.c.S.NowNs(), resp.ErrorCode
		if resp.ErrorCode != 0 {
			continue
		}
		op.ErrorCode = -1 // no answer for this partition: not accepted
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.TopidID == op.TopicID && p.Partition == op.Partition { // kmsg spells it TopidID
					op.ErrorCode, op.LeaderEpoch, op.PartitionEpoch, op.ISR = p.ErrorCode, p.LeaderEpoch, p.PartitionEpoch, slices.Clone(p.ISR)
				}
			}
		}
	}
}
