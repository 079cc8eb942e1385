package broker

import (
	"errors"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/log"
	"strand/core/producer"
	"strand/core/replica"
)

// replicaFetchers are the node's replica fetchers, one per leader broker
// (Kafka's ReplicaFetcherManager): they copy the records of the
// partitions this node follows, and perform each follower replica's
// decision on the leader's answer.
type replicaFetchers struct {
	*nodeEnv
	// parts are the partitions the fetchers append to: what waits on them
	// is woken as records arrive (wakeFetchWaiters) or become durable
	// (onDurable).
	parts *partitionManager
	// byLeader are the fetchers, by leader id.
	byLeader map[int32]*fetcher
}

// fetcher is the replica fetcher for one leader broker (Kafka's
// ReplicaFetcherThread): it sends Fetch v12 for every partition this node
// follows on that leader, with one request in flight, and performs what
// each partition's replica decides about the answer. It holds a fetch
// session with the leader (KIP-227, as Kafka's fetchers do), so that a
// partition whose fetch did not change since the last request is not named
// again and, without news, not answered: with many idle partitions most of
// the encoding, decoding and per-partition work is saved on both sides.
type fetcher struct {
	leader     int32
	partitions map[partitionKey]*partition
	// keys are partitions' keys in partition order (topic, then index):
	// the order requests name them in, kept sorted as partitions come and go.
	keys     []partitionKey
	inFlight bool
	backoff  env.Timer
	session  replicaFetchSession
}

// replicaFetchSession is the follower's side of its fetch session with a
// leader (Kafka's FetchSessionHandler).
type replicaFetchSession struct {
	// id is the leader's session id, 0 for none.
	id int32
	// epoch is the epoch of the next request: fetchSessionInitialEpoch
	// makes it a full fetch, which closes session id (if any) and asks for
	// a new one.
	epoch int32
	// asked is, in partition order, every partition of the leader's
	// session with what it was last asked: the partitions of the last
	// answered request.
	asked sentFetches
	// spare is a list no request refers to any more (the asked before
	// the last), reused for the next request's: a fetcher of many
	// partitions builds one per fetch.
	spare sentFetches
}

// takeSpare returns an empty list for a request's partitions, with room
// for capacity of them.
func (s *replicaFetchSession) takeSpare(capacity int) sentFetches {
	spare := s.spare
	s.spare = nil
	if cap(spare) < capacity {
		return make(sentFetches, 0, capacity)
	}
	clear(spare[:cap(spare)]) // drops the partitions it pointed to
	return spare[:0]
}

// incremental reports whether the next request may name only what changed.
func (s *replicaFetchSession) incremental() bool {
	return s.epoch != fetchSessionInitialEpoch
}

// answered moves the session on after the leader answered a request that
// fetched sent: a full fetch takes the session the answer names (none if
// the leader's cache had no room: the next fetch is full again), an
// incremental one moves to the next epoch.
func (s *replicaFetchSession) answered(sent sentFetches, sessionID int32) {
	if !s.incremental() {
		s.id = sessionID
		if sessionID == 0 {
			s.asked = nil
			return
		}
	}
	s.epoch = nextFetchSessionEpoch(s.epoch)
	s.spare, s.asked = s.asked, sent
}

// reset makes the next request a full fetch that closes the session and
// asks for a new one: after a failed request or a session error, the
// leader's view of the session is unknown.
func (s *replicaFetchSession) reset() {
	s.epoch, s.asked = fetchSessionInitialEpoch, nil
}

// add starts fetching p (replacing a partition of the same key).
func (f *fetcher) add(p *partition) {
	if _, ok := f.partitions[p.key]; !ok {
		i := sort.Search(len(f.keys), func(i int) bool { return !f.keys[i].less(p.key) })
		f.keys = append(f.keys, partitionKey{})
		copy(f.keys[i+1:], f.keys[i:])
		f.keys[i] = p.key
	}
	f.partitions[p.key] = p
}

// remove stops fetching the partition of key, if it is fetched.
func (f *fetcher) remove(key partitionKey) {
	if _, ok := f.partitions[key]; !ok {
		return
	}
	delete(f.partitions, key)
	i := sort.Search(len(f.keys), func(i int) bool { return !f.keys[i].less(key) })
	if i == len(f.keys) || f.keys[i] != key {
		panic("broker: fetcher keys out of step with its partitions")
	}
	f.keys = append(f.keys[:i], f.keys[i+1:]...)
}

// less orders partition keys by topic, then index.
func (k partitionKey) less(o partitionKey) bool {
	if k.topic != o.topic {
		return k.topic < o.topic
	}
	return k.index < o.index
}

// follow moves p to the fetcher of leader.
func (rf *replicaFetchers) follow(p *partition, leader int32) {
	for id, f := range rf.byLeader { // order-independent: p is in at most one fetcher
		if id != leader && f.partitions[p.key] != nil {
			f.remove(p.key)
			rf.runFetcher(f) // it may have been waiting for p's Sync (buildReplicaFetch)
		}
	}
	f := rf.byLeader[leader]
	if f == nil {
		f = &fetcher{leader: leader, partitions: map[partitionKey]*partition{}}
		rf.byLeader[leader] = f
	}
	f.add(p)
	rf.runFetcher(f)
}

// fetcherOf returns the fetcher p is in, if any.
func (rf *replicaFetchers) fetcherOf(p *partition) *fetcher {
	for _, f := range rf.byLeader { // order-independent: p is in at most one fetcher
		if f.partitions[p.key] == p {
			return f
		}
	}
	return nil
}

// unfollow removes p from every fetcher (it leads, or has no leader).
func (rf *replicaFetchers) unfollow(p *partition) {
	for _, f := range rf.byLeader { // order-independent: p is in at most one fetcher
		if f.partitions[p.key] != nil {
			f.remove(p.key)
			rf.runFetcher(f) // it may have been waiting for p's Sync (buildReplicaFetch)
		}
	}
	rf.endFetchBackoff(p)
}

// delayFetch leaves p out of its fetcher's requests for
// replica.fetch.backoff.ms, after an error of its own (Kafka's
// AbstractFetcherThread.delayPartitions): the fetcher goes on fetching its
// other partitions meanwhile, and fetches again when the delay ends.
func (rf *replicaFetchers) delayFetch(p *partition) {
	if p.fetchBackoff != nil {
		return
	}
	p.fetchBackoff = rf.after(replicaFetchBackoffMs, func() {
		p.fetchBackoff = nil
		if f := rf.fetcherOf(p); f != nil {
			rf.runFetcher(f)
		}
	})
}

// endFetchBackoff ends p's delay, if any: it stopped following, or follows
// a new leader epoch, whose fetches start afresh (as Kafka's fetcher state
// of a partition added again does).
func (rf *replicaFetchers) endFetchBackoff(p *partition) {
	if p.fetchBackoff != nil {
		p.fetchBackoff.Stop()
		p.fetchBackoff = nil
	}
}

// runFetcher sends the fetcher's next request unless one is in flight or
// it is backing off.
func (rf *replicaFetchers) runFetcher(f *fetcher) {
	if f.inFlight || f.backoff != nil {
		return
	}
	// inFlight covers the build too: a flush it asks for may complete at
	// once and call back here.
	f.inFlight = true
	req, sent := rf.buildReplicaFetch(f)
	if len(sent) == 0 {
		f.inFlight = false
		return // idle until a partition is added or its state changes
	}
	rf.send(f.leader, req, func(r kmsg.Response, err error) {
		rf.onReplicaFetchAnswer(f, sent, r, err)
	})
}

// onReplicaFetchAnswer performs the leader's answer to the fetch that
// asked sent, and fetches again. A failed request or an error of the whole
// answer backs off the whole fetcher; a partition's own error, only that
// partition (delayFetch).
func (rf *replicaFetchers) onReplicaFetchAnswer(f *fetcher, sent sentFetches, r kmsg.Response, err error) {
	f.inFlight = false
	if err != nil {
		f.session.reset()
		rf.backoffFetcher(f)
		return
	}
	resp := r.(*kmsg.FetchResponse)
	switch resp.ErrorCode {
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
		// The leader lost or moved on from the session (a restart, an
		// eviction): a full fetch at once, which no session error answers,
		// so this cannot repeat.
		f.session.reset()
		rf.runFetcher(f)
		return
	case 0:
		f.session.answered(sent, resp.SessionID)
		rf.onReplicaFetched(f, sent, resp)
		rf.runFetcher(f)
	default:
		f.session.reset()
		rf.backoffFetcher(f)
	}
}

// backoffFetcher holds every partition of f back for
// replica.fetch.backoff.ms.
func (rf *replicaFetchers) backoffFetcher(f *fetcher) {
	f.backoff = rf.after(replicaFetchBackoffMs, func() {
		f.backoff = nil
		rf.runFetcher(f)
	})
}

// sentFetch remembers what one partition of an in-flight fetch asked.
type sentFetch struct {
	p   *partition
	req replica.FetchRequest
}

// sentFetches are the partitions of one in-flight fetch, in partition order.
type sentFetches []sentFetch

// find returns what was sent for key, if it was.
func (s sentFetches) find(key partitionKey) (sentFetch, bool) {
	i := sort.Search(len(s), func(i int) bool { return !s[i].p.key.less(key) })
	if i < len(s) && s[i].p.key == key {
		return s[i], true
	}
	return sentFetch{}, false
}

// buildReplicaFetch builds the Fetch for every partition that wants one,
// in partition order, and returns them all in sent. In an incremental
// session the request names only the partitions whose fetch changed (or
// that are new to the session), and forgets those no longer fetched.
func (rf *replicaFetchers) buildReplicaFetch(f *fetcher) (*kmsg.FetchRequest, sentFetches) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = rf.id
	req.MaxWaitMillis = replicaFetchMaxWaitMs
	req.MinBytes = 1
	req.MaxBytes = replicaFetchResponseMaxBytes
	req.SessionID, req.SessionEpoch = f.session.id, f.session.epoch
	incremental := f.session.incremental()
	asked := f.session.asked // sorted: walked beside f.keys
	sent := f.session.takeSpare(len(f.keys))
	var forgotten []partitionKey
	// A full fetch names every partition: sized for all, one backing
	// array for all topics' partitions. An incremental one names the few
	// that changed.
	var partitions []kmsg.FetchRequestTopicPartition
	if !incremental {
		req.Topics = make([]kmsg.FetchRequestTopic, 0, topicCount(f.keys))
		partitions = make([]kmsg.FetchRequestTopicPartition, 0, len(f.keys))
	}
	topicStart := 0
	syncing := false
	for _, k := range f.keys {
		p := f.partitions[k]
		leader, fr, ok := p.replica.NextFetch()
		if !ok || leader != f.leader || p.storageFailed() || p.fetchBackoff != nil {
			continue
		}
		if rf.awaitingSync(p) {
			syncing = true
			continue
		}
		sent = append(sent, sentFetch{p: p, req: fr})
		unchanged := false
		if incremental {
			for len(asked) > 0 && asked[0].p.key.less(k) {
				forgotten = append(forgotten, asked[0].p.key)
				asked = asked[1:]
			}
			if len(asked) > 0 && asked[0].p.key == k {
				unchanged = asked[0].p == p && asked[0].req == fr
				asked = asked[1:]
			}
		}
		if unchanged {
			continue // the leader's session still holds this fetch
		}
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != k.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = k.topic
			req.Topics = append(req.Topics, t)
			topicStart = len(partitions)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = k.index
		fp.CurrentLeaderEpoch = fr.CurrentLeaderEpoch
		fp.FetchOffset = fr.FetchOffset
		fp.LastFetchedEpoch = fr.LastFetchedEpoch
		fp.LogStartOffset = fr.LogStartOffset
		fp.PartitionMaxBytes = replicaFetchMaxBytes
		partitions = append(partitions, fp) // a move leaves earlier topics' slices intact
		req.Topics[len(req.Topics)-1].Partitions = partitions[topicStart:len(partitions):len(partitions)]
	}
	if syncing {
		// A partition of a flush.messages=1 topic waits for its Sync
		// before its LEO may be reported (durable.go), and so does the
		// whole fetcher, as Kafka's fetcher thread flushes inline before
		// it fetches again; onDurable runs it again. A fetch sent without
		// the partition would be parked by the leader and hold the
		// partition back for replica.fetch.wait.max.ms.
		return req, sent[:0]
	}
	if incremental {
		for _, a := range asked {
			forgotten = append(forgotten, a.p.key)
		}
		req.ForgottenTopics = forgottenTopics(forgotten)
	}
	return req, sent
}

// forgottenTopics names keys, in partition order, as a Fetch's
// ForgottenTopics.
func forgottenTopics(keys []partitionKey) []kmsg.FetchRequestForgottenTopic {
	var topics []kmsg.FetchRequestForgottenTopic
	for _, k := range keys {
		if len(topics) == 0 || topics[len(topics)-1].Topic != k.topic {
			t := kmsg.NewFetchRequestForgottenTopic()
			t.Topic = k.topic
			topics = append(topics, t)
		}
		last := &topics[len(topics)-1]
		last.Partitions = append(last.Partitions, k.index)
	}
	return topics
}

// topicCount is the number of topics keys name; keys are sorted, so a
// topic's keys are adjacent.
func topicCount(keys []partitionKey) int {
	count := 0
	for i, k := range keys {
		if i == 0 || keys[i-1].topic != k.topic {
			count++
		}
	}
	return count
}

// onReplicaFetched performs each partition's decision on the leader's
// answer (which carries no error of its own), and delays the partitions
// that must back off.
func (rf *replicaFetchers) onReplicaFetched(f *fetcher, sent sentFetches, resp *kmsg.FetchResponse) {
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			s, ok := sent.find(partitionKey{t.Topic, rp.Partition})
			if !ok {
				continue
			}
			if s.p.retired {
				// Its topic was deleted while the fetch ran. The leader's
				// session counts the answer as told; a new topic of the
				// same name would be named afresh, but answered only on
				// news. A full fetch leaves nothing to chance.
				f.session.reset()
				continue
			}
			again, inStep := rf.applyReplicaFetch(s, rp)
			if !again {
				rf.delayFetch(s.p)
			}
			if !inStep {
				// The leader's session now counts this answer's HW and
				// log start as told, and names the partition again only
				// when they change: a follower that truncated, ignored
				// or failed the answer would wait for that with a stale
				// HW and log start. A full fetch makes the leader tell
				// them again.
				f.session.reset()
			}
		}
	}
}

// applyReplicaFetch performs the follower's decision for one partition. It
// reports whether the partition may fetch again at once (false: back off),
// and whether the leader's session is in step with it: the answer was
// applied as an append, HW and log start with it, or was an error, after
// which the session answers the partition again once the error clears (its
// HW counts as untold). Otherwise (truncated, ignored, failed) it is not.
func (rf *replicaFetchers) applyReplicaFetch(s sentFetch, rp kmsg.FetchResponseTopicPartition) (again, inStep bool) {
	p := s.p
	decision := replica.FetchDecision{
		Error:          rp.ErrorCode,
		Diverging:      rp.DivergingEpoch.Epoch >= 0,
		DivergingEpoch: replica.EpochEndOffset{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset},
		HighWatermark:  rp.HighWatermark,
		LogStartOffset: rp.LogStartOffset,
		// The wire has no leader LEO; the HW is the best bound below it
		// (replica.FetchDecision's comment).
		LogEndOffset: rp.HighWatermark,
	}
	action := p.replica.OnFetchResponse(s.req, decision)
	// The producer state must describe the log before it changes here (a
	// truncation by the metadata follower is noticed now).
	_ = p.syncProducers() // on failure it stays nil and is reloaded later
	var err error
	switch action.Kind {
	case replica.ActionAppend:
		if len(rp.RecordBatches) > 0 {
			err = rf.appendAsFollower(p, rp.RecordBatches)
		}
		if err == nil && action.LogStartOffset > p.log.LogStartOffset() {
			if err = p.log.AdvanceStartOffset(action.LogStartOffset); err == nil {
				producerStartOffsetMoved(p)
			}
		}
		if err == nil {
			p.replica.OnFollowerAppend(rp.HighWatermark)
			rf.parts.wakeFetchWaiters(p)
		}
	case replica.ActionTruncate:
		if err = p.log.TruncateTo(action.Offset); err == nil {
			_ = p.syncProducers() // reloads from the newest snapshot at or below the new end
		}
	case replica.ActionTruncateFullyAndStartAt:
		err = rf.restartFollowerLogAt(p, action.Offset)
	case replica.ActionBackoff:
		return false, rp.ErrorCode != 0
	}
	rf.logFollowerAppendError(p, action, err)
	return err == nil, err == nil && (action.Kind == replica.ActionAppend || rp.ErrorCode != 0)
}

// appendAsFollower appends the leader's batches to p's log, and applies
// them to its producer state.
//
// The leader answers a fetch with whole batches, so its first batch starts
// below the fetch offset when that offset is inside one of its batches:
//   - a log restarted empty at a log start inside a batch (DeleteRecords
//     moved the leader's log start into the batch, and this replica, behind
//     it, restarted there after OFFSET_OUT_OF_RANGE). As Kafka's
//     Partition.appendRecordsToFollowerOrFutureReplica does (KAFKA-6975),
//     the empty log restarts at the batch's base offset and takes it whole;
//     the log start comes back up to the leader's with the same answer;
//   - a log truncated by divergence to a batch boundary of its own that is
//     not one of the leader's: the leader's epoch cache starts an epoch at
//     its log start when DeleteRecords cut that epoch's first batch, so it
//     reports the divergence at the log start, inside the batch
//     (TestFollowerTakesALeaderBatchStraddlingItsEnd). The leader's batch
//     is the truth for its offsets:
//     the log is truncated to where it starts (or restarted there, below
//     its log start) and takes it. Kafka fails such a partition for good.
//
// Any other misplaced batch is an error.
func (rf *replicaFetchers) appendAsFollower(p *partition, records []byte) error {
	leo := p.log.LogEndOffset()
	res, err := p.log.AppendAsFollower(records, rf.wallMs())
	if errors.Is(err, log.ErrUnexpectedOffset) {
		if h, parseErr := batch.ParseHeader(records); parseErr == nil && h.BaseOffset < leo && h.LastOffset() >= leo {
			if h.BaseOffset > p.log.LogStartOffset() {
				if err = p.log.TruncateTo(h.BaseOffset); err == nil {
					_ = p.syncProducers() // reloads from the newest snapshot at or below the new end
				}
			} else {
				err = rf.restartFollowerLogAt(p, h.BaseOffset)
			}
			if err == nil {
				leo = p.log.LogEndOffset()
				res, err = p.log.AppendAsFollower(records, rf.wallMs())
			}
		}
	}
	if err == nil {
		rf.followerProducersAppended(p, res.Rolled, appendedBatches(p.log, records, leo))
	}
	return err
}

// restartFollowerLogAt empties p's log and restarts it at offset, with an
// empty producer state there.
func (rf *replicaFetchers) restartFollowerLogAt(p *partition, offset int64) error {
	if err := p.log.TruncateFullyAndStartAt(offset, rf.wallMs()); err != nil {
		return err
	}
	// Every snapshot goes, also when the state had failed.
	p.producers = producer.NewState(p.producerConfig, offset)
	if p.producers.TruncateFullyAndStartAt(offset, p.snapshots) != nil {
		p.producers = nil // reloaded by the next syncProducers
	}
	return nil
}

// logFollowerAppendError logs, at ERROR, a failure to apply the leader's
// answer to the log (Kafka's fetcher: "Error processing data for
// partition"). The fetcher backs off and retries, and a follower stuck on
// one error would log it every replica.fetch.backoff.ms: it is logged once
// per distinct error text, again only after a success or a different error.
func (rf *replicaFetchers) logFollowerAppendError(p *partition, action replica.FollowerAction, err error) {
	if err == nil {
		p.followerAppendErrLogged = ""
		return
	}
	if !rf.cfg.Log.Enabled(slog.LevelError) {
		return
	}
	text := err.Error()
	if text == p.followerAppendErrLogged {
		return
	}
	p.followerAppendErrLogged = text
	rf.cfg.Log.Error("error processing fetched data for partition; retrying after replica.fetch.backoff.ms",
		slog.String("topic", p.key.topic), slog.Int("partition", int(p.key.index)),
		slog.String("action", followerActionName(action.Kind)),
		slog.Int64("log_end_offset", p.log.LogEndOffset()), slog.Int("leader_epoch", int(p.replica.LeaderEpoch())),
		slog.Any("err", err))
}

// followerActionName names what the follower was doing, for its log line.
func followerActionName(kind replica.FollowerActionKind) string {
	switch kind {
	case replica.ActionAppend:
		return "append"
	case replica.ActionTruncate:
		return "truncate"
	case replica.ActionTruncateFullyAndStartAt:
		return "truncate fully"
	}
	return "other"
}

// followerProducersAppended applies the batches a follower just appended to
// its producer state (CatchUp, reading them with read), and snapshots the
// state when the append rolled a segment, as the leader does.
func (rf *replicaFetchers) followerProducersAppended(p *partition, rolled bool, read producer.BatchReader) {
	if p.producers == nil {
		return // reloaded, with these batches, by the next syncProducers
	}
	if err := p.producers.CatchUp(p.log.LogEndOffset(), read); err != nil {
		p.producers = nil
		return
	}
	if rolled {
		p.snapshots.Take(p.producers, nil)
	}
}

// appendedBatches reads batch headers for a producer state's catch-up from
// records, the batches a follower just appended to l at appendedFrom (its
// LEO before), instead of reading them back from the log: the log holds
// these very bytes. A catch-up from elsewhere (the state was behind), or
// records that are not exactly what the log now ends with, read the log.
func appendedBatches(l *log.Log, records []byte, appendedFrom int64) producer.BatchReader {
	return func(fromOffset int64, visit func(batch.Header) error) error {
		headers, ok := batchHeaders(records, appendedFrom)
		if fromOffset != appendedFrom || !ok || len(headers) == 0 || headers[len(headers)-1].NextOffset() != l.LogEndOffset() {
			return producer.LogReader(l)(fromOffset, visit)
		}
		for _, h := range headers {
			if err := visit(h); err != nil {
				return err
			}
		}
		return nil
	}
}

// batchHeaders parses the headers of records, whole batches whose offsets
// run on from baseOffset without a gap; ok is false if they do not.
func batchHeaders(records []byte, baseOffset int64) (headers []batch.Header, ok bool) {
	next := baseOffset
	for rest := records; len(rest) > 0; {
		if len(rest) < batch.HeaderBytes {
			return nil, false
		}
		h, err := batch.ParseHeader(rest)
		if err != nil || h.Length < 0 || h.TotalBytes() > int64(len(rest)) || h.BaseOffset != next || h.LastOffsetDelta < 0 {
			return nil, false
		}
		headers = append(headers, h)
		next = h.NextOffset()
		rest = rest[h.TotalBytes():]
	}
	return headers, true
}
