package workload

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// idempotence is an idempotent producer's session: the producer id and
// epoch InitProducerId gave it, and the next sequence per partition.
type idempotence struct {
	producerID int64
	epoch      int16
	seqs       map[models.TopicPartition]int32
	// resetting: a fatal producer error was seen; no new batch is sent,
	// and once every batch in flight is done the producer asks for a new
	// id and starts every sequence again at 0 (kgo's reset of a
	// non-transactional idempotent producer).
	resetting bool
	// initializing: an InitProducerId is under way.
	initializing bool
}

// sequenced is one idempotent batch's producer id, epoch and base
// sequence.
type sequenced struct {
	producerID   int64
	epoch        int16
	baseSequence int32
}

// next takes n sequences of tp for a new batch.
func (s *idempotence) next(tp models.TopicPartition, n int) *sequenced {
	seq := &sequenced{producerID: s.producerID, epoch: s.epoch, baseSequence: s.seqs[tp]}
	s.seqs[tp] += int32(n)
	return seq
}

// initProducerID asks a random broker for a producer id (InitProducerId
// with no transactional id, as kgo's idempotent producer does) until one
// answers, then runs then. Every error is retried: the broker answers
// COORDINATOR_NOT_AVAILABLE or NOT_CONTROLLER-like errors while the
// controller is unreachable, and a producer that gave up would sit idle for
// the rest of the run.
func (p *producer) initProducerID(then func()) {
	if p.w.stopped {
		return
	}
	p.idem.initializing = true
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	p.client.send(p.client.randomBroker(), req, p.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err == nil {
			r := resp.(*kmsg.InitProducerIDResponse)
			if r.ErrorCode == 0 {
				p.idem.producerID, p.idem.epoch = r.ProducerID, r.ProducerEpoch
				p.idem.seqs = map[models.TopicPartition]int32{}
				p.idem.initializing, p.idem.resetting = false, false
				then()
				return
			}
		}
		p.client.proc.After(p.w.cfg.BackoffNs, func() { p.initProducerID(then) })
	})
}

// maybeReset starts the new session of a producer that saw a fatal error
// once its last batch in flight is done.
func (p *producer) maybeReset() {
	if p.idem == nil || !p.idem.resetting || p.idem.initializing || p.inFlight > 0 {
		return
	}
	p.initProducerID(func() {})
}
