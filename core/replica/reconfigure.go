package replica

import "fmt"

// SetMinInsyncReplicas changes min.insync.replicas, as the broker does when
// the topic's config changes (AlterConfigs). Produces and HW advances from
// now on are judged by the new value; on a leader the HW is re-examined at
// once, so a lowered value may complete waiting acks=all produces.
func (p *Partition) SetMinInsyncReplicas(minInsyncReplicas int, nowMs int64) error {
	defer p.checkInvariants()
	if minInsyncReplicas < 1 {
		return fmt.Errorf("replica config: MinInsyncReplicas %d is below 1", minInsyncReplicas)
	}
	p.cfg.MinInsyncReplicas = minInsyncReplicas
	p.maybeAdvanceHighWatermark(nowMs)
	return nil
}

// MinInsyncReplicas is the min.insync.replicas the replica judges by.
func (p *Partition) MinInsyncReplicas() int { return p.cfg.MinInsyncReplicas }
