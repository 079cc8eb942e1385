package broker

// AlterPartition (key 56): the broker side. The controller side (versions
// 0..3, controller role only) is core/controller's; this file sends a
// partition leader's pending ISR proposal (core/replica) to the controller
// and hands the answer back to the replica.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/replica"
)

// sendAlterPartition sends a replica's ISR proposal to the controller and
// hands the answer back to the replica.
func (pm *partitionManager) sendAlterPartition(p *partition, ap *replica.AlterPartitionRequest) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(2)
	req.BrokerID, req.BrokerEpoch = pm.id, pm.meta.brokerEpoch
	t := kmsg.NewAlterPartitionRequestTopic()
	t.TopicID = p.topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p.key.index, ap.LeaderEpoch, ap.PartitionEpoch
	rp.NewISR = append([]int32(nil), ap.NewISR...)
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	proposal := ap.ProposalID
	pm.controllerRole.toController(req, func(r kmsg.Response, err error) {
		answer := replica.AlterPartitionResponse{ProposalID: proposal, Error: kerr.NetworkException.Code}
		if err == nil {
			resp := r.(*kmsg.AlterPartitionResponse)
			answer.Error = resp.ErrorCode
			if answer.Error == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
				ap := resp.Topics[0].Partitions[0]
				answer.Error, answer.LeaderEpoch, answer.PartitionEpoch, answer.ISR = ap.ErrorCode, ap.LeaderEpoch, ap.PartitionEpoch, ap.ISR
			}
		}
		if pm.partitions[p.key] != p {
			return
		}
		if err := p.replica.OnAlterPartitionResponse(answer, pm.nowMs()); err != nil {
			return // a malformed success: the next pushed state repairs it
		}
		if answer.Error != 0 {
			// Retriable errors hand the proposal out again: not in a hot loop.
			pm.after(replicaFetchBackoffMs, func() { pm.afterReplicaChange(p) })
			return
		}
		pm.afterReplicaChange(p)
	})
}

// scheduleISRCheck runs MaybeShrinkISR on every led partition every
// replica.lag.time.max.ms / 2, as Kafka's isr-expiration task does. It
// skips a partition whose log has failed, as Kafka visits online
// partitions only: a failed log's end offset no longer says what the
// followers must reach, and a shrink to the failed leader alone would let
// its HW pass records that may be lost with its log.
func (pm *partitionManager) scheduleISRCheck() {
	pm.after(max(pm.cfg.Broker.ReplicaLagTimeMaxMs/2, 1), func() {
		now := pm.nowMs()
		for _, p := range pm.sortedPartitions() {
			if p.replica.Role() == replica.RoleLeader && !p.storageFailed() && p.replica.MaybeShrinkISR(now) {
				pm.afterReplicaChange(p)
			}
		}
		pm.scheduleISRCheck()
	})
}
