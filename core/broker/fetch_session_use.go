package broker

// How a Fetch uses fetch sessions (fetch_session.go), as Kafka's
// FetchManager.newContext decides: on arrival a Fetch is sessionless, a
// full fetch that asks for a session when answered, or an incremental
// fetch of a session (whose epoch moves on at once, so a duplicate is
// refused); when answered, the full fetch creates its session and the
// incremental one sends only the partitions with something to say.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// fetchSessionUse is what one Fetch does with sessions.
type fetchSessionUse struct {
	// create: a full fetch asking for a session, made when it is answered.
	create bool
	owner  fetchSessionOwner
	// session is the session of an incremental fetch; epoch is the epoch
	// the session moved to when the fetch arrived, checked again when it
	// is answered (a newer request of the session makes this one stale).
	// parts are the session's partitions in the order the fetch reads them.
	session *fetchSession
	epoch   int32
	parts   []*sessionPartition
}

// fetchSessionCacheOf builds a node's cache: the slots from
// max.incremental.fetch.session.cache.slots, ids seeded by the incarnation.
func fetchSessionCacheOf(slots int32, incarnation [16]byte) *fetchSessionCache {
	seed := binary.BigEndian.Uint64(incarnation[:8]) ^ binary.BigEndian.Uint64(incarnation[8:])
	return newFetchSessionCache(int(slots), fetchSessionPartitionsMax, fetchSessionEvictionMs, seed)
}

// openFetchSession decides, as req arrives, how it uses sessions. It
// returns the request to execute (for an incremental fetch, every
// partition of the session), or a session error code for the whole
// request (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR).
func (pm *partitionManager) openFetchSession(clientID string, req *kmsg.FetchRequest) (use fetchSessionUse, exec *kmsg.FetchRequest, errorCode int16) {
	if req.Version < fetchSessionVersionMin {
		return use, req, 0
	}
	use.owner = fetchSessionOwner{replicaID: req.ReplicaID, clientID: clientID}
	if req.SessionEpoch == fetchSessionInitialEpoch || req.SessionEpoch == fetchSessionFinalEpoch {
		// A full fetch closes the session it names (if its own) and,
		// unless final, asks for a new one.
		if s := pm.fetchSessions.get(req.SessionID); s != nil && s.owner == use.owner {
			pm.fetchSessions.remove(s.id)
		}
		use.create = req.SessionEpoch == fetchSessionInitialEpoch
		return use, req, 0
	}
	s := pm.fetchSessions.get(req.SessionID)
	switch {
	case s == nil || s.owner != use.owner:
		return use, req, kerr.FetchSessionIDNotFound.Code
	case s.epoch != req.SessionEpoch:
		return use, req, kerr.InvalidFetchSessionEpoch.Code
	case s.usesTopicIDs != (req.Version >= fetchTopicIDVersionMin):
		return use, req, kerr.FetchSessionTopicIDError.Code
	}
	if !pm.fetchSessions.update(s, req) {
		return use, req, kerr.FetchSessionIDNotFound.Code // too many partitions cached
	}
	if len(s.partitions) == 0 {
		// Everything forgotten: the session ends, the fetch is sessionless.
		pm.fetchSessions.remove(s.id)
		return fetchSessionUse{}, req, 0
	}
	pm.fetchSessions.touch(s, pm.nowMs())
	s.epoch = nextFetchSessionEpoch(s.epoch)
	use.session, use.epoch = s, s.epoch
	use.parts = append([]*sessionPartition(nil), s.partitions...)
	return use, pm.sessionRequest(req, s, use.parts), 0
}

// sessionRequest is the request an incremental fetch of s executes: req's
// settings, and parts (the session's partitions) as topics, a topic
// repeated where its partitions are not adjacent, as Kafka's answer does.
func (pm *partitionManager) sessionRequest(req *kmsg.FetchRequest, s *fetchSession, parts []*sessionPartition) *kmsg.FetchRequest {
	exec := *req
	exec.Topics = make([]kmsg.FetchRequestTopic, 0, 1)
	exec.ForgottenTopics = nil
	partitions := make([]kmsg.FetchRequestTopicPartition, 0, len(parts))
	start := 0
	for i, sp := range parts {
		if i == 0 || sp.key.topic != parts[i-1].key.topic || sp.key.topicID != parts[i-1].key.topicID {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = sp.key.topic, sp.key.topicID
			if s.usesTopicIDs {
				t.Topic = pm.topicNameOf(sp.key.topicID)
			}
			exec.Topics = append(exec.Topics, t)
			start = len(partitions)
		}
		partitions = append(partitions, sp.request()) // within capacity: never moves
		exec.Topics[len(exec.Topics)-1].Partitions = partitions[start:len(partitions):len(partitions)]
	}
	return &exec
}

// topicNameOf is the name of the topic id names in the applied metadata,
// "" if none.
func (pm *partitionManager) topicNameOf(id [16]byte) string {
	if t, ok := pm.meta.image.TopicByID(metadata.TopicID(id)); ok {
		return t.Name
	}
	return ""
}

// resolveTopicIDs names, in a Fetch v13+ (KIP-516: topics by id), each
// topic by its id; an unknown id keeps the name "" and its partitions are
// answered UNKNOWN_TOPIC_ID.
func (pm *partitionManager) resolveTopicIDs(req *kmsg.FetchRequest) {
	if req.Version < fetchTopicIDVersionMin {
		return
	}
	for i := range req.Topics {
		req.Topics[i].Topic = pm.topicNameOf(req.Topics[i].TopicID)
	}
}

// closeFetchSession finishes an answer: a full fetch that asked for a
// session gets one (if the cache has room) and its id; an incremental one
// keeps only the partitions with something to say, or becomes
// INVALID_FETCH_SESSION_EPOCH if a newer request of its session came
// meanwhile. exec is the request the answer was executed for.
func (pm *partitionManager) closeFetchSession(use fetchSessionUse, exec *kmsg.FetchRequest, a fetchAnswer) fetchAnswer {
	switch {
	case use.create:
		if s := pm.fetchSessions.create(pm.nowMs(), use.owner, exec.Version >= fetchTopicIDVersionMin, sessionPartitionsOf(exec, a)); s != nil {
			a.resp.SessionID = s.id
		}
		return a
	case use.session == nil:
		return a
	case use.session.epoch != use.epoch:
		a.resp.Topics, a.records = nil, nil
		a.resp.ErrorCode, a.resp.SessionID = kerr.InvalidFetchSessionEpoch.Code, use.session.id
		return a
	}
	answers := make([]*kmsg.FetchResponseTopicPartition, 0, len(use.parts))
	for i := range a.resp.Topics {
		for j := range a.resp.Topics[i].Partitions {
			answers = append(answers, &a.resp.Topics[i].Partitions[j])
		}
	}
	if len(answers) != len(use.parts) || len(a.records) != len(use.parts) {
		panic("broker: an incremental fetch answer does not cover its session's partitions")
	}
	recordBytes := make([]int64, len(a.records))
	for i, r := range a.records {
		recordBytes[i] = r.bytes()
	}
	a.resp.SessionID = use.session.id
	pm.fetchSessions.stats.IncrementalFetches++
	if use.session.usesTopicIDs {
		pm.fetchSessions.stats.IncrementalByTopicID++
	}
	return keepAnswered(a, use.session.answer(use.parts, answers, recordBytes))
}

// sessionPartitionsOf are the partitions of a new session: those exec
// names (a partition named twice once), as the answer a tells the client.
func sessionPartitionsOf(exec *kmsg.FetchRequest, a fetchAnswer) []*sessionPartition {
	byIDs := exec.Version >= fetchTopicIDVersionMin
	s := &fetchSession{usesTopicIDs: byIDs, index: map[fetchSessionKey]*sessionPartition{}}
	for i := range exec.Topics {
		t := &exec.Topics[i]
		for j := range t.Partitions {
			fp := &t.Partitions[j]
			rp := &a.resp.Topics[i].Partitions[j]
			sp, added := s.add(s.keyOf(t.Topic, t.TopicID, fp.Partition))
			if !added {
				continue
			}
			sp.askFrom(fp)
			sp.mustAnswer(rp, 0)
		}
	}
	return s.partitions
}

// keepAnswered drops from a the partitions send says not to send, and
// topics left empty.
func keepAnswered(a fetchAnswer, send []bool) fetchAnswer {
	topics := a.resp.Topics[:0]
	records := a.records[:0]
	k := 0
	for _, t := range a.resp.Topics {
		kept := t.Partitions[:0]
		for _, p := range t.Partitions {
			if send[k] {
				kept = append(kept, p)
				records = append(records, a.records[k])
			} else if len(a.records[k].regions) > 0 {
				panic("broker: an incremental fetch dropped a partition with records")
			}
			k++
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	a.resp.Topics, a.records = topics, records
	return a
}

// FetchSessionStats reports what this node's fetch sessions have done.
func (n *Node) FetchSessionStats() FetchSessionStats {
	stats := n.parts.fetchSessions.stats
	stats.Cached, stats.PartitionsCached = len(n.parts.fetchSessions.sessions), n.parts.fetchSessions.partitions
	return stats
}
