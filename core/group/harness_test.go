package group

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// manualClock is an env.Clock that moves only when the test says so.
type manualClock struct {
	nowNs  int64
	seq    uint64
	timers []*manualTimer
}

type manualTimer struct {
	dueNs   int64
	seq     uint64
	fire    func()
	stopped bool
	fired   bool
}

func (t *manualTimer) Stop() bool {
	pending := !t.stopped && !t.fired
	t.stopped = true
	return pending
}

func (c *manualClock) MonotonicNs() int64 { return c.nowNs }
func (c *manualClock) WallMs() int64      { return 1_700_000_000_000 + c.nowNs/1e6 }

func (c *manualClock) SetTimer(delayNs int64, fire func()) env.Timer {
	c.seq++
	t := &manualTimer{dueNs: c.nowNs + max(delayNs, 0), seq: c.seq, fire: fire}
	c.timers = append(c.timers, t)
	return t
}

// advance moves time forward by ms, firing due timers in (due, seq) order.
func (c *manualClock) advance(ms int64) {
	end := c.nowNs + ms*1e6
	for {
		var next *manualTimer
		for _, t := range c.timers {
			if t.stopped || t.fired || t.dueNs > end {
				continue
			}
			if next == nil || t.dueNs < next.dueNs || (t.dueNs == next.dueNs && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.nowNs = max(c.nowNs, next.dueNs)
		next.fired = true
		next.fire()
	}
	c.nowNs = end
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// memStore is a Store whose appends complete when the test says so. log
// holds every batch in append order, as the partition would.
type memStore struct {
	log     [][]byte
	pending []func(error)
}

func (s *memStore) Append(b []byte, done func(error)) {
	s.log = append(s.log, b)
	s.pending = append(s.pending, done)
}

// commitAll completes every pending append successfully.
func (s *memStore) commitAll() {
	for len(s.pending) > 0 {
		done := s.pending[0]
		s.pending = s.pending[1:]
		done(nil)
	}
}

// failAll fails every pending append with err.
func (s *memStore) failAll(err error) {
	for len(s.pending) > 0 {
		done := s.pending[0]
		s.pending = s.pending[1:]
		done(err)
	}
}

// records decodes every batch in the log.
func (s *memStore) records(t tb) []LogRecord {
	var out []LogRecord
	for _, b := range s.log {
		recs, err := DecodeBatch(b)
		if err != nil {
			t.Fatalf("decoding a batch the coordinator wrote: %v", err)
		}
		out = append(out, recs...)
	}
	return out
}

// counterIDs is an IDSource of distinct ids.
func counterIDs() IDSource {
	var n uint64
	return func() [16]byte {
		n++
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], n)
		return id
	}
}

// harness is a coordinator for partition 0 of 1, loaded, with a manual
// clock and store, and short timeouts.
type harness struct {
	t     tb
	clock *manualClock
	store *memStore
	c     *Coordinator
	cfg   Config
}

func testConfig() Config {
	cfg := DefaultConfig(0, 1)
	cfg.GroupInitialRebalanceDelayMs = 0
	cfg.GroupMinSessionTimeoutMs = 100
	return cfg
}

func newHarness(t tb, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: &manualClock{}, store: &memStore{}, cfg: cfg}
	c, err := New(cfg, h.clock, h.store, counterIDs())
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	c.BeginLoad()
	c.FinishLoad()
	return h
}

// pendingReply collects the answers to one request.
type pendingReply struct {
	resps []kmsg.Response
}

func (p *pendingReply) reply(r kmsg.Response) { p.resps = append(p.resps, r) }

// one returns the single answer, failing if there is not exactly one.
func (p *pendingReply) one(t tb) kmsg.Response {
	t.Helper()
	if len(p.resps) != 1 {
		t.Fatalf("got %d answers, want 1", len(p.resps))
	}
	return p.resps[0]
}

func (p *pendingReply) answered() bool { return len(p.resps) > 0 }

func (h *harness) send(req kmsg.Request) *pendingReply {
	p := &pendingReply{}
	h.c.Handle(req, Client{ClientID: "client", ClientHost: "/10.0.0.1"}, p.reply)
	return p
}

type joinOpts struct {
	version    int16
	memberID   string
	instanceID string
	protocols  []kmsg.JoinGroupRequestProtocol
	sessionMs  int32
	rebalance  int32
}

func proto(name, metadata string) kmsg.JoinGroupRequestProtocol {
	return kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(metadata)}
}

func (h *harness) join(groupID string, o joinOpts) *pendingReply {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = o.version
	if r.Version == 0 {
		r.Version = 5
	}
	r.Group, r.MemberID, r.ProtocolType = groupID, o.memberID, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 5000
	if o.sessionMs != 0 {
		r.SessionTimeoutMillis = o.sessionMs
	}
	if o.rebalance != 0 {
		r.RebalanceTimeoutMillis = o.rebalance
	}
	if o.instanceID != "" {
		inst := o.instanceID
		r.InstanceID = &inst
	}
	r.Protocols = o.protocols
	if r.Protocols == nil {
		r.Protocols = []kmsg.JoinGroupRequestProtocol{proto("range", "m")}
	}
	return h.send(r)
}

// joinNew runs KIP-394's two-step join and returns the parked second join.
func (h *harness) joinNew(groupID string, o joinOpts) (string, *pendingReply) {
	h.t.Helper()
	first := h.join(groupID, o).one(h.t).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	o.memberID = first.MemberID
	return first.MemberID, h.join(groupID, o)
}

func (h *harness) sync(groupID, memberID string, generation int32, assignment map[string]string) *pendingReply {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 3
	r.Group, r.MemberID, r.Generation = groupID, memberID, generation
	ids := make([]string, 0, len(assignment))
	for id := range assignment {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(assignment[id])})
	}
	return h.send(r)
}

func (h *harness) heartbeat(groupID, memberID string, generation int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = groupID, memberID, generation
	return h.send(r).one(h.t).(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *harness) commit(groupID, memberID string, generation int32, topic string, partition int32, offset int64) *pendingReply {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 7
	r.Group, r.MemberID, r.Generation = groupID, memberID, generation
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	meta := fmt.Sprintf("m%d", offset)
	p.Metadata = &meta
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	return h.send(r)
}

// fetch returns the committed offset of one partition (OffsetFetch v5).
func (h *harness) fetch(groupID, topic string, partition int32) int64 {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 5
	r.Group = groupID
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := h.send(r).one(h.t).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("offset fetch: error %d", resp.ErrorCode)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func commitCode(t tb, p *pendingReply) int16 {
	t.Helper()
	return p.one(t).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// tb is what the helpers need of *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
