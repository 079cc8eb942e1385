package cluster

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
	"strand/models"
	"strand/sim/workload"
)

// Records on the churned topics are checked per incarnation. A Produce
// (v9) names a topic, not an incarnation, so the client cannot tell which
// incarnation took its write; the harness sees the broker's answer as it
// is given (alterRecorder.Reply) and notes the topic id the broker held
// the partition under then: a partition the broker deleted before the
// write was acknowledged gives no acknowledgement. The answer is tied to
// its request by connection and correlation id (churnHandler notes each
// churn produce's first record value, unique to the batch), and a produce
// to the answer with its value, broker, partition and base offset within
// its call and return: an earlier attempt's answer may arrive with a
// later one's, over a clogged link, both at base offset 0 of different
// incarnations. Each acknowledged produce is then
// checked as the other topics' records are: per incarnation,
// acknowledged writes never share an offset (linearizability), and in
// the incarnation that exists at the end every acks=all record
// acknowledged is at its offset in the leader's log (acked-present), a
// loss the fault budget may excuse (the churn partitions are budgeted);
// in an incarnation deleted since, every such record was held at its
// offset by some replica until the deletion (checkChurnDeleted).

// churnRequestKey names a request a broker received.
type churnRequestKey struct {
	node        int32
	conn        env.ConnID
	correlation int32
}

// churnHandler notes, for each produce on a churn topic a broker receives,
// the first record value of each partition's batch, then hands the request
// to the broker.
type churnHandler struct {
	env.Handler
	c    *Cluster
	node int32
}

func (h churnHandler) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if pr, ok := req.(*kmsg.ProduceRequest); ok {
		h.c.noteChurnProduce(churnRequestKey{node: h.node, conn: conn, correlation: hdr.CorrelationID}, pr)
	}
	h.Handler.HandleRequest(conn, hdr, req)
}

func (c *Cluster) noteChurnProduce(key churnRequestKey, pr *kmsg.ProduceRequest) {
	var firsts map[models.TopicPartition]string
	for _, t := range pr.Topics {
		if !c.churnTopics[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			var rb kmsg.RecordBatch
			if rb.ReadFrom(p.Records) != nil {
				continue
			}
			records, err := workload.DecodeBatchRecords(rb)
			if err != nil || len(records) == 0 {
				continue
			}
			if firsts == nil {
				firsts = map[models.TopicPartition]string{}
			}
			firsts[models.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = records[0].Value
		}
	}
	if firsts != nil {
		c.churnRequests[key] = firsts
	}
}

// churnTopicName is the workload's i-th churned topic.
func churnTopicName(i int) string { return fmt.Sprintf("c%d", i) }

// churnAck is a broker's successful answer to a produce on a churn topic.
type churnAck struct {
	node       int32
	tp         models.TopicPartition
	first      string // the batch's first record value
	baseOffset int64
	topicID    metadata.TopicID
	atNs       int64
}

// Reply notes the successful produce answers on churn topics, then
// forwards every reply.
func (a alterRecorder) Reply(conn env.ConnID, correlationID int32, resp kmsg.Response) {
	if r, ok := resp.(*kmsg.ProduceResponse); ok && len(a.c.churnTopics) > 0 {
		key := churnRequestKey{node: a.node, conn: conn, correlation: correlationID}
		if firsts, ok := a.c.churnRequests[key]; ok {
			delete(a.c.churnRequests, key)
			a.c.noteChurnAcks(a.node, firsts, r)
		}
	}
	a.Network.Reply(conn, correlationID, resp)
}

func (c *Cluster) noteChurnAcks(node int32, firsts map[models.TopicPartition]string, r *kmsg.ProduceResponse) {
	n := c.Nodes[node-1]
	if n.Core == nil {
		return
	}
	for _, t := range r.Topics {
		topic, ok := n.Core.Image().TopicByName(t.Topic)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			tp := models.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if first, noted := firsts[tp]; noted && p.ErrorCode == 0 {
				c.churnAcks = append(c.churnAcks, churnAck{node: node, tp: tp, first: first,
					baseOffset: p.BaseOffset, topicID: topic.ID, atNs: c.S.NowNs()})
			}
		}
	}
}

// churnIncarnation is the incarnation p, answered by leader, was
// acknowledged in: that of the answer to p itself (its first value, its
// broker, partition and base offset, within its call and return).
func (c *Cluster) churnIncarnation(p models.Produce, leader int32) (metadata.TopicID, bool) {
	for i := len(c.churnAcks) - 1; i >= 0; i-- {
		a := c.churnAcks[i]
		if a.atNs >= p.CallNs && a.atNs <= p.ReturnNs && a.node == leader && a.tp == p.TP &&
			a.baseOffset == p.BaseOffset && len(p.Values) > 0 && a.first == p.Values[0] {
			return a.topicID, true
		}
	}
	return metadata.TopicID{}, false
}

// incarnationTP names tp's partition in incarnation id for the register
// checker: the topic's own name for the final incarnation, the name and
// its id for one deleted since.
func incarnationTP(tp models.TopicPartition, id, final metadata.TopicID) models.TopicPartition {
	if id == final {
		return tp
	}
	return models.TopicPartition{Topic: fmt.Sprintf("%s@%x", tp.Topic, id[:]), Partition: tp.Partition}
}

// checkChurn checks the acknowledged records of the churn topics, as the
// comment at the top says. Violations name the partition by its topic's
// name (the budget is kept by name), the incarnation in the detail.
func (r *run) checkChurn() []models.Violation {
	var finalIDs map[string]metadata.TopicID
	var im *metadata.Image
	if a := r.c.ActiveController(); a != nil {
		im = a.Core.Image()
		finalIDs = map[string]metadata.TopicID{}
		for name := range r.c.churnTopics { // order-independent: fills a map
			if t, ok := im.TopicByName(name); ok {
				finalIDs[name] = t.ID
			}
		}
	}
	h, names := r.c.churnHistory(r.w.ChurnProduces(), finalIDs)
	r.churnChecked = len(h.Produces)
	vs, _ := models.CheckRegisters(h, models.RegisterOptions{})
	if r.final != nil && im != nil {
		vs = append(vs, r.checkChurnFinal(h, im)...)
		vs = append(vs, r.checkChurnDeleted(h, names)...)
	}
	for i := range vs {
		if name, ok := names[vs[i].TP]; ok && name != vs[i].TP {
			vs[i].Detail = fmt.Sprintf("incarnation %s: %s", vs[i].TP.Topic, vs[i].Detail)
			vs[i].TP = name
		}
	}
	return vs
}

// churnHistory is the acknowledged churn produces attributed to their
// incarnations, each named by incarnationTP, and the topic partition each
// name stands for.
func (c *Cluster) churnHistory(cps []workload.ChurnProduce, finalIDs map[string]metadata.TopicID) (models.History, map[models.TopicPartition]models.TopicPartition) {
	var h models.History
	names := map[models.TopicPartition]models.TopicPartition{}
	for _, cp := range cps {
		if !cp.Acked {
			continue
		}
		id, ok := c.churnIncarnation(cp.Produce, cp.Leader)
		if !ok {
			continue
		}
		p := cp.Produce
		p.TP = incarnationTP(p.TP, id, finalIDs[p.TP.Topic]) // a zero id (deleted at the end) matches none
		names[p.TP] = cp.TP
		h.Produces = append(h.Produces, p)
	}
	return h, names
}

// checkChurnDeleted checks that every acks=all record acknowledged in an
// incarnation deleted since was held at its offset by some replica until
// the deletion: the harness keeps what each broker's replica held in the
// files it deleted (Cluster.keepRemoved; values are unique, so a value
// held at its offset was held in the incarnation it was written to). Run
// once the cluster converged: every broker then has applied the
// deletions and removed those logs.
func (r *run) checkChurnDeleted(h models.History, names map[models.TopicPartition]models.TopicPartition) []models.Violation {
	var vs []models.Violation
	for _, p := range h.Produces {
		name := names[p.TP]
		if r.c.churnTopics[p.TP.Topic] || p.Acks != -1 || !p.Acked {
			continue // the final incarnation's (checkChurnFinal)
		}
		held := r.c.held[name]
		for j, v := range p.Values {
			if o := p.BaseOffset + int64(j); held == nil || !held.Held(o, v) {
				vs = append(vs, models.Violation{Check: "acked-present", TP: p.TP, Loss: true, Detail: fmt.Sprintf(
					"client %d's acks=all record %s acknowledged at offset %d (t=%dns) but no replica held it there until the topic was deleted",
					p.Client, v, o, p.ReturnNs)})
			}
		}
	}
	return vs
}

// watchChurn adds the churn topics' partitions to the ones whose deleted
// files keepRemoved keeps: a deleted incarnation's log is removed file by
// file (log.Manager.DeleteLog).
func (c *Cluster) watchChurn() {
	for name := range c.churnTopics { // order-independent: fills maps
		for p := int32(0); p < workload.ChurnPartitionsMax; p++ {
			tp := models.TopicPartition{Topic: name, Partition: p}
			c.watched[fmt.Sprintf("%s-%d", name, p)] = tp
			c.held[tp] = &models.HeldRecords{}
		}
	}
}

// checkChurnFinal checks that every acks=all record acknowledged in the
// final incarnation of a churn topic is at its offset in its partition
// leader's log.
func (r *run) checkChurnFinal(h models.History, im *metadata.Image) []models.Violation {
	logs := map[models.TopicPartition]map[int64]string{}
	var vs []models.Violation
	for _, p := range h.Produces {
		if !r.c.churnTopics[p.TP.Topic] || p.Acks != -1 || !p.Acked {
			continue // another incarnation's
		}
		values, ok := logs[p.TP]
		if !ok {
			var err error
			if values, err = r.leaderValues(im, p.TP); err != nil {
				vs = append(vs, models.Violation{Check: "churn", TP: p.TP, Detail: err.Error()})
			}
			logs[p.TP] = values
		}
		if values == nil {
			continue
		}
		for j, v := range p.Values {
			if o := p.BaseOffset + int64(j); values[o] != v {
				vs = append(vs, models.Violation{Check: "acked-present", TP: p.TP, Loss: true, Detail: fmt.Sprintf(
					"client %d's acks=all record %s acknowledged at offset %d (t=%dns) but the leader's log holds %q there",
					p.Client, v, o, p.ReturnNs, values[o])})
			}
		}
	}
	return vs
}

// leaderValues reads tp's leader's log, by offset, as the active
// controller's metadata names the leader; nil when it has none.
func (r *run) leaderValues(im *metadata.Image, tp models.TopicPartition) (map[int64]string, error) {
	st, ok := im.PartitionByName(tp.Topic, tp.Partition)
	if !ok || st.Leader < 0 || r.c.Nodes[st.Leader-1].absent || !r.c.Nodes[st.Leader-1].Proc.Up() {
		return nil, nil
	}
	rl, err := r.c.readReplica(st.Leader, tp)
	if err != nil {
		return nil, fmt.Errorf("replica %d: %w", st.Leader, err)
	}
	if err := decodeRecords(&rl, tp); err != nil {
		return nil, err
	}
	values := map[int64]string{}
	for _, b := range rl.Batches {
		for _, rec := range b.Records {
			values[rec.Offset] = rec.Value
		}
	}
	return values, nil
}
