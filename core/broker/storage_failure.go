package broker

// Storage failures (SPEC.md §3.5), the broker's side of Kafka's
// LogDirFailureChannel. A log fails on a failed write, read or Sync of its
// own, or with its whole directory (log.Manager.Fail). Then:
//
//   - what waits on the log is answered KAFKA_STORAGE_ERROR at once, as
//     Kafka completes an offline replica's delayed operations with that
//     error: acks=all produces waiting for the HW, produces waiting for
//     the recovery point (durable.go), parked fetches and DeleteRecords
//     (onLogFailure); none of them is ever answered success afterwards;
//   - the broker asks to be fenced (metadata_follower.go storageFailed), so
//     that its leaderships move;
//   - a partition assigned to this broker is opened in a live directory
//     only; where none is live, or its open fails, it stays offline here
//     and its requests get KAFKA_STORAGE_ERROR (offlinePartitions), as
//     Kafka's HostedPartition.Offline.

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/log"
	"strand/core/metadata"
)

// onLogFailure runs (as p's log's failure listener) when p's log fails. It
// takes every produce waiting on the log out of its purgatory at once, so
// that no later HW advance (an ISR shrink committed meanwhile) or recovery
// point answers one success: records a failed leader log holds may be lost
// with it, and an acknowledgement of them could be a lost acknowledged
// write. The answers, and the waking of parked fetches and DeleteRecords,
// wait for the next turn of the event loop, as the listener may run inside
// the very call (an append, a fetch's read) that failed the log.
func (pm *partitionManager) onLogFailure(p *partition) {
	waits := pm.takeProduceWaits(p)
	pm.after(0, func() { pm.answerLogFailure(p, waits) })
}

// takeProduceWaits removes from their purgatories the produces waiting on
// p (acks=all for the HW, oldest first, then those waiting for the
// recovery point) and stops the partition's produce timer. The replica's
// own waiters are expired with them, so that they hold no purgatory room.
func (pm *partitionManager) takeProduceWaits(p *partition) []*produceSlot {
	var slots []*produceSlot
	p.replica.ExpireAcks(math.MaxInt64) // every waiter, whatever its deadline
	for _, r := range p.replica.TakeAckResults() {
		if slot, ok := p.ackWaits[r.RequestID]; ok {
			delete(p.ackWaits, r.RequestID)
			slots = append(slots, slot)
		}
	}
	slots = append(slots, p.durableWaits...)
	p.durableWaits = nil
	p.stopProduceExpiry()
	return slots
}

// answerLogFailure answers KAFKA_STORAGE_ERROR to the produces taken from
// p's purgatories, and to any parked since, and re-checks what else waits
// on p: parked fetches answer KAFKA_STORAGE_ERROR, DeleteRecords too, and a
// group coordinator on it resigns.
func (pm *partitionManager) answerLogFailure(p *partition, slots []*produceSlot) {
	pm.answerProduceWaits(append(slots, pm.takeProduceWaits(p)...), kerr.KafkaStorageError.Code)
	if !p.retired {
		pm.afterReplicaChange(p)
	}
}

// answerRetired answers the produces taken from retired partition p's
// purgatories as Kafka's DelayedProduce answers one whose partition this
// broker no longer hosts (getPartitionOrError): NOT_LEADER_OR_FOLLOWER if
// the image holds the partition again (a topic re-created under the same
// name), UNKNOWN_TOPIC_OR_PARTITION otherwise (notHostedCode). Its
// DeleteRecords are answered too.
func (pm *partitionManager) answerRetired(p *partition, slots []*produceSlot) {
	pm.answerProduceWaits(slots, pm.notHostedCode(p.key))
	pm.completeDeleteRecords(p)
}

// answerProduceWaits answers code to the produces takeProduceWaits took.
func (pm *partitionManager) answerProduceWaits(slots []*produceSlot, code int16) {
	for _, slot := range slots {
		slot.part.ErrorCode, slot.part.BaseOffset = code, -1
		pm.releaseProduce(slot.pending)
	}
}

// logDirFor is the index of the log directory to open tp's log in: the
// one holding it (if that directory is offline the log has failed with
// it, and the partition answers KAFKA_STORAGE_ERROR), otherwise the live
// directory holding the fewest logs, the first of them on a tie. It fails,
// wrapping the directories' storage errors, when none is live (an offline
// directory refuses new logs), or when a directory went offline before its
// logs were read: tp's log may be there, and an empty one created
// elsewhere would replace it.
func (pm *partitionManager) logDirFor(tp log.TopicPartition) (int, error) {
	for i, m := range pm.managers {
		if _, ok := m.Log(tp); ok {
			return i, nil
		}
	}
	chosen := -1
	var offline []error
	for i, m := range pm.managers {
		if err := m.Err(); err != nil {
			if m.LogsUnknown() {
				return -1, fmt.Errorf("log %s may be in a log directory that went offline before its logs were read: %w", tp.DirName(), err)
			}
			offline = append(offline, err)
			continue
		}
		if chosen < 0 || len(m.Partitions()) < len(pm.managers[chosen].Partitions()) {
			chosen = i
		}
	}
	if chosen < 0 {
		return -1, fmt.Errorf("no live log directory for %s: %w", tp.DirName(), errors.Join(offline...))
	}
	return chosen, nil
}

// markPartitionOffline records that tp, assigned to this broker, could not
// be opened (err): its requests answer KAFKA_STORAGE_ERROR until an open
// succeeds (reconcilePartitions tries again at each metadata change). The
// first failure is logged, not each retry.
func (pm *partitionManager) markPartitionOffline(tp metadata.TopicPartition, err error) {
	key := partitionKey{tp.Topic, tp.Partition}
	if pm.offlinePartitions[key] {
		return
	}
	if pm.offlinePartitions == nil {
		pm.offlinePartitions = map[partitionKey]bool{}
	}
	pm.offlinePartitions[key] = true
	pm.cfg.Log.Error("cannot open partition; it stays offline on this broker, requests on it get KAFKA_STORAGE_ERROR",
		slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition)), slog.Any("err", err))
}

// forgetOfflinePartitions drops the offline partitions that are open now
// or that the image no longer assigns to this broker.
func (pm *partitionManager) forgetOfflinePartitions() {
	for key := range pm.offlinePartitions { // order-independent: deletes only
		s, assigned := pm.meta.image.PartitionByName(key.topic, key.index)
		if pm.partitions[key] != nil || !assigned || !slices.Contains(s.Replicas, pm.id) {
			delete(pm.offlinePartitions, key)
		}
	}
}

// partitionOffline reports whether key is assigned to this broker but
// could not be opened (markPartitionOffline).
func (pm *partitionManager) partitionOffline(key partitionKey) bool { return pm.offlinePartitions[key] }

// storageFailed reports whether a log directory is offline or a hosted
// partition's log has failed. Until log directories have ids, one failed
// directory fences the whole broker: coarse, but it moves every affected
// leadership away. An offline directory counts even while it holds no
// log: it refuses new ones, so a broker left unfenced would be given
// replicas, and leaderships, it cannot host.
func (pm *partitionManager) storageFailed() bool {
	for _, m := range pm.managers {
		if m.Err() != nil {
			return true
		}
	}
	for _, p := range pm.sortedPartitions() {
		if p.storageFailed() {
			return true
		}
	}
	return false
}
