package models

import (
	"encoding/binary"
	"fmt"
)

// IdempotentSend is one batch an idempotent producer sent (each retry
// resends the same batch): its producer id, epoch and base sequence, and
// its records' values.
type IdempotentSend struct {
	Client        int
	TP            TopicPartition
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Values        []string
}

// The RecordBatch v2 header fields the idempotence check reads (KIP-98):
// producerId at byte 43, producerEpoch at 51, baseSequence at 53.
const (
	batchProducerIDAt    = 43
	batchProducerEpochAt = 51
	batchBaseSequenceAt  = 53
	batchHeaderBytes     = 61
)

// CheckIdempotence checks the final log of every partition against the
// idempotent producers' sends: each record an idempotent producer sent is
// in the log at most once, its batch header carries the producer id, epoch
// and sequence it was sent with, and per (producer id, epoch) the
// sequences rise strictly in offset order: no duplicate, no reordering.
// A gap is allowed: a batch the producer gave up leaves one, and Kafka
// accepts any first sequence from a producer it does not know yet (so a
// batch may land after an earlier one was refused). final holds every partition's replicas (identical up
// to the high watermark, which CheckFinal checks, and from their log
// starts on); the leader's log is read, all of it still stored: below its
// log start a follower may store batches the leader never had (it
// truncates only down to the end of the leader's epoch, which the
// leader's log start may have moved above the leader's first batch of the
// next epoch), while the leader's own batches there are its history, and
// a duplicate a DeleteRecords has since cut is still a duplicate. Within
// the fault budget only: over it, an acknowledged batch may be lost, and
// its retry then lands after later ones.
func CheckIdempotence(sends []IdempotentSend, final map[TopicPartition]PartitionFinal) []Violation {
	type sent struct {
		pid   int64
		epoch int16
		seq   int32
	}
	byValue := map[string]sent{}
	for _, s := range sends {
		for i, v := range s.Values {
			byValue[v] = sent{s.ProducerID, s.ProducerEpoch, s.BaseSequence + int32(i)}
		}
	}
	tps := make([]TopicPartition, 0, len(final))
	for tp := range final { // order-independent: sorted below
		tps = append(tps, tp)
	}
	sortTPs(tps)
	var out []Violation
	for _, tp := range tps {
		pf := final[tp]
		if len(pf.Replicas) == 0 {
			continue
		}
		type session struct {
			pid   int64
			epoch int16
		}
		lastSeq := map[session]int32{}
		seenAt := map[string]int64{}
		bad := func(format string, args ...any) {
			out = append(out, Violation{Check: "idempotence", TP: tp, Detail: fmt.Sprintf(format, args...)})
		}
	batches:
		for _, b := range leaderLog(pf).Batches {
			if len(b.Bytes) < batchHeaderBytes {
				bad("batch at %d: %d bytes, shorter than a header", b.BaseOffset, len(b.Bytes))
				continue
			}
			pid := int64(binary.BigEndian.Uint64(b.Bytes[batchProducerIDAt:]))
			epoch := int16(binary.BigEndian.Uint16(b.Bytes[batchProducerEpochAt:]))
			baseSeq := int32(binary.BigEndian.Uint32(b.Bytes[batchBaseSequenceAt:]))
			for i, r := range b.Records {
				want, idempotent := byValue[r.Value]
				if !idempotent {
					continue
				}
				if prev, dup := seenAt[r.Value]; dup {
					bad("record %q at offsets %d and %d: an idempotent producer's record written twice", r.Value, prev, r.Offset)
					continue batches
				}
				seenAt[r.Value] = r.Offset
				seq := baseSeq + int32(i)
				if pid != want.pid || epoch != want.epoch || seq != want.seq {
					bad("record %q at offset %d: batch header says producer %d epoch %d sequence %d, it was sent as %d/%d/%d",
						r.Value, r.Offset, pid, epoch, seq, want.pid, want.epoch, want.seq)
					continue batches
				}
				s := session{pid, epoch}
				if last, seen := lastSeq[s]; seen && seq <= last {
					bad("record %q at offset %d: producer %d epoch %d sequence %d after sequence %d (a duplicate or reordering)",
						r.Value, r.Offset, pid, epoch, seq, last)
					continue batches
				}
				lastSeq[s] = seq
			}
		}
	}
	return out
}
