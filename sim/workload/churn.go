package workload

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// Topic churn: the admin client deletes and re-creates the churn topics,
// and adds partitions to them, while plain producers write to them. No
// consumer reads them. A produce names its topic, not its incarnation, so
// the workload cannot tell a write to a deleted topic from one to its
// successor; the harness, which sees which incarnation the broker
// answered for, checks the acknowledged ones per incarnation
// (sim/cluster/churn.go). The workload checks the admin history itself
// (models.CheckTopicChurn).
const (
	// churnIntervalNsMin and churnIntervalNsMax bound the pause between
	// two admin operations.
	churnIntervalNsMin = 500e6
	churnIntervalNsMax = 2e9
	// ChurnPartitionsMax bounds what CreatePartitions grows a churn topic
	// to.
	ChurnPartitionsMax = 4
	// churnCreatePartitionsPerMille is the chance that a churn step on an
	// existing topic adds a partition instead of deleting it.
	churnCreatePartitionsPerMille = 300
)

// churnTopicNames are the churn topics' names: c0, c1, …
func (c Config) churnTopicNames() []string {
	var out []string
	for i := 0; i < c.ChurnTopics; i++ {
		out = append(out, fmt.Sprintf("c%d", i))
	}
	return out
}

// allTopics lists the topics clients ask Metadata about: the workload's,
// then the churn topics.
func (c Config) allTopics() []string {
	return append(append([]string(nil), c.Topics...), c.churnTopicNames()...)
}

// churnState is what the admin client believes of one churn topic.
type churnState struct {
	name       string
	exists     bool
	partitions int32
}

// startChurn begins the admin client's churn loop.
func (w *Workload) startChurn() {
	for _, name := range w.cfg.churnTopicNames() {
		w.churn = append(w.churn, &churnState{name: name, exists: true, partitions: w.cfg.Partitions})
	}
	if len(w.churn) > 0 {
		w.scheduleChurn()
	}
}

func (w *Workload) scheduleChurn() {
	delayNs := churnIntervalNsMin + w.r.Int64N(churnIntervalNsMax-churnIntervalNsMin)
	w.admin.proc.After(delayNs, w.churnStep)
}

// churnProducePerMille is the share of a plain producer's batches sent to
// the churn topics when there are any.
const churnProducePerMille = 200

// churnStep runs one admin operation on a random churn topic, then
// schedules the next once it is answered: re-create a deleted topic,
// otherwise delete it or add a partition.
func (w *Workload) churnStep() {
	if w.stopped {
		return
	}
	t := w.churn[w.r.IntN(len(w.churn))]
	var req kmsg.Request
	op := models.AdminOp{Client: w.admin.index, Topic: t.name, CallNs: w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
	switch {
	case !t.exists:
		r := kmsg.NewPtrCreateTopicsRequest()
		r.SetVersion(7)
		r.TimeoutMillis = 5000
		r.Topics = append(r.Topics, w.cfg.newTopic(t.name, w.cfg.Partitions))
		req, op.Kind, op.Partitions = r, models.AdminCreateTopic, w.cfg.Partitions
	case t.partitions < ChurnPartitionsMax && w.r.IntN(1000) < churnCreatePartitionsPerMille:
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.SetVersion(3)
		r.TimeoutMillis = 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = t.name, t.partitions+1
		r.Topics = append(r.Topics, rt)
		req, op.Kind, op.Partitions = r, models.AdminCreatePartitions, t.partitions+1
	default:
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.SetVersion(6)
		r.TimeoutMillis = 5000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		name := t.name
		rt.Topic = &name
		r.Topics = append(r.Topics, rt)
		req, op.Kind = r, models.AdminDeleteTopic
	}
	i := len(w.adminOps)
	w.adminOps = append(w.adminOps, op)
	w.admin.send(w.admin.randomBroker(), req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		op := &w.adminOps[i]
		if err == errTimedOut {
			// Unknown outcome: the return time stays infinite.
		} else if err != nil {
			op.ReturnNs, op.Error = w.s.NowNs(), err.Error()
		} else {
			op.ReturnNs = w.s.NowNs()
			switch r := resp.(type) {
			case *kmsg.CreateTopicsResponse:
				if len(r.Topics) == 1 {
					op.ErrorCode, op.TopicID = r.Topics[0].ErrorCode, r.Topics[0].TopicID
				}
			case *kmsg.CreatePartitionsResponse:
				if len(r.Topics) == 1 {
					op.ErrorCode = r.Topics[0].ErrorCode
				}
			case *kmsg.DeleteTopicsResponse:
				if len(r.Topics) == 1 {
					op.ErrorCode = r.Topics[0].ErrorCode
				}
			}
		}
		t.learn(*op)
		w.scheduleChurn()
	})
}

// learn updates what the admin client believes of t from an answer: only
// definite answers teach anything.
func (t *churnState) learn(op models.AdminOp) {
	switch {
	case op.ReturnNs == models.NeverReturnedNs || op.Error != "":
	case op.Kind == models.AdminCreateTopic && (op.ErrorCode == 0 || op.ErrorCode == kerr.TopicAlreadyExists.Code):
		if op.ErrorCode == 0 {
			t.partitions = op.Partitions
		}
		t.exists = true
	case op.Kind == models.AdminDeleteTopic && (op.ErrorCode == 0 || op.ErrorCode == kerr.UnknownTopicOrPartition.Code):
		t.exists = false
	case op.Kind == models.AdminCreatePartitions && op.ErrorCode == 0:
		t.partitions = op.Partitions
	case op.Kind == models.AdminCreatePartitions && op.ErrorCode == kerr.UnknownTopicOrPartition.Code:
		t.exists = false
	}
}

// produceChurn sends one batch of values to a random partition of a random
// churn topic that the client's metadata knows, once, without retries, and
// records it apart from the checked history. It reports false when no
// churn partition is known (and asks for fresh metadata).
func (p *producer) produceChurn(values []string) bool {
	names := p.w.cfg.churnTopicNames()
	name := names[p.w.r.IntN(len(names))]
	var known []models.TopicPartition
	for part := int32(0); part < ChurnPartitionsMax; part++ {
		tp := models.TopicPartition{Topic: name, Partition: part}
		if _, ok := p.client.leaders[tp]; ok {
			known = append(known, tp)
		}
	}
	if len(known) == 0 {
		p.client.refreshMetadata(func() {})
		return false
	}
	tp := known[p.w.r.IntN(len(known))]
	li := p.client.leaders[tp]
	p.w.produce(p.client, p.acks, tp, li.leader, values, nil, func(op models.Produce, _ int16, _ bool) {
		p.inFlight--
		if !op.Acked {
			p.client.forgetLeader(tp)
		}
	})
	return true
}
