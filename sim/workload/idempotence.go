package workload

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// partitionInFlightMax is how many batches of one partition an idempotent
// producer has in flight at once: Kafka's limit for idempotence
// (max.in.flight.requests.per.connection ≤ 5), which is also how many
// batches the broker remembers per producer for deduplication.
const partitionInFlightMax = 5

// idempotence is an idempotent producer's session, as kgo runs it: the
// producer id and epoch InitProducerId gave it, and per partition the
// batches not yet acknowledged, in sequence order.
type idempotence struct {
	producerID int64
	epoch      int16
	parts      map[models.TopicPartition]*idempotentPartition
	// resetting: a fatal producer error was seen; no new batch is made,
	// and once every batch is done the producer asks for a new id and
	// starts every sequence again at 0 (kgo's reset of a
	// non-transactional idempotent producer).
	resetting bool
	// initializing: an InitProducerId is under way.
	initializing bool
}

// idempotentPartition is one partition's pipeline. Batches go out in
// sequence order, up to partitionInFlightMax at once, to one leader; when
// one fails, nothing more is sent until every batch in flight is
// answered, and then every unacknowledged batch is sent again from the
// first, with the same sequences (kgo's rewind). Sending a later batch
// while an earlier one is retried would let a broker that does not know
// the producer yet append it first: Kafka accepts any first sequence from
// an unknown producer.
type idempotentPartition struct {
	tp       models.TopicPartition
	nextSeq  int32
	queue    []*idempotentBatch
	inFlight int
	// rewinding: a batch failed; resend from the first once inFlight is 0.
	rewinding bool
	// awaitingLeader: a metadata lookup for the next send is under way.
	awaitingLeader bool
}

// idempotentBatch is one batch and whether a try of it is in flight.
type idempotentBatch struct {
	values []string
	seq    sequenced
	sent   bool
}

// sequenced is one idempotent batch's producer id, epoch and base
// sequence, and when its first try was sent.
type sequenced struct {
	producerID   int64
	epoch        int16
	baseSequence int32
	// firstCallNs is when the batch was first sent, or 0 before that. A
	// try is recorded as called then: the broker answers a retry of an
	// appended batch with the offsets of the first append, so the write
	// it acknowledges may have happened as early as the first try.
	firstCallNs int64
}

// enqueue makes a batch of values for tp with the partition's next
// sequences and sends what the pipeline allows.
func (p *producer) enqueue(tp models.TopicPartition, values []string) {
	q := p.idem.parts[tp]
	if q == nil {
		q = &idempotentPartition{tp: tp}
		p.idem.parts[tp] = q
	}
	b := &idempotentBatch{values: values, seq: sequenced{producerID: p.idem.producerID, epoch: p.idem.epoch, baseSequence: q.nextSeq}}
	q.nextSeq += int32(len(values))
	q.queue = append(q.queue, b)
	p.w.idempotentSends = append(p.w.idempotentSends, models.IdempotentSend{Client: p.client.index, TP: tp,
		ProducerID: b.seq.producerID, ProducerEpoch: b.seq.epoch, BaseSequence: b.seq.baseSequence, Values: values})
	p.pump(q)
}

// pump sends q's unsent batches in order while the pipeline allows.
func (p *producer) pump(q *idempotentPartition) {
	if p.w.stopped {
		return
	}
	if q.rewinding {
		if q.inFlight > 0 {
			return
		}
		q.rewinding = false
		for _, b := range q.queue {
			b.sent = false
		}
	}
	if q.awaitingLeader || q.inFlight >= partitionInFlightMax || !q.hasUnsent() {
		return
	}
	q.awaitingLeader = true
	p.client.withLeader(q.tp, func() bool { return p.w.stopped }, func(li leaderInfo) {
		q.awaitingLeader = false
		if q.rewinding {
			p.pump(q)
			return
		}
		for _, b := range q.queue {
			if q.inFlight >= partitionInFlightMax {
				break
			}
			if !b.sent {
				p.send(q, b, li)
			}
		}
	})
}

func (q *idempotentPartition) hasUnsent() bool {
	for _, b := range q.queue {
		if !b.sent {
			return true
		}
	}
	return false
}

// send sends one try of b to leader li and follows its answer.
func (p *producer) send(q *idempotentPartition, b *idempotentBatch, li leaderInfo) {
	b.sent = true
	q.inFlight++
	if b.seq.firstCallNs == 0 {
		b.seq.firstCallNs = p.w.s.NowNs()
	}
	seq := b.seq
	p.w.produce(p.client, p.acks, q.tp, li.leader, b.values, &seq, func(op models.Produce, code int16, retriable bool) {
		q.inFlight--
		switch {
		case op.Acked || code == kerr.DuplicateSequenceNumber.Code:
			// DUPLICATE_SEQUENCE_NUMBER: appended before, beyond the
			// broker's memory of it; done, its offset unknown.
			p.done(q, b)
		case p.w.stopped:
			return
		case code == kerr.InvalidProducerEpoch.Code || code == kerr.UnknownProducerID.Code ||
			code == kerr.InvalidProducerIDMapping.Code || !retriable && code != kerr.OutOfOrderSequenceNumber.Code:
			// Fatal for the session: give the batch up, start anew.
			p.idem.resetting = true
			p.done(q, b)
			q.rewinding = true
		case code == kerr.OutOfOrderSequenceNumber.Code && q.queue[0] == b:
			// The first unacknowledged batch out of order: the broker
			// has later sequences, so this one can never land in order
			// (kgo resets the producer id).
			p.idem.resetting = true
			p.done(q, b)
			q.rewinding = true
		default:
			// Retriable, or out of order behind a batch being retried.
			q.rewinding = true
			p.client.forgetLeader(q.tp)
		}
		if q.rewinding && q.inFlight == 0 {
			p.client.proc.After(p.w.cfg.BackoffNs, func() { p.pump(q) })
			return
		}
		p.pump(q)
	})
}

// done removes b from q (acknowledged or given up) and starts a new
// session if one is due.
func (p *producer) done(q *idempotentPartition, b *idempotentBatch) {
	for i, x := range q.queue {
		if x == b {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			p.inFlight--
			break
		}
	}
	p.maybeReset()
}

// initProducerID asks a random broker for a producer id (InitProducerId
// with no transactional id, as kgo's idempotent producer does) until one
// answers, then runs then. Every error is retried: a producer that gave up
// would sit idle for the rest of the run.
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
			if r := resp.(*kmsg.InitProducerIDResponse); r.ErrorCode == 0 {
				p.idem.producerID, p.idem.epoch = r.ProducerID, r.ProducerEpoch
				p.idem.parts = map[models.TopicPartition]*idempotentPartition{}
				p.idem.initializing, p.idem.resetting = false, false
				then()
				return
			}
		}
		p.client.proc.After(p.w.cfg.BackoffNs, func() { p.initProducerID(then) })
	})
}

// maybeReset starts the new session of a producer that saw a fatal error
// once none of its batches is left.
func (p *producer) maybeReset() {
	if p.idem == nil || !p.idem.resetting || p.idem.initializing || p.inFlight > 0 {
		return
	}
	p.initProducerID(func() {})
}
