package workload

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/models"
	"strand/sim/simclock"
)

// inFlightMax is how many batches one producer has outstanding at most
// (Kafka's max.in.flight.requests.per.connection default); a batch due
// while that many are out is skipped, so a stalled cluster slows the
// offered load instead of queueing it without bound.
const inFlightMax = 5

// producer sends batches to random partitions at its rate, up to
// inFlightMax at once, and retries failed ones with the same values.
type producer struct {
	w        *Workload
	client   *client
	acks     int16
	seq      int
	inFlight int
	// intervalNs is the mean time between batches.
	intervalNs int64
	// idem is the idempotent producer's state; nil for a plain producer.
	idem *idempotence
}

func (w *Workload) newProducer(idempotent bool) *producer {
	p := &producer{w: w, client: w.newClient("producer")}
	if idempotent {
		p.idem = &idempotence{producerID: -1}
	}
	switch n := w.r.IntN(10); {
	case idempotent:
		// enable.idempotence requires acks=all; drawing n anyway keeps
		// the workload stream's sequence the same for every mix.
		p.acks = -1
		w.idempotentDrawn++
	case n < 7:
		p.acks = -1
		w.acksDrawn[0]++
	case n < 9:
		p.acks = 1
		w.acksDrawn[1]++
	default:
		p.acks = 0
		w.acksDrawn[2]++
	}
	perProducer := int64(w.cfg.RecordsPerSec / w.cfg.Producers)
	meanBatch := int64(w.cfg.BatchRecordsMax+1) / 2
	p.intervalNs = max(meanBatch*1e9/max(perProducer, 1), 1)
	return p
}

// start begins producing: an idempotent producer first gets its producer
// id.
func (p *producer) start() {
	if p.idem != nil {
		p.initProducerID(p.scheduleNext)
		return
	}
	p.scheduleNext()
}

func (p *producer) scheduleNext() {
	if p.w.stopped {
		return
	}
	delayNs := p.intervalNs/2 + p.w.r.Int64N(p.intervalNs+1)
	p.client.proc.After(delayNs, p.produceNext)
}

func (p *producer) produceNext() {
	if p.w.stopped {
		return
	}
	p.scheduleNext()
	if p.inFlight >= inFlightMax || (p.idem != nil && p.idem.resetting) {
		return
	}
	tps := p.w.Partitions()
	tp := tps[p.w.r.IntN(len(tps))]
	n := 1 + p.w.r.IntN(p.w.cfg.BatchRecordsMax)
	values := make([]string, n)
	for i := range values {
		values[i] = recordValue(p.client.index, p.seq)
		p.seq++
	}
	p.inFlight++
	if p.idem == nil && p.w.cfg.ChurnTopics > 0 && p.w.r.IntN(1000) < churnProducePerMille {
		if !p.produceChurn(values) {
			p.inFlight--
		}
		return
	}
	if p.idem != nil {
		p.enqueue(tp, values)
		return
	}
	p.attempt(tp, values, 0, func() { p.inFlight-- })
}

// recordValue is the unique value of a producer's seq-th record:
// p<client>-<seq>. It is built with strconv rather than fmt because every
// record of every run goes through it.
func recordValue(client, seq int) string {
	buf := make([]byte, 0, 24)
	buf = append(buf, 'p')
	buf = strconv.AppendInt(buf, int64(client), 10)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, int64(seq), 10)
	return string(buf)
}

// attempt sends one try of a plain batch; then runs once the batch is
// acked, given up, or the workload stopped.
func (p *producer) attempt(tp models.TopicPartition, values []string, retries int, then func()) {
	stopped := func() bool { return p.w.stopped }
	p.client.withLeader(tp, stopped, func(li leaderInfo) {
		p.w.produce(p.client, p.acks, tp, li.leader, values, nil, func(op models.Produce, _ int16, retriable bool) {
			if op.Acked || p.acks == 0 || !retriable || retries >= p.w.cfg.RetriesMax || p.w.stopped {
				then()
				return
			}
			p.client.forgetLeader(tp)
			p.client.proc.After(p.w.cfg.BackoffNs, func() { p.attempt(tp, values, retries+1, then) })
		})
	})
}

// produce sends one Produce of values to leader and records it; done gets
// the recorded operation and whether a retry may help.
// seq, if set, makes the batch idempotent.
func (w *Workload) produce(c *client, acks int16, tp models.TopicPartition, leader int32, values []string, seq *sequenced,
	done func(op models.Produce, code int16, retriable bool)) {
	records := make([]batch.Record, len(values))
	for i, v := range values {
		records[i] = batch.Record{Value: []byte(v)}
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, w.cfg.ProduceTimeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = tp.Partition
	spec := batch.BuildSpec{FirstTimestamp: simclock.WallEpochMsDefault + w.s.NowNs()/1e6, Records: records}
	if seq != nil {
		spec.Idempotent, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, seq.producerID, seq.epoch, seq.baseSequence
	}
	rp.Records = batch.Build(spec)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	op := models.Produce{Client: c.index, TP: tp, Acks: acks, Values: values, CallNs: w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
	if seq != nil {
		op.CallNs, op.Idempotent = seq.firstCallNs, true
	}
	w.outstanding++
	c.send(leader, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		w.outstanding--
		retriable := true
		code := int16(0)
		switch {
		case err == errTimedOut:
			// Outcome unknown: the return time stays infinite.
		case err != nil:
			op.ReturnNs = w.s.NowNs()
		case resp == nil: // acks=0: sent, never answered
			op.ReturnNs = w.s.NowNs()
		default:
			op.ReturnNs = w.s.NowNs()
			r := resp.(*kmsg.ProduceResponse)
			base := int64(-1)
			code = kerr.UnknownServerError.Code
			if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
				code, base = r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[0].BaseOffset
			}
			if code == 0 {
				op.Acked, op.BaseOffset = true, base
			} else {
				retriable = kerr.IsRetriable(kerr.ErrorForCode(code)) || code == kerr.KafkaStorageError.Code
			}
		}
		if w.churnTopic[tp.Topic] {
			w.churnProduces = append(w.churnProduces, ChurnProduce{Produce: op, Leader: leader})
		} else {
			w.history.Produces = append(w.history.Produces, op)
		}
		done(op, code, retriable)
	})
}
