package broker

// Fetch sessions (KIP-227): a client that fetches the same partitions again
// and again registers them once (a full fetch with SessionID 0 and
// SessionEpoch 0) and then sends only what changed (incremental fetches:
// the session's id and its next epoch, the partitions whose fetch offset
// or limits changed, ForgottenTopics for those it drops). The broker answers
// an incremental fetch with only the partitions that have something to say:
// records, a changed high watermark, last stable offset or log start
// offset, an error, a diverging epoch. For a consumer of many partitions
// that is most of the encoding and sending saved.
//
// This file holds the sessions and their cache; api_01_fetch.go decides,
// per Fetch, whether it opens, uses or closes one. Everything here runs on
// the event loop; times are the node's monotonic clock (env.Clock), never
// the wall clock, and session ids come from a counter hashed with the
// node's incarnation, so the simulator replays them.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// fetchSessionEvictionMs is how long a session must go unused before any
	// new session may evict it, and how old a session must be before a
	// larger one may (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS).
	fetchSessionEvictionMs = 120_000
	// fetchSessionFinalEpoch in a full fetch means "no session" (and closes
	// the one SessionID names); fetchSessionInitialEpoch asks for a new one.
	fetchSessionFinalEpoch   = -1
	fetchSessionInitialEpoch = 0
	// fetchSessionPartitionsMax bounds the partitions held by all of a
	// node's sessions together (about 200 bytes each, so some 50 MiB).
	// Kafka bounds only the number of sessions, so one client could grow
	// a session without limit by naming ever more (even nonexistent)
	// partitions in incremental fetches. A full fetch that would pass the
	// bound gets no session (it is answered whole, session id 0); an
	// incremental one that would closes its session and is answered
	// FETCH_SESSION_ID_NOT_FOUND, so the client falls back to full
	// fetches (kgo and Kafka's client both do).
	fetchSessionPartitionsMax = 1 << 18
	// fetchSessionVersionMin is the first Fetch version with sessions.
	fetchSessionVersionMin = 7
	// fetchTopicIDVersionMin is the first Fetch version that names topics
	// by id (KIP-516).
	fetchTopicIDVersionMin = 13
)

// nextFetchSessionEpoch is the epoch after epoch: it wraps to 1, never to 0
// (a full fetch) or below (the final epoch).
func nextFetchSessionEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

// fetchSessionKey names a partition of a session: by topic name in a session
// of Fetch v7..v12, by topic id in one of v13+ (the other field is zero).
type fetchSessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPartition is one partition of a fetch session: what the client
// last asked of it, and what the broker last told the client about it.
type sessionPartition struct {
	key fetchSessionKey
	// What the client asks: the fields of its last request for it.
	fetchOffset        int64
	logStartOffset     int64 // the fetcher's own (followers)
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	// What the client was last told; -1 until told. highWatermark is reset
	// to -1 after an error, so the partition is answered once it clears.
	highWatermark    int64
	lastStableOffset int64
	logStartSent     int64
	// gotRecords marks the partitions given records in the answer being
	// filtered (fetchSession.answer); false between answers.
	gotRecords bool
	// logStartUntold is the planted bug session-log-start-untold
	// (Bugs.SessionLogStartUntold): a changed log start is counted as told
	// without naming the partition.
	logStartUntold bool
}

// askFrom records the request fields of fp.
func (sp *sessionPartition) askFrom(fp *kmsg.FetchRequestTopicPartition) {
	sp.fetchOffset, sp.logStartOffset, sp.maxBytes = fp.FetchOffset, fp.LogStartOffset, fp.PartitionMaxBytes
	sp.currentLeaderEpoch, sp.lastFetchedEpoch = fp.CurrentLeaderEpoch, fp.LastFetchedEpoch
}

// request is the partition as a Fetch request names it.
func (sp *sessionPartition) request() kmsg.FetchRequestTopicPartition {
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = sp.key.partition
	fp.FetchOffset, fp.LogStartOffset, fp.PartitionMaxBytes = sp.fetchOffset, sp.logStartOffset, sp.maxBytes
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = sp.currentLeaderEpoch, sp.lastFetchedEpoch
	return fp
}

// mustAnswer reports whether rp, this partition's part of an answer with
// recordBytes of records, must be sent in an incremental answer, and
// remembers what it tells the client (Kafka's
// CachedPartition.maybeUpdateResponseData, with the LSO tracked too).
func (sp *sessionPartition) mustAnswer(rp *kmsg.FetchResponseTopicPartition, recordBytes int64) bool {
	must := recordBytes > 0 || len(rp.RecordBatches) > 0
	if sp.highWatermark != rp.HighWatermark {
		sp.highWatermark, must = rp.HighWatermark, true
	}
	if sp.lastStableOffset != rp.LastStableOffset {
		sp.lastStableOffset, must = rp.LastStableOffset, true
	}
	if sp.logStartSent != rp.LogStartOffset {
		sp.logStartSent = rp.LogStartOffset
		must = must || !sp.logStartUntold
	}
	if rp.DivergingEpoch.Epoch >= 0 || rp.PreferredReadReplica >= 0 || rp.CurrentLeader.LeaderID >= 0 || rp.SnapshotID.Epoch >= 0 {
		must = true
	}
	if rp.ErrorCode != 0 {
		sp.highWatermark, must = -1, true
	}
	return must
}

// fetchSessionOwner is who may use a session: the fetcher that created it
// (its replica id, -1 for consumers, and its client.id). A session is keyed
// by id alone and outlives connections, as in Kafka, but a request from
// anyone else is answered as if the id did not exist. Kafka has no such
// rule; Strand adds it so no client uses or closes another's session by
// its id, and kgo and Kafka's consumer keep their client.id for life
// (SPEC.md §7.6, §9).
type fetchSessionOwner struct {
	replicaID int32
	clientID  string
}

// fetchSession is one cached session.
type fetchSession struct {
	id int32
	// epoch is the epoch the next incremental request must carry.
	epoch        int32
	privileged   bool // a follower's: evicted last
	owner        fetchSessionOwner
	usesTopicIDs bool // created by Fetch v13+; its requests must stay v13+
	// partitions are the session's partitions, those least recently given
	// records first (an answer cut short by MaxBytes serves the others
	// next time); index finds them by key.
	partitions []*sessionPartition
	index      map[fetchSessionKey]*sessionPartition
	createdMs  int64
	lastUsedMs int64
	// logStartUntold is the planted bug session-log-start-untold, given to
	// every partition of the session.
	logStartUntold bool
}

// keyOf is the session key of a request partition of topic t.
func (s *fetchSession) keyOf(topic string, topicID [16]byte, partition int32) fetchSessionKey {
	if s.usesTopicIDs {
		return fetchSessionKey{topicID: topicID, partition: partition}
	}
	return fetchSessionKey{topic: topic, partition: partition}
}

// add appends a partition to the session unless it is there already; it
// returns the session's partition.
func (s *fetchSession) add(key fetchSessionKey) (sp *sessionPartition, added bool) {
	if sp := s.index[key]; sp != nil {
		return sp, false
	}
	sp = &sessionPartition{key: key, highWatermark: -1, lastStableOffset: -1, logStartSent: -1, logStartUntold: s.logStartUntold}
	s.partitions = append(s.partitions, sp)
	s.index[key] = sp
	return sp, true
}

// update applies an incremental request: its partitions are added or take
// the new fetch parameters, its forgotten partitions leave the session.
// Use fetchSessionCache.update, which keeps the cache's partition count.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			fp := &t.Partitions[j]
			sp, _ := s.add(s.keyOf(t.Topic, t.TopicID, fp.Partition))
			sp.askFrom(fp)
		}
	}
	removed := false
	for _, ft := range req.ForgottenTopics {
		for _, partition := range ft.Partitions {
			key := s.keyOf(ft.Topic, ft.TopicID, partition)
			if _, ok := s.index[key]; ok {
				delete(s.index, key)
				removed = true
			}
		}
	}
	if removed {
		kept := s.partitions[:0]
		for _, sp := range s.partitions {
			if s.index[sp.key] == sp {
				kept = append(kept, sp)
			}
		}
		clear(s.partitions[len(kept):])
		s.partitions = kept
	}
	if len(s.partitions) != len(s.index) {
		panic("broker: a fetch session's partition list and index disagree")
	}
}

// answer decides which partitions of an incremental answer are sent: parts
// are the session partitions the answer covers, in its order, with their
// answers and record sizes. It returns, per partition, whether to send it,
// and moves those given records to the end of the session's order, as
// Kafka's IncrementalFetchContext does. Only those: a partition answered
// for a new HW alone keeps its place, or on a busy topic (every HW moving)
// the order would never change and a MaxBytes cut would starve the same
// partitions on every fetch (TestIncrementalFetchRotatesPartitionsWithRecords).
func (s *fetchSession) answer(parts []*sessionPartition, answers []*kmsg.FetchResponseTopicPartition, recordBytes []int64) []bool {
	send := make([]bool, len(parts))
	anyRecords := false
	for i, sp := range parts {
		send[i] = sp.mustAnswer(answers[i], recordBytes[i])
		if recordBytes[i] > 0 {
			sp.gotRecords, anyRecords = true, true
		}
	}
	if !anyRecords {
		return send
	}
	reordered := make([]*sessionPartition, 0, len(s.partitions))
	for _, sp := range s.partitions {
		if !sp.gotRecords {
			reordered = append(reordered, sp)
		}
	}
	for _, sp := range s.partitions {
		if sp.gotRecords {
			sp.gotRecords = false
			reordered = append(reordered, sp)
		}
	}
	s.partitions = reordered
	for _, sp := range parts { // parts no longer in the session
		sp.gotRecords = false
	}
	return send
}

// fetchSessionCache holds the sessions of a broker, at most slotsMax
// (max.incremental.fetch.session.cache.slots) holding at most
// partitionsMax partitions together (fetchSessionPartitionsMax).
type fetchSessionCache struct {
	slotsMax      int
	partitionsMax int
	evictionMs    int64
	sessions      map[int32]*fetchSession
	// partitions is the number of partitions of the cached sessions.
	partitions int
	// idSeed and idCount make session ids: distinct per process start,
	// hard to guess, and the same in every replay of a simulation.
	idSeed  uint64
	idCount uint64
	// stats counts what the cache has done (FetchSessionStats).
	stats FetchSessionStats
	// logStartUntold is the planted bug session-log-start-untold
	// (Bugs.SessionLogStartUntold), given to every session created.
	logStartUntold bool
}

// FetchSessionStats counts what a node's fetch sessions (KIP-227) have
// done since it started, as Kafka's fetch session metrics do.
type FetchSessionStats struct {
	// Cached is the number of sessions in the cache now, PartitionsCached
	// the number of partitions they hold.
	Cached, PartitionsCached int
	// Created and Evicted count sessions made, and evicted to make room.
	Created, Evicted int64
	// IncrementalFetches counts incremental fetches answered through a
	// session; IncrementalByTopicID those of Fetch v13+ (topics by id).
	IncrementalFetches, IncrementalByTopicID int64
}

func newFetchSessionCache(slotsMax, partitionsMax int, evictionMs int64, idSeed uint64) *fetchSessionCache {
	if slotsMax < 0 || partitionsMax < 0 || evictionMs < 0 {
		panic("broker: fetch session cache limits are negative")
	}
	return &fetchSessionCache{
		slotsMax: slotsMax, partitionsMax: partitionsMax, evictionMs: evictionMs,
		sessions: map[int32]*fetchSession{}, idSeed: idSeed,
	}
}

// get returns the session id names, nil if none.
func (c *fetchSessionCache) get(id int32) *fetchSession { return c.sessions[id] }

// remove drops the session id names, if any.
func (c *fetchSessionCache) remove(id int32) {
	if s := c.sessions[id]; s != nil {
		delete(c.sessions, id)
		c.partitions -= len(s.partitions)
	}
}

// update applies an incremental request to s, a cached session. If that
// would take the cache past partitionsMax, s is removed instead and update
// returns false.
func (c *fetchSessionCache) update(s *fetchSession, req *kmsg.FetchRequest) bool {
	before := len(s.partitions)
	s.update(req)
	c.partitions += len(s.partitions) - before
	if c.partitions > c.partitionsMax {
		c.remove(s.id)
		return false
	}
	return true
}

// create makes a session of parts for owner if there is room, evicting
// another if Kafka's rules allow (tryEvict); it returns nil otherwise, and
// when the cache's partitions would pass partitionsMax. The session's
// first incremental request carries epoch 1.
func (c *fetchSessionCache) create(nowMs int64, owner fetchSessionOwner, usesTopicIDs bool, parts []*sessionPartition) *fetchSession {
	privileged := owner.replicaID >= 0
	if c.partitions+len(parts) > c.partitionsMax {
		return nil // checked first: evicting would not always free enough
	}
	if len(c.sessions) >= c.slotsMax && !c.tryEvict(privileged, len(parts), nowMs) {
		return nil
	}
	s := &fetchSession{
		id: c.newID(), epoch: nextFetchSessionEpoch(fetchSessionInitialEpoch), privileged: privileged, owner: owner,
		usesTopicIDs: usesTopicIDs, partitions: parts, index: make(map[fetchSessionKey]*sessionPartition, len(parts)),
		createdMs: nowMs, lastUsedMs: nowMs, logStartUntold: c.logStartUntold,
	}
	for _, sp := range parts {
		if s.index[sp.key] != nil {
			panic("broker: a new fetch session names a partition twice")
		}
		s.index[sp.key] = sp
		sp.logStartUntold = c.logStartUntold
	}
	c.sessions[s.id] = s
	c.partitions += len(parts)
	c.stats.Created++
	if len(c.sessions) > c.slotsMax || c.partitions > c.partitionsMax {
		panic("broker: the fetch session cache outgrew its slots or partitions")
	}
	return s
}

// touch records a use of s.
func (c *fetchSessionCache) touch(s *fetchSession, nowMs int64) {
	s.lastUsedMs = max(s.lastUsedMs, nowMs)
}

// tryEvict makes room for a new session of size partitions, as Kafka's
// FetchSessionCache does: the least recently used session goes if it has
// been unused for evictionMs; otherwise the least valuable session goes
// (non-privileged before privileged, then fewer partitions, then lower id)
// if the new one is worth more. A privileged (follower) session may evict
// any non-privileged one, and a privileged one older than evictionMs; a
// consumer's may evict only sessions older than evictionMs.
func (c *fetchSessionCache) tryEvict(privileged bool, size int, nowMs int64) bool {
	var stale, cheapest *fetchSession
	for _, s := range c.sessions { // order-independent: minima under total orders (ties broken by id)
		if stale == nil || s.lastUsedMs < stale.lastUsedMs || (s.lastUsedMs == stale.lastUsedMs && s.id < stale.id) {
			stale = s
		}
		old := nowMs-s.createdMs > c.evictionMs
		if !old && (!privileged || s.privileged) {
			continue
		}
		if cheapest == nil || lessValuable(s, cheapest) {
			cheapest = s
		}
	}
	switch {
	case stale == nil:
		return false
	case nowMs-stale.lastUsedMs > c.evictionMs:
		c.remove(stale.id)
	case cheapest == nil || !worthMore(privileged, size, cheapest):
		return false
	default:
		c.remove(cheapest.id)
	}
	c.stats.Evicted++
	return true
}

// lessValuable orders sessions by (privileged, size, id).
func lessValuable(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if len(a.partitions) != len(b.partitions) {
		return len(a.partitions) < len(b.partitions)
	}
	return a.id < b.id
}

// worthMore reports whether a new session (privileged, size) outranks s.
func worthMore(privileged bool, size int, s *fetchSession) bool {
	if privileged != s.privileged {
		return privileged
	}
	return size > len(s.partitions)
}

// newID returns an unused positive session id.
func (c *fetchSessionCache) newID() int32 {
	for {
		c.idCount++
		id := int32(splitmix64(c.idSeed+c.idCount) & math.MaxInt32)
		if id != 0 && c.sessions[id] == nil {
			return id
		}
	}
}

// splitmix64 is SplitMix64's output function: it spreads a counter over
// 64 bits, so consecutive session ids look unrelated.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
