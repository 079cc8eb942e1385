package broker

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/sim/simnet"
)

// at is one partition of a fetch, the offset to fetch from and its
// PartitionMaxBytes (0: 1 MiB).
type at struct {
	partition int32
	offset    int64
	maxBytes  int32
}

// sessionFetchReq builds a consumer Fetch of version for session id at
// epoch, naming parts of topic (by id from v13) and forgetting forget.
func sessionFetchReq(version int16, id, epoch, maxWaitMs int32, topic string, topicID [16]byte, parts []at, forget []int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMs, 1, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(parts) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, topicID
		for _, p := range parts {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
			if p.maxBytes == 0 {
				fp.PartitionMaxBytes = 1 << 20
			}
			t.Partitions = append(t.Partitions, fp)
		}
		req.Topics = append(req.Topics, t)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = topic, topicID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answeredPartitions lists the partitions of resp, in order, with their
// answers (a topic may appear more than once).
func answeredPartitions(resp *kmsg.FetchResponse) ([]int32, map[int32]kmsg.FetchResponseTopicPartition) {
	var order []int32
	byPartition := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			order = append(order, p.Partition)
			byPartition[p.Partition] = p
		}
	}
	return order, byPartition
}

func (c *cluster) fetchSession(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	c.t.Helper()
	return c.request(1, req).(*kmsg.FetchResponse)
}

// TestFetchSessionLifecycle walks one consumer session: a full fetch with
// epoch 0 creates it and answers every partition; incremental fetches
// answer only partitions with new records or offsets; forgotten partitions
// are no longer answered; a replayed epoch, an unknown id, another client,
// a topic-id request on a by-name session are refused with their session
// errors; a final-epoch full fetch closes the session.
func TestFetchSessionLifecycle(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 3, 1)
	c.produce(1, "t", 0, 1, recordBatch("a"))
	c.produce(1, "t", 1, 1, recordBatch("a"))

	full := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}, {2, 0, 0}}, nil))
	id := full.SessionID
	if full.ErrorCode != 0 || id <= 0 {
		t.Fatalf("full fetch: error %d, session id %d; want a new session", full.ErrorCode, id)
	}
	if order, _ := answeredPartitions(full); !slices.Equal(order, []int32{0, 1, 2}) {
		t.Fatalf("full fetch answered partitions %v, want all three", order)
	}

	step := func(epoch int32, parts []at, forget []int32, wantOrder []int32) map[int32]kmsg.FetchResponseTopicPartition {
		t.Helper()
		resp := c.fetchSession(sessionFetchReq(12, id, epoch, 0, "t", [16]byte{}, parts, forget))
		if resp.ErrorCode != 0 || resp.SessionID != id {
			t.Fatalf("epoch %d: error %d, session %d; want session %d", epoch, resp.ErrorCode, resp.SessionID, id)
		}
		order, byPartition := answeredPartitions(resp)
		if !slices.Equal(order, wantOrder) {
			t.Fatalf("epoch %d answered partitions %v, want %v", epoch, order, wantOrder)
		}
		return byPartition
	}
	// The client moves past what it read: nothing new anywhere.
	step(1, []at{{0, 1, 0}, {1, 1, 0}}, nil, nil)
	// A record on partition 2 (still at offset 0 in the session).
	c.produce(1, "t", 2, 1, recordBatch("b"))
	got := step(2, nil, nil, []int32{2})
	if v := joined(values(t, got[2].RecordBatches)); v != "b" || got[2].HighWatermark != 1 {
		t.Fatalf("partition 2: %q at HW %d, want b at 1", v, got[2].HighWatermark)
	}
	step(3, []at{{2, 1, 0}}, nil, nil)
	// Forget partition 1: its new record is not answered; partition 0's is.
	c.produce(1, "t", 1, 1, recordBatch("c"))
	c.produce(1, "t", 0, 1, recordBatch("d"))
	got = step(4, nil, []int32{1}, []int32{0})
	if v := joined(values(t, got[0].RecordBatches)); v != "d" {
		t.Fatalf("partition 0: %q, want d", v)
	}

	refused := func(what string, client *simnet.ClientConn, req *kmsg.FetchRequest, code int16) {
		t.Helper()
		var resp *kmsg.FetchResponse
		if client == nil {
			resp = c.fetchSession(req)
		} else {
			done := false
			client.Send(req, func(r kmsg.Response, err error) {
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				resp, done = r.(*kmsg.FetchResponse), true
			})
			c.waitFor(what, 1000, func() bool { return done })
		}
		if resp.ErrorCode != code || len(resp.Topics) != 0 {
			t.Fatalf("%s: error %d with %d topics, want %s and none", what, resp.ErrorCode, len(resp.Topics), kerr.ErrorForCode(code))
		}
	}
	refused("replayed epoch", nil, sessionFetchReq(12, id, 4, 0, "t", [16]byte{}, nil, nil), kerr.InvalidFetchSessionEpoch.Code)
	refused("unknown id", nil, sessionFetchReq(12, id+1, 5, 0, "t", [16]byte{}, nil, nil), kerr.FetchSessionIDNotFound.Code)
	other, err := c.net.AddClient("other-client", c.s.NewNode(101)).Dial(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused("another client", other, sessionFetchReq(12, id, 5, 0, "t", [16]byte{}, nil, nil), kerr.FetchSessionIDNotFound.Code)
	topicID := c.topicID(1, "t")
	refused("topic ids on a by-name session", nil, sessionFetchReq(13, id, 5, 0, "", topicID, nil, nil), kerr.FetchSessionTopicIDError.Code)
	// None of the refusals moved the epoch; the session still works.
	step(5, []at{{0, 2, 0}}, nil, nil)

	// A final-epoch full fetch closes it and creates none.
	closing := c.fetchSession(sessionFetchReq(12, id, -1, 0, "t", [16]byte{}, []at{{0, 2, 0}}, nil))
	if closing.ErrorCode != 0 || closing.SessionID != 0 {
		t.Fatalf("final fetch: error %d, session %d; want 0, 0", closing.ErrorCode, closing.SessionID)
	}
	refused("closed session", nil, sessionFetchReq(12, id, 6, 0, "t", [16]byte{}, nil, nil), kerr.FetchSessionIDNotFound.Code)
}

// topicID is the id node has applied for topic.
func (c *cluster) topicID(node int32, topic string) [16]byte {
	c.t.Helper()
	tp, ok := c.nodes[node].node.meta.image.TopicByName(topic)
	if !ok {
		c.t.Fatalf("node %d has no topic %s", node, topic)
	}
	return tp.ID
}

// TestFetchSessionLongPoll: an incremental fetch with nothing new waits
// MaxWaitMillis and answers no partitions; one that waits is woken by a
// produce to any of the session's partitions, including one it did not
// name, and answers just that partition.
func TestFetchSessionLongPoll(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 2, 1)
	full := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}}, nil))
	id := full.SessionID
	if id <= 0 {
		t.Fatalf("no session: %d", id)
	}
	start := c.s.NowNs()
	resp := c.fetchSession(sessionFetchReq(12, id, 1, 300, "t", [16]byte{}, nil, nil))
	if waited := (c.s.NowNs() - start) / 1e6; waited < 300 || waited > 350 {
		t.Fatalf("empty incremental long poll answered after %d ms, want about 300", waited)
	}
	if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
		t.Fatalf("empty incremental long poll: error %d, session %d, %d topics", resp.ErrorCode, resp.SessionID, len(resp.Topics))
	}

	start = c.s.NowNs()
	wait := c.send(1, sessionFetchReq(12, id, 2, 5000, "t", [16]byte{}, nil, nil))
	c.run(50)
	c.produce(1, "t", 1, 1, recordBatch("late"))
	r, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited > 1000 {
		t.Fatalf("incremental long poll woke after %d ms", waited)
	}
	order, got := answeredPartitions(r.(*kmsg.FetchResponse))
	if !slices.Equal(order, []int32{1}) || joined(values(t, got[1].RecordBatches)) != "late" {
		t.Fatalf("woken incremental fetch answered %v (%q), want partition 1 with late", order, joined(values(t, got[1].RecordBatches)))
	}
	// A duplicate of a parked fetch (same epoch, same client, another
	// connection: answers on one connection keep request order) is refused
	// at once.
	start = c.s.NowNs()
	wait = c.send(1, sessionFetchReq(12, id, 3, 5000, "t", [16]byte{}, []at{{1, 1, 0}}, nil))
	c.run(50)
	second, err := c.client.Dial(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dup *kmsg.FetchResponse
	second.Send(sessionFetchReq(12, id, 3, 0, "t", [16]byte{}, nil, nil), func(r kmsg.Response, _ error) { dup, _ = r.(*kmsg.FetchResponse) })
	c.waitFor("duplicate answered", 1000, func() bool { return dup != nil })
	if dup.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("duplicate epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", dup.ErrorCode)
	}
	c.produce(1, "t", 0, 1, recordBatch("x"))
	if r, err = wait(); err != nil {
		t.Fatal(err)
	}
	if order, _ := answeredPartitions(r.(*kmsg.FetchResponse)); !slices.Equal(order, []int32{0}) {
		t.Fatalf("parked incremental fetch answered %v, want partition 0", order)
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited > 1000 {
		t.Fatalf("parked incremental fetch woke after %d ms", waited)
	}
}

// TestFetchSessionCacheSlots: with max.incremental.fetch.session.cache.slots
// 0 a full fetch gets no session (id 0) and its answer is whole; with 1, a
// second consumer's session does not evict a fresh one.
func TestFetchSessionCacheSlots(t *testing.T) {
	for _, slots := range []int{0, 1} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			c := newCluster(t, 1, map[string]string{"max.incremental.fetch.session.cache.slots": fmt.Sprint(slots)})
			c.waitRegistered()
			c.createTopic(1, "t", 1, 1)
			c.produce(1, "t", 0, 1, recordBatch("a"))
			first := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}}, nil))
			if got := joined(values(t, first.Topics[0].Partitions[0].RecordBatches)); got != "a" {
				t.Fatalf("full fetch read %q", got)
			}
			if (first.SessionID != 0) != (slots > 0) {
				t.Fatalf("%d slots: session id %d", slots, first.SessionID)
			}
			second := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}}, nil))
			if second.SessionID != 0 {
				t.Fatalf("%d slots: a second session %d was made room for", slots, second.SessionID)
			}
		})
	}
}

// TestFetchSessionEviction drives the cache alone: it holds slotsMax
// sessions; a consumer's session evicts only one unused for evictionMs, or,
// once the others are older than evictionMs, a smaller one; a follower's
// evicts a consumer's at once but not a fresh follower's.
func TestFetchSessionEviction(t *testing.T) {
	const evictionMs = 1000
	parts := func(n int) []*sessionPartition {
		var out []*sessionPartition
		for i := range n {
			out = append(out, &sessionPartition{key: fetchSessionKey{topic: "t", partition: int32(i)}})
		}
		return out
	}
	consumer := fetchSessionOwner{replicaID: -1, clientID: "c"}
	follower := fetchSessionOwner{replicaID: 2}
	c := newFetchSessionCache(2, 1000, evictionMs, 7)
	a := c.create(0, consumer, false, parts(3))
	b := c.create(10, consumer, false, parts(2))
	if a == nil || b == nil || a.id == b.id || a.id <= 0 || b.id <= 0 || a.epoch != 1 {
		t.Fatalf("sessions %+v %+v: want two distinct positive ids at epoch 1", a, b)
	}
	if s := c.create(500, consumer, false, parts(10)); s != nil {
		t.Fatal("a consumer session evicted a fresh one")
	}
	c.touch(a, 900)
	// b is unused for more than evictionMs: stale, evicted whatever the size.
	s := c.create(1011, consumer, false, parts(1))
	if s == nil || c.get(b.id) != nil || c.get(a.id) == nil || c.stats.Evicted != 1 {
		t.Fatalf("stale session not evicted: new %v, b kept %v, a kept %v, evictions %d", s != nil, c.get(b.id) != nil, c.get(a.id) != nil, c.stats.Evicted)
	}
	// Both older than evictionMs, neither stale (a used at 1500, s at
	// 1600): a bigger consumer session evicts the smaller one (s), a
	// smaller one nothing.
	c.touch(a, 1500)
	c.touch(s, 2050)
	if c.create(2100, consumer, false, parts(1)) != nil {
		t.Fatal("a one-partition session evicted one as large")
	}
	big := c.create(2100, consumer, false, parts(2))
	if big == nil || c.get(s.id) != nil || c.get(a.id) == nil {
		t.Fatalf("a larger session did not evict the smallest old one")
	}
	// A follower's session evicts a consumer's at once, however fresh.
	f := c.create(2110, follower, false, parts(1))
	if f == nil || !f.privileged || c.get(big.id) != nil {
		t.Fatalf("a follower session did not evict the fresh consumer session")
	}
	// Now a (old consumer, 3 partitions) and f (fresh follower): a second
	// follower evicts a, a third nothing (f and the second are fresh).
	if f2 := c.create(2120, follower, false, parts(1)); f2 == nil || c.get(a.id) != nil {
		t.Fatal("a follower session did not evict the consumer session")
	}
	if c.create(2130, follower, false, parts(50)) != nil {
		t.Fatal("a follower session evicted a fresh follower session")
	}
	if len(c.sessions) != 2 {
		t.Fatalf("%d sessions cached, slots are 2", len(c.sessions))
	}
}

// TestFetchByTopicID: Fetch v13..v16 names topics by id: a known id reads
// the topic's records and answers under the same id, an unknown id gets
// UNKNOWN_TOPIC_ID; a v13 session forgets by id.
func TestFetchByTopicID(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 2, 1)
	c.produce(1, "t", 0, 1, recordBatch("a", "b"))
	id := c.topicID(1, "t")
	for v := int16(13); v <= 16; v++ {
		resp := c.fetchSession(sessionFetchReq(v, 0, -1, 0, "", id, []at{{0, 0, 0}}, nil))
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != id {
			t.Fatalf("v%d: topics %+v, want one with the topic's id", v, resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		if got := joined(values(t, p.RecordBatches)); p.ErrorCode != 0 || got != "a,b" || p.HighWatermark != 2 {
			t.Fatalf("v%d: error %d, %q at HW %d; want a,b at 2", v, p.ErrorCode, got, p.HighWatermark)
		}
		unknown := [16]byte{1, 2, 3}
		resp = c.fetchSession(sessionFetchReq(v, 0, -1, 0, "", unknown, []at{{0, 0, 0}}, nil))
		if p := resp.Topics[0].Partitions[0]; resp.Topics[0].TopicID != unknown || p.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("v%d unknown id: error %d, want UNKNOWN_TOPIC_ID", v, p.ErrorCode)
		}
	}
	full := c.fetchSession(sessionFetchReq(16, 0, 0, 0, "", id, []at{{0, 2, 0}, {1, 0, 0}}, nil))
	if full.SessionID <= 0 {
		t.Fatalf("v16 full fetch: no session")
	}
	c.produce(1, "t", 1, 1, recordBatch("c"))
	c.produce(1, "t", 0, 1, recordBatch("d"))
	resp := c.fetchSession(sessionFetchReq(16, full.SessionID, 1, 0, "", id, nil, []int32{1}))
	if order, got := answeredPartitions(resp); !slices.Equal(order, []int32{0}) || resp.Topics[0].TopicID != id || joined(values(t, got[0].RecordBatches)) != "d" {
		t.Fatalf("v16 incremental after forgetting 1 by id: partitions %v", order)
	}
	refused := c.fetchSession(sessionFetchReq(12, full.SessionID, 2, 0, "t", [16]byte{}, nil, nil))
	if refused.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("a by-name fetch of a by-id session: error %d, want FETCH_SESSION_TOPIC_ID_ERROR", refused.ErrorCode)
	}
}

// TestIncrementalFetchMatchesFull: for random produces, deletions of
// records and fetches, a client that keeps a session and merges its
// incremental answers (a partition left out keeps what it was last told)
// sees, for every partition, exactly what a sessionless full fetch at the
// same offsets, in the session's order, answers: records, HW, LSO, log
// start offset, error. With a PartitionMaxBytes of 1 only the first
// partition with records gets any (KIP-74), so new records elsewhere show
// as a moved HW alone.
func TestIncrementalFetchMatchesFull(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	const partitions = 4
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		topic := fmt.Sprintf("t%d", round)
		c.createTopic(1, topic, partitions, 1)
		// Each check's topic goes when it ends: kept, thousands of checks
		// grow the metadata every step copies.
		defer c.deleteTopic(1, topic)
		version := rapid.SampledFrom([]int16{12, 16}).Draw(rt, "version")
		var topicID [16]byte
		name := topic
		if version >= 13 {
			topicID, name = c.topicID(1, topic), ""
		}
		var id int32
		offsets := make([]int64, partitions)
		maxBytes := rapid.SampledFrom([]int32{1, 1 << 20}).Draw(rt, "partition max bytes")
		all := func() []at {
			var out []at
			for p := range partitions {
				out = append(out, at{int32(p), offsets[p], maxBytes})
			}
			return out
		}
		// inSessionOrder is all() in the order the session reads them.
		inSessionOrder := func() []at {
			var out []at
			for _, sp := range c.nodes[1].node.parts.fetchSessions.get(id).partitions {
				out = append(out, at{sp.key.partition, offsets[sp.key.partition], maxBytes})
			}
			return out
		}
		full := c.fetchSession(sessionFetchReq(version, 0, 0, 0, name, topicID, all(), nil))
		id = full.SessionID
		if id <= 0 {
			rt.Fatalf("no session")
		}
		// Close the session as a client leaving does: every check (and
		// every shrinking step) shares the cluster, whose cache holds
		// max.incremental.fetch.session.cache.slots (1000) sessions none
		// of which may be evicted before fetchSessionEvictionMs.
		defer c.fetchSession(sessionFetchReq(version, id, fetchSessionFinalEpoch, 0, name, topicID, nil, nil))
		_, seen := answeredPartitions(full)
		sent := slices.Clone(offsets) // the offsets the session holds
		epoch := int32(1)
		for step := range rapid.IntRange(1, 25).Draw(rt, "steps") {
			for range rapid.IntRange(0, 3).Draw(rt, "ops") {
				switch rapid.IntRange(0, 3).Draw(rt, "op") {
				case 0, 1, 2:
					p := int32(rapid.IntRange(0, partitions-1).Draw(rt, "produce partition"))
					c.produce(1, topic, p, 1, recordBatch(fmt.Sprint(step)))
				default:
					p := rapid.IntRange(0, partitions-1).Draw(rt, "delete partition")
					c.deleteRecordsBefore(topic, int32(p), rapid.Int64Range(0, 3).Draw(rt, "delete before"))
				}
			}
			// The client moves past what it read (or, out of range, to
			// the log start), then fetches both ways.
			for p := range partitions {
				switch last := seen[int32(p)]; {
				case last.ErrorCode == kerr.OffsetOutOfRange.Code:
					offsets[p] = max(last.LogStartOffset, 0)
				case len(last.RecordBatches) > 0:
					offsets[p] = nextOffset(t, last.RecordBatches)
				}
			}
			var changed []at
			for p := range partitions {
				if offsets[p] != sent[p] {
					changed = append(changed, at{int32(p), offsets[p], maxBytes})
					sent[p] = offsets[p]
				}
			}
			order := inSessionOrder()
			incr := c.fetchSession(sessionFetchReq(version, id, epoch, 0, name, topicID, changed, nil))
			epoch++
			if incr.ErrorCode != 0 || incr.SessionID != id {
				rt.Fatalf("step %d: incremental error %d session %d", step, incr.ErrorCode, incr.SessionID)
			}
			_, answered := answeredPartitions(incr)
			for p, a := range answered { // order-independent: merged by key
				seen[p] = a
			}
			for p := range seen { // order-independent: records only count once
				if _, ok := answered[p]; !ok {
					q := seen[p]
					q.RecordBatches = []byte{}
					seen[p] = q
				}
			}
			for i := range order {
				order[i].offset = offsets[order[i].partition]
			}
			want := c.fetchSession(sessionFetchReq(version, 0, -1, 0, name, topicID, order, nil))
			_, wantParts := answeredPartitions(want)
			for p := range int32(partitions) {
				g, w := seen[p], wantParts[p]
				if g.ErrorCode != w.ErrorCode || g.HighWatermark != w.HighWatermark || g.LastStableOffset != w.LastStableOffset ||
					g.LogStartOffset != w.LogStartOffset || joined(values(t, g.RecordBatches)) != joined(values(t, w.RecordBatches)) {
					rt.Fatalf("step %d partition %d at %d: session view (error %d, HW %d, LSO %d, start %d, %q), full fetch (error %d, HW %d, LSO %d, start %d, %q)",
						step, p, offsets[p], g.ErrorCode, g.HighWatermark, g.LastStableOffset, g.LogStartOffset, joined(values(t, g.RecordBatches)),
						w.ErrorCode, w.HighWatermark, w.LastStableOffset, w.LogStartOffset, joined(values(t, w.RecordBatches)))
				}
			}
		}
	})
}

// deleteRecordsBefore moves the log start offset of topic's partition up to
// before (or the HW, if lower) with DeleteRecords.
func (c *cluster) deleteRecordsBefore(topic string, partition int32, before int64) {
	c.t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(2)
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, -1 // -1: up to the HW
	hw := c.fetch(1, topic, partition, 0).HighWatermark
	if before < hw {
		rp.Offset = before
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.request(1, req).(*kmsg.DeleteRecordsResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		c.t.Fatalf("delete records of %s-%d before %d: error %d", topic, partition, before, code)
	}
}

// nextOffset is the offset after the last record of batches.
func nextOffset(t *testing.T, batches []byte) int64 {
	t.Helper()
	next := int64(-1)
	for len(batches) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		batches = batches[12+int(b.Length):]
	}
	return next
}

// TestFetchV15ReplicaState: from v15 the replica id travels in
// ReplicaState; a fetch naming replica 7 (not assigned) is refused
// NOT_LEADER_OR_FOLLOWER as a follower's fetch, in v12 (ReplicaID) and v15
// alike, while the same fetch as a consumer reads the records.
func TestFetchV15ReplicaState(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a"))
	id := c.topicID(1, "t")
	for _, tc := range []struct {
		version int16
		replica int32
		code    int16
	}{
		{12, 7, kerr.NotLeaderForPartition.Code}, {15, 7, kerr.NotLeaderForPartition.Code},
		{12, -1, 0}, {15, -1, 0},
	} {
		req := sessionFetchReq(tc.version, 0, -1, 0, "t", id, []at{{0, 0, 0}}, nil)
		if tc.version >= 15 {
			req.ReplicaState.ID, req.ReplicaState.Epoch = tc.replica, 1
		} else {
			req.ReplicaID = tc.replica
		}
		p := c.fetchSession(req).Topics[0].Partitions[0]
		if p.ErrorCode != tc.code {
			t.Fatalf("v%d replica %d: error %d, want %d", tc.version, tc.replica, p.ErrorCode, tc.code)
		}
		if got := joined(values(t, p.RecordBatches)); tc.code == 0 && got != "a" {
			t.Fatalf("v%d consumer read %q", tc.version, got)
		}
	}
}

// TestIncrementalFetchRotatesPartitionsWithRecords: when MaxBytes lets only
// one partition's batch through and every partition's HW moves on each
// fetch (a busy topic), an incremental fetch still serves each partition
// in turn. Kafka's IncrementalFetchContext moves to the end of the session
// only the partitions that got records; moving every answered partition
// (HW changes included) kept the session's order unchanged, so partition 0
// got the records of every fetch and the others starved.
func TestIncrementalFetchRotatesPartitionsWithRecords(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 3, 1)
	for p := range int32(3) {
		for range 4 {
			c.produce(1, "t", p, 1, recordBatch("backlog"))
		}
	}
	tiny := func(req *kmsg.FetchRequest) *kmsg.FetchRequest {
		req.MaxBytes = 1 // one batch, the first partition's (KIP-74)
		return req
	}
	offsets := []int64{0, 0, 0}
	full := c.fetchSession(tiny(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}, {2, 0, 0}}, nil)))
	id := full.SessionID
	if full.ErrorCode != 0 || id <= 0 {
		t.Fatalf("full fetch: error %d, session %d", full.ErrorCode, id)
	}
	var moved []at
	served := map[int32]int{}
	note := func(resp *kmsg.FetchResponse) {
		moved = moved[:0]
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if len(p.RecordBatches) > 0 {
					offsets[p.Partition] = nextOffset(t, p.RecordBatches)
					moved = append(moved, at{p.Partition, offsets[p.Partition], 0})
					served[p.Partition]++
				}
			}
		}
	}
	note(full)
	for epoch := int32(1); epoch <= 3; epoch++ {
		for p := range int32(3) {
			c.produce(1, "t", p, 1, recordBatch("more")) // every HW moves
		}
		resp := c.fetchSession(tiny(sessionFetchReq(12, id, epoch, 0, "t", [16]byte{}, moved, nil)))
		if resp.ErrorCode != 0 || resp.SessionID != id {
			t.Fatalf("epoch %d: error %d, session %d", epoch, resp.ErrorCode, resp.SessionID)
		}
		note(resp)
	}
	for p := range int32(3) {
		if served[p] == 0 {
			t.Fatalf("partition %d got no records in a full and three incremental fetches (served %v); the session never rotated", p, served)
		}
	}
}

// TestFetchSessionEpochsAndTopicRecreation checks Kafka's FetchManager
// rules on epochs (a skipped epoch is INVALID_FETCH_SESSION_EPOCH with no
// partitions and session id 0; after int32 max comes 1; a full fetch
// naming a session closes it and opens a new one) and a topic deleted and
// re-created under open sessions: in a by-id session the old id's
// partition is answered UNKNOWN_TOPIC_ID on every fetch until forgotten
// and the new id reads the new log; in a by-name session the partition is
// answered (OFFSET_OUT_OF_RANGE: the client's offset is past the new,
// empty log), not left out as unchanged. (Once the new log reaches the old
// HW, a by-name session cannot tell the topics apart, in Kafka too.)
func TestFetchSessionEpochsAndTopicRecreation(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a"))
	oldID := c.topicID(1, "t")
	node := c.nodes[1].node

	byID := c.fetchSession(sessionFetchReq(16, 0, 0, 0, "", oldID, []at{{0, 1, 0}}, nil))
	byName := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 1, 0}}, nil))
	if byID.SessionID <= 0 || byName.SessionID <= 0 {
		t.Fatalf("sessions %d, %d", byID.SessionID, byName.SessionID)
	}
	skipped := c.fetchSession(sessionFetchReq(16, byID.SessionID, 2, 0, "", oldID, nil, nil))
	if skipped.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || skipped.SessionID != 0 || len(skipped.Topics) != 0 {
		t.Fatalf("skipped epoch: error %d, session %d, %d topics; want INVALID_FETCH_SESSION_EPOCH, 0, none", skipped.ErrorCode, skipped.SessionID, len(skipped.Topics))
	}
	node.parts.fetchSessions.get(byID.SessionID).epoch = math.MaxInt32
	if r := c.fetchSession(sessionFetchReq(16, byID.SessionID, math.MaxInt32, 0, "", oldID, nil, nil)); r.ErrorCode != 0 || r.SessionID != byID.SessionID {
		t.Fatalf("epoch int32 max: error %d, session %d", r.ErrorCode, r.SessionID)
	}
	if r := c.fetchSession(sessionFetchReq(16, byID.SessionID, 1, 0, "", oldID, nil, nil)); r.ErrorCode != 0 {
		t.Fatalf("the epoch after int32 max, 1: error %d", r.ErrorCode)
	}
	// A full fetch naming the session replaces it.
	renewed := c.fetchSession(sessionFetchReq(16, byID.SessionID, 0, 0, "", oldID, []at{{0, 1, 0}}, nil))
	if renewed.ErrorCode != 0 || renewed.SessionID <= 0 || renewed.SessionID == byID.SessionID {
		t.Fatalf("full fetch naming session %d: error %d, session %d; want a new one", byID.SessionID, renewed.ErrorCode, renewed.SessionID)
	}
	if r := c.fetchSession(sessionFetchReq(16, byID.SessionID, 2, 0, "", oldID, nil, nil)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the replaced session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}

	c.deleteTopic(1, "t")
	c.waitFor("topic deleted", 5000, func() bool { _, ok := node.meta.image.TopicByName("t"); return !ok })
	c.createTopic(1, "t", 1, 1)
	newID := c.topicID(1, "t")
	if newID == oldID {
		t.Fatal("the re-created topic kept its id")
	}
	r := c.fetchSession(sessionFetchReq(12, byName.SessionID, 1, 0, "t", [16]byte{}, nil, nil))
	if order, got := answeredPartitions(r); r.ErrorCode != 0 || !slices.Equal(order, []int32{0}) || got[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("by-name session after re-creation: error %d, partitions %v (%+v); want partition 0 with OFFSET_OUT_OF_RANGE", r.ErrorCode, order, got)
	}
	c.produce(1, "t", 0, 1, recordBatch("new"))

	for epoch := int32(1); epoch <= 2; epoch++ {
		r := c.fetchSession(sessionFetchReq(16, renewed.SessionID, epoch, 0, "", oldID, nil, nil))
		if len(r.Topics) != 1 || r.Topics[0].TopicID != oldID || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("epoch %d, the deleted id: topics %+v, want partition 0 with UNKNOWN_TOPIC_ID", epoch, r.Topics)
		}
	}
	swap := sessionFetchReq(16, renewed.SessionID, 3, 0, "", newID, []at{{0, 0, 0}}, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = oldID, []int32{0}
	swap.ForgottenTopics = append(swap.ForgottenTopics, ft)
	r = c.fetchSession(swap)
	if len(r.Topics) != 1 || r.Topics[0].TopicID != newID || joined(values(t, r.Topics[0].Partitions[0].RecordBatches)) != "new" {
		t.Fatalf("the new id after forgetting the old: topics %+v, want the new log's record", r.Topics)
	}

}

// TestNextFetchSessionEpoch: epochs count up and wrap to 1, never to 0 (a
// full fetch) or a negative (the final epoch), as Kafka's
// FetchMetadata.nextEpoch.
func TestNextFetchSessionEpoch(t *testing.T) {
	for _, c := range [][2]int32{{0, 1}, {1, 2}, {math.MaxInt32 - 1, math.MaxInt32}, {math.MaxInt32, 1}} {
		if got := nextFetchSessionEpoch(c[0]); got != c[1] {
			t.Errorf("nextFetchSessionEpoch(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// TestFetchSessionPartitionsBound: the partitions of all sessions together
// stay within the cache's bound (fetchSessionPartitionsMax, here lowered
// to 4): an incremental fetch growing its session past it closes the
// session and is answered FETCH_SESSION_ID_NOT_FOUND with no partitions; a
// full fetch past it gets no session but a whole answer; once room is
// back, sessions are made again. Without the bound a client could grow one
// session without limit by naming ever more (nonexistent) partitions.
func TestFetchSessionPartitionsBound(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 3, 1)
	node := c.nodes[1].node
	node.parts.fetchSessions.partitionsMax = 4
	full := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}, {2, 0, 0}}, nil))
	if full.SessionID <= 0 || node.FetchSessionStats().PartitionsCached != 3 {
		t.Fatalf("full fetch of 3: session %d, %d partitions cached", full.SessionID, node.FetchSessionStats().PartitionsCached)
	}
	grown := c.fetchSession(sessionFetchReq(12, full.SessionID, 1, 0, "t", [16]byte{}, []at{{100, 0, 0}, {101, 0, 0}}, nil))
	if grown.ErrorCode != kerr.FetchSessionIDNotFound.Code || grown.SessionID != 0 || len(grown.Topics) != 0 {
		t.Fatalf("growing past the bound: error %d, session %d, %d topics; want FETCH_SESSION_ID_NOT_FOUND, 0, none", grown.ErrorCode, grown.SessionID, len(grown.Topics))
	}
	if st := node.FetchSessionStats(); st.Cached != 0 || st.PartitionsCached != 0 {
		t.Fatalf("after the session was closed: %d sessions, %d partitions cached", st.Cached, st.PartitionsCached)
	}
	big := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}}, nil))
	if order, _ := answeredPartitions(big); big.ErrorCode != 0 || big.SessionID != 0 || len(order) != 5 {
		t.Fatalf("full fetch of 5: error %d, session %d, partitions %v; want no session and all 5 answered", big.ErrorCode, big.SessionID, order)
	}
	again := c.fetchSession(sessionFetchReq(12, 0, 0, 0, "t", [16]byte{}, []at{{0, 0, 0}, {1, 0, 0}}, nil))
	if again.SessionID <= 0 || node.FetchSessionStats().PartitionsCached != 2 {
		t.Fatalf("full fetch of 2: session %d, %d partitions cached", again.SessionID, node.FetchSessionStats().PartitionsCached)
	}
	// Forgetting and closing give the room back.
	c.fetchSession(sessionFetchReq(12, again.SessionID, 1, 0, "t", [16]byte{}, nil, []int32{1}))
	if n := node.FetchSessionStats().PartitionsCached; n != 1 {
		t.Fatalf("after forgetting one of 2: %d partitions cached", n)
	}
	c.fetchSession(sessionFetchReq(12, again.SessionID, -1, 0, "t", [16]byte{}, []at{{0, 0, 0}}, nil))
	if st := node.FetchSessionStats(); st.Cached != 0 || st.PartitionsCached != 0 {
		t.Fatalf("after the final fetch: %d sessions, %d partitions cached", st.Cached, st.PartitionsCached)
	}
}
