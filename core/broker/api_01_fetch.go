package broker

// Fetch (key 1), versions 4..16 (api_versions.go).
//
// Served: consumers (ReplicaID -1) read up to the HW, replicas (ReplicaID >=
// 0, replica fetchers) up to the LEO, and a replica's fetch drives the
// leader's view of it (core/replica OnFollowerFetch): HW, ISR expansion,
// DivergingEpoch (v12). LastStableOffset = HW at both isolation levels: no
// transactions yet. A consumer's fetch v11+ is served by a follower too,
// up to the follower's own HW (KIP-392, replica OnConsumerFetchAnyReplica); below
// v11, and for replicas, only the leader serves. PartitionMaxBytes and MaxBytes bound the response, except
// that the first non-empty partition returns its first batch whole (KIP-74).
// Long polling: without enough data (MinBytes) and without errors, the
// request waits up to MaxWaitMillis, re-checked whenever a hosted
// partition's HW or LEO moves (fetchReady: without a log read when the
// bound is the LEO and MinBytes <= 1); the waiting list is bounded by
// strand.purgatory.requests.max and, per partition (counting acks=all
// produces), strand.purgatory.requests.per.partition.max: beyond them,
// fetches are answered at once.
// This is a broker listener's Fetch. The metadata log is fetched only on
// the controller listener (controller_role.go, handleControllerFetch);
// here __cluster_metadata-0 is a partition no broker hosts.
//
// Fetch sessions (KIP-227, v7+): fetch_session.go and fetch_session_use.go.
// A full fetch with SessionEpoch 0 gets a session when answered (if the
// cache has room); an incremental one executes every partition of its
// session and sends those with something to say. Long polling works on
// the executed request, so it is the same for both.
// Topic ids (KIP-516, v13+): topics are named by id, resolved from the
// applied metadata; an unknown id answers UNKNOWN_TOPIC_ID, and a
// partition hosted under another id of the same name INCONSISTENT_TOPIC_ID.
// v15 moves the replica id into ReplicaState; v16's NodeEndpoints are
// left empty (no CurrentLeader is ever set).
//
// Skipped: choosing a preferred read replica for the client (KIP-392's
// replica.selector.class; Kafka's default selects none, so the leader
// serves, as here), throttling.
//
// Zero copy: record batches are never copied by the broker. A partition's
// batches stay file regions (log.Read), pinned (log.Pin) from the answer
// until the environment has sent them, and the response is encoded by the
// broker's own encoder (fetch_encode.go) into an env.Frame whose regions
// realnet sends with sendfile (SPEC.md §2.2, §7.5). The metadata-log Fetch
// (core/controller) still answers with a kmsg response.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/metadata"
	"strand/core/replica"
)

// fetchWaiter is a parked Fetch.
type fetchWaiter struct {
	conn  env.ConnID
	corr  int32
	req   *kmsg.FetchRequest
	timer env.Timer
	parts []parkedPartition
	// session is what the fetch does with fetch sessions once answered.
	session fetchSessionUse
	// parked is set while w is in the purgatory (the partition manager's
	// fetchWaiters and its partitions').
	parked bool
}

// parkedPartition is what a parked fetch waits on in one partition: its
// leader epoch and role when parked (a follower serves consumers too) are
// what a change of either is checked against.
type parkedPartition struct {
	p           *partition
	leaderEpoch int32
	role        replica.Role
	fetchOffset int64
	maxBytes    int32
}

// followerReadVersionMin is the first Fetch version whose consumer fetches
// a follower serves. Kafka's FetchParams.fetchOnlyLeader is isFromFollower
// || (isFromConsumer && clientMetadata empty), and KafkaApis builds the
// client metadata (rack id, KIP-392) for every request from v11, whatever
// its rack id.
const followerReadVersionMin = 11

func (pm *partitionManager) handleFetch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.FetchRequest) {
	if req.Version >= 15 {
		req.ReplicaID = req.ReplicaState.ID // v15 moved it (KIP-903)
	}
	pm.resolveTopicIDs(req)
	use, exec, errorCode := pm.openFetchSession(hdr.ClientID, req)
	if errorCode != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errorCode
		pm.replyFetch(conn, hdr.CorrelationID, fetchAnswer{resp: resp})
		return
	}
	answer, bytes, answerNow := pm.executeFetch(exec, true, pm.fetchDenied(exec))
	if answerNow || exec.MaxWaitMillis <= 0 || bytes >= int64(exec.MinBytes) || pm.purgatoryFull(answer.partitions) {
		pm.replyFetch(conn, hdr.CorrelationID, pm.closeFetchSession(use, exec, answer))
		return
	}
	pm.parkFetch(conn, hdr.CorrelationID, exec, use, answer.partitions)
}

// fetchAnswer is a Fetch response whose record batches are still regions:
// records holds one entry per partition of resp, in order, and partitions
// (when asked for) the hosted partition each names (nil when not hosted),
// so that parking the fetch need not look them up again.
type fetchAnswer struct {
	resp       *kmsg.FetchResponse
	records    []partitionRecords
	partitions []*partition
}

// replyFetch pins the answer's regions, encodes it and hands the frame to
// the network, which releases the pins once the regions are sent.
func (pm *partitionManager) replyFetch(conn env.ConnID, corr int32, a fetchAnswer) {
	var releases []func()
	for _, r := range a.records {
		if len(r.regions) > 0 {
			releases = append(releases, r.log.Pin(r.regions))
		}
	}
	frame := fetchFrame(corr, a.resp, a.records)
	if len(releases) > 0 {
		frame.Release = func() {
			for _, release := range releases {
				release()
			}
		}
	}
	pm.net.ReplyFrame(conn, corr, frame)
}

// fetchDenied are the topics of a consumer's fetch its principal may not
// READ (nil when none): they are answered TOPIC_AUTHORIZATION_FAILED, so
// the fetch is answered at once and never parks. A replica's fetch was
// authorized whole (CLUSTER_ACTION).
func (pm *partitionManager) fetchDenied(req *kmsg.FetchRequest) map[string]bool {
	if req.ReplicaID >= 0 {
		return nil
	}
	var denied map[string]bool
	for _, t := range req.Topics {
		if t.Topic == "" || denied[t.Topic] || pm.acls.current.topic(acl.Read, t.Topic) {
			continue
		}
		if denied == nil {
			denied = map[string]bool{}
		}
		denied[t.Topic] = true
	}
	return denied
}

// executeFetch builds the answer to req from the logs as they are now; it
// pins nothing, so an answer that is dropped (the fetch parks) costs nothing.
// answerNow is set when some partition failed or diverged: Kafka answers
// those without waiting. keepPartitions fills answer.partitions, for a
// fetch that may park. The partitions of denied topics are answered
// TOPIC_AUTHORIZATION_FAILED without reading them.
func (pm *partitionManager) executeFetch(req *kmsg.FetchRequest, keepPartitions bool, denied map[string]bool) (answer fetchAnswer, bytes int64, answerNow bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	answer.resp = resp
	remaining := int64(req.MaxBytes)
	if remaining <= 0 {
		remaining = replicaFetchResponseMaxBytes
	}
	minOneBatch := true
	count := 0
	for _, t := range req.Topics {
		count += len(t.Partitions)
	}
	// One backing array for every topic's partitions: a replica fetch
	// names many partitions, and this runs for every fetch answered.
	partitions := make([]kmsg.FetchResponseTopicPartition, 0, count)
	answer.records = make([]partitionRecords, 0, count)
	if keepPartitions {
		answer.partitions = make([]*partition, 0, count)
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		start := len(partitions)
		byID := req.Version >= fetchTopicIDVersionMin
		for _, fp := range t.Partitions {
			p := pm.partitions[partitionKey{t.Topic, fp.Partition}]
			var rp kmsg.FetchResponseTopicPartition
			var records partitionRecords
			switch {
			case byID && t.Topic == "":
				rp = fetchPartitionError(fp.Partition, kerr.UnknownTopicID.Code)
				p = nil
			case denied[t.Topic]:
				rp = fetchPartitionError(fp.Partition, codeTopicAuthorization)
				p = nil
			case byID && p != nil && p.topicID != metadata.TopicID(t.TopicID):
				rp = fetchPartitionError(fp.Partition, kerr.InconsistentTopicID.Code)
				p = nil
			default:
				rp, records = pm.fetchPartition(req, p, t.Topic, fp, &remaining, &minOneBatch)
			}
			if rp.ErrorCode != 0 || rp.DivergingEpoch.Epoch >= 0 {
				answerNow = true
			}
			bytes += records.bytes()
			partitions = append(partitions, rp)
			answer.records = append(answer.records, records)
			if keepPartitions {
				answer.partitions = append(answer.partitions, p)
			}
		}
		rt.Partitions = partitions[start:len(partitions):len(partitions)]
		resp.Topics = append(resp.Topics, rt)
	}
	return answer, bytes, answerNow
}

// fetchPartition answers one partition of req and finds its records, as
// regions of the partition's log; p is the hosted partition fp names, nil
// if none.
func (pm *partitionManager) fetchPartition(req *kmsg.FetchRequest, p *partition, topic string, fp kmsg.FetchRequestTopicPartition, remaining *int64, minOneBatch *bool) (kmsg.FetchResponseTopicPartition, partitionRecords) {
	replicaID := req.ReplicaID
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = fp.Partition
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	// An empty record set, never null: librdkafka rejects a null one
	// ("invalid MessageSetSize -1") and retries forever. Kafka sends empty.
	rp.RecordBatches = []byte{}
	switch {
	case p == nil:
		rp.ErrorCode = pm.notHostedCode(partitionKey{topic, fp.Partition})
		return rp, partitionRecords{}
	case p.storageFailed():
		rp.ErrorCode = kerr.KafkaStorageError.Code
		return rp, partitionRecords{}
	}
	var d replica.FetchDecision
	if replicaID >= 0 {
		hwBefore := p.replica.HighWatermark()
		d = p.replica.OnFollowerFetch(replica.FetchRequest{
			// Fetch v12 carries no broker epoch (ReplicaState is v15+).
			ReplicaID: replicaID, ReplicaEpoch: -1, FetchOffset: fp.FetchOffset, CurrentLeaderEpoch: fp.CurrentLeaderEpoch,
			LastFetchedEpoch: fp.LastFetchedEpoch, LogStartOffset: fp.LogStartOffset,
		}, pm.nowMs())
		defer pm.afterFollowerFetch(p, hwBefore)
	} else if req.Version >= followerReadVersionMin {
		d = p.replica.OnConsumerFetchAnyReplica(fp.FetchOffset, fp.CurrentLeaderEpoch)
	} else {
		d = p.replica.OnConsumerFetch(fp.FetchOffset, fp.CurrentLeaderEpoch)
	}
	rp.ErrorCode = d.Error
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = d.HighWatermark, d.HighWatermark, d.LogStartOffset
	if d.Diverging {
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = d.DivergingEpoch.Epoch, d.DivergingEpoch.EndOffset
	}
	if !d.ShouldRead() {
		return rp, partitionRecords{}
	}
	limit := min(int64(max(fp.PartitionMaxBytes, 0)), *remaining)
	if limit <= 0 && !*minOneBatch {
		return rp, partitionRecords{}
	}
	res, err := p.log.Read(d.ReadFromOffset, int32(min(limit, int64(1<<31-1))), d.ReadToOffset, *minOneBatch)
	if err != nil {
		rp.ErrorCode = errorCodeOf(err)
		return rp, partitionRecords{}
	}
	records := partitionRecords{log: p.log, regions: res.Regions}
	if bytes := records.bytes(); bytes > 0 {
		*remaining -= bytes
		*minOneBatch = false
	}
	return rp, records
}

// afterFollowerFetch is afterReplicaChange after a follower's fetch of p.
// Of what a parked fetch watches (fetchReady: role, leader epoch, LEO, HW,
// log failure), a follower's fetch moves at most the HW, or fails the log
// when its read hits an I/O error, so the parked fetches on p are
// re-checked only then (a failed log answers them KAFKA_STORAGE_ERROR at
// once, not at their MaxWait). A replica fetch names every partition the
// two brokers share; waking each one re-checked the other followers'
// parked fetches, each walking its own partitions: with 333 idle
// partitions, about 10^5 partition checks per fetch.
func (pm *partitionManager) afterFollowerFetch(p *partition, hwBefore int64) {
	pm.settleReplicaChange(p, p.replica.HighWatermark() != hwBefore || p.storageFailed())
}

// parkFetch waits for data, for at most MaxWaitMillis; partitions are the
// hosted partitions req names, in order (fetchAnswer.partitions).
func (pm *partitionManager) parkFetch(conn env.ConnID, corr int32, req *kmsg.FetchRequest, use fetchSessionUse, partitions []*partition) {
	w := &fetchWaiter{conn: conn, corr: corr, req: req, session: use, parked: true}
	i := 0
	for _, t := range req.Topics {
		for _, fp := range t.Partitions {
			p := partitions[i]
			if p != nil && p.retired { // retired while the fetch ran
				p = pm.partitions[p.key]
			}
			if p != nil {
				// A partition named twice is watched once: w is then the
				// last of its waiters, as nothing else parks meanwhile.
				if last := len(p.fetchWaiters) - 1; last < 0 || p.fetchWaiters[last] != w {
					p.fetchWaiters = append(p.fetchWaiters, w)
				}
				w.parts = append(w.parts, parkedPartition{p: p, leaderEpoch: p.replica.LeaderEpoch(), role: p.replica.Role(),
					fetchOffset: fp.FetchOffset, maxBytes: fp.PartitionMaxBytes})
			}
			i++
		}
	}
	w.timer = pm.after(int64(req.MaxWaitMillis), func() {
		if pm.removeFetchWaiter(w) {
			pm.answerFetch(w)
		}
	})
	pm.fetchWaiters = append(pm.fetchWaiters, w)
}

// purgatoryFull reports whether parking a fetch of partitions (the hosted
// ones it names; nil for the others) would exceed
// strand.purgatory.requests.max, or strand.purgatory.requests.per.partition.max
// on one of its partitions (CLARIFICATIONS.md, "Validation and limits").
// Acks=all produces are bounded per partition by core/replica.
func (pm *partitionManager) purgatoryFull(partitions []*partition) bool {
	limits := pm.cfg.Broker.Limits
	if len(pm.fetchWaiters) >= int(limits.PurgatoryRequestsMax) {
		return true
	}
	for _, p := range partitions {
		if p != nil && len(p.fetchWaiters)+p.replica.AckWaiters() >= int(limits.PurgatoryRequestsPerPartitionMax) {
			return true
		}
	}
	return false
}

// removeFetchWaiter takes w out of the purgatory; it reports false when w
// had already left it (answered, timed out or its connection closed).
func (pm *partitionManager) removeFetchWaiter(w *fetchWaiter) bool {
	if !w.parked {
		return false
	}
	w.parked = false
	pm.fetchWaiters = removeWaiter(pm.fetchWaiters, w)
	for _, pp := range w.parts {
		pp.p.fetchWaiters = removeWaiter(pp.p.fetchWaiters, w)
	}
	return true
}

// handleClosed takes the fetches parked for conn out of the purgatory.
func (pm *partitionManager) handleClosed(conn env.ConnID) {
	var closed []*fetchWaiter
	for _, w := range pm.fetchWaiters {
		if w.conn == conn {
			closed = append(closed, w)
		}
	}
	for _, w := range closed {
		w.timer.Stop()
		pm.removeFetchWaiter(w)
	}
}

// removeWaiter removes w from list, keeping the order of the others.
func removeWaiter(list []*fetchWaiter, w *fetchWaiter) []*fetchWaiter {
	for i, x := range list {
		if x == w {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

func (pm *partitionManager) answerFetch(w *fetchWaiter) {
	answer, _, _ := pm.executeFetch(w.req, false, nil) // a fetch with a denied topic never parks
	pm.replyFetch(w.conn, w.corr, pm.closeFetchSession(w.session, w.req, answer))
}

// wakeFetchWaiters re-checks the parked fetches waiting on p, whose HW, LEO,
// role or log changed: only those can have become ready (Kafka's fetch
// purgatory keys its watchers by partition the same way). Answering a
// replica's fetch may itself move another partition's HW and call back
// here; the nested call only queues that partition for the running pass.
func (pm *partitionManager) wakeFetchWaiters(p *partition) {
	if !p.wakeQueued {
		p.wakeQueued = true
		pm.wakeQueue = append(pm.wakeQueue, p)
	}
	pm.drainWakes()
}

// wakeAllFetchWaiters re-checks every parked fetch, for changes that may
// touch partitions without waking them one by one (metadata applied,
// partitions retired or replaced).
func (pm *partitionManager) wakeAllFetchWaiters() {
	pm.wakeAll = true
	pm.drainWakes()
}

// drainWakes answers the ready parked fetches among those asked for, until
// no more are asked for. Within a partition, fetches are checked in the
// order they were parked.
func (pm *partitionManager) drainWakes() {
	if pm.waking {
		return // the running pass picks the new request up
	}
	pm.waking = true
	defer func() { pm.waking = false }()
	for {
		var candidates []*fetchWaiter
		var woken *partition
		switch {
		case pm.wakeAll:
			pm.wakeAll = false
			// The full pass covers every queued partition.
			for _, p := range pm.wakeQueue {
				p.wakeQueued = false
			}
			pm.wakeQueue = pm.wakeQueue[:0]
			candidates = append(candidates, pm.fetchWaiters...)
		case len(pm.wakeQueue) > 0:
			p := pm.wakeQueue[0]
			pm.wakeQueue = pm.wakeQueue[1:]
			if len(pm.wakeQueue) == 0 {
				pm.wakeQueue = pm.wakeQueue[:0:cap(pm.wakeQueue)]
			}
			p.wakeQueued = false
			woken = p
			candidates = append(candidates, p.fetchWaiters...)
		default:
			return
		}
		for _, w := range candidates {
			if w.parked && pm.fetchReady(w, woken) && pm.removeFetchWaiter(w) {
				w.timer.Stop()
				pm.answerFetch(w)
			}
		}
	}
}

// fetchReady reports whether a parked fetch should be answered now. It
// only reads, and stops at the first partition that settles it: it runs
// on every wake of every parked fetch, so it avoids log reads where the
// log's offsets decide (the fetch runs again when answered). woken, when
// not nil, is the partition whose change caused the check: it is looked
// at first, as it is the one likely to have become ready. Only the cost
// depends on the order: every partition that settles the answer settles
// it as ready, and the bytes only add up.
func (pm *partitionManager) fetchReady(w *fetchWaiter, woken *partition) bool {
	minBytes := max(int64(w.req.MinBytes), 1) // an empty answer never counts
	var bytes int64
	first := -1
	if woken != nil {
		for i, pp := range w.parts {
			if pp.p == woken {
				ready, b := pm.partitionReady(w, pp, minBytes)
				if ready || b >= minBytes {
					return true
				}
				first, bytes = i, b
				break
			}
		}
	}
	for i, pp := range w.parts {
		if i == first {
			continue // counted above
		}
		ready, b := pm.partitionReady(w, pp, minBytes)
		if bytes += b; ready || bytes >= minBytes {
			return true
		}
	}
	return false
}

// partitionReady looks at one partition of a parked fetch: ready is set
// when it alone makes the fetch ready (it changed role, epoch or log, or
// has data and minBytes is 1); otherwise bytes is what a read of it would
// return now (0 when nothing is above the fetch offset). Only a leader's
// partitions park, and a follower's for a consumer (only those are served
// without an error).
func (pm *partitionManager) partitionReady(w *fetchWaiter, pp parkedPartition, minBytes int64) (ready bool, bytes int64) {
	p := pp.p
	if p.retired || p.storageFailed() || p.replica.LeaderEpoch() != pp.leaderEpoch || p.replica.Role() != pp.role {
		return true, 0
	}
	leo := p.log.LogEndOffset()
	bound := leo
	if w.req.ReplicaID < 0 {
		bound = min(p.replica.HighWatermark(), leo) // a follower's HW may await its clamp after a truncation
	}
	if bound <= pp.fetchOffset {
		return false, 0
	}
	if minBytes == 1 && bound == leo {
		// The batch holding fetchOffset ends below the LEO, a batch
		// boundary, so the read would return it (or fail: the fetch
		// offset fell below the log start): ready either way. A HW
		// below the LEO may cut a batch, so that case reads.
		return true, 0
	}
	res, err := p.log.Read(pp.fetchOffset, max(pp.maxBytes, 1), bound, true)
	if err != nil {
		return true, 0
	}
	return false, res.Bytes()
}

// fetchError answers every partition of req with code.
func fetchError(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, fp := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fetchPartitionError(fp.Partition, code))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchPartitionError is partition's answer with error code and no records.
func fetchPartitionError(partition int32, code int16) kmsg.FetchResponseTopicPartition {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.ErrorCode = partition, code
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	rp.RecordBatches = []byte{} // empty, never null: see fetchPartition
	return rp
}
