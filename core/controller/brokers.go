package controller

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
)

// brokerContact is the soft state of one broker's session, as Kafka's
// BrokerHeartbeatManager keeps it: never in the metadata log.
type brokerContact struct {
	lastContactNs int64
	// metadataOffset is the last CurrentMetadataOffset the broker sent.
	metadataOffset int64
	// shutdownOffset is the offset of the last record that moved
	// leadership away when the broker entered controlled shutdown; it may
	// shut down once it has applied it. -1 when not shutting down.
	shutdownOffset int64
}

// brokerTracker holds the sessions and the one timer that fences brokers
// whose session expired.
type brokerTracker struct {
	contacts map[int32]*brokerContact
	// timer fires at timerDeadlineNs; nil when no broker can expire.
	timer           env.Timer
	timerDeadlineNs int64
}

func newBrokerTracker() brokerTracker {
	return brokerTracker{contacts: map[int32]*brokerContact{}}
}

// touch records a contact from broker id.
func (bt *brokerTracker) touch(id int32, nowNs, metadataOffset int64) *brokerContact {
	ct, ok := bt.contacts[id]
	if !ok {
		ct = &brokerContact{shutdownOffset: -1}
		bt.contacts[id] = ct
	}
	ct.lastContactNs = nowNs
	ct.metadataOffset = max(ct.metadataOffset, metadataOffset)
	return ct
}

// resumeAll starts a fresh session for every unfenced broker of im, as
// Kafka's controller does when it becomes active: a new controller cannot
// know when brokers last heartbeated, so it gives each a full session.
func (bt *brokerTracker) resumeAll(im *metadata.Image, nowNs int64) {
	for _, id := range im.BrokerIDs() {
		if b, _ := im.Broker(id); !b.Fenced {
			bt.touch(id, nowNs, -1)
		}
	}
}

func (bt *brokerTracker) stopTimer() {
	if bt.timer != nil {
		bt.timer.Stop()
		bt.timer = nil
	}
}

// sessionValid reports whether broker id heartbeated within the session
// timeout.
func (c *Controller) sessionValid(id int32, nowNs int64) bool {
	ct, ok := c.brokers.contacts[id]
	return ok && nowNs-ct.lastContactNs < c.cfg.BrokerSessionTimeoutMs*1e6
}

// armExpiryTimer makes the timer fire at the earliest session expiry of an
// unfenced broker.
func (c *Controller) armExpiryTimer() {
	if !c.Active() {
		// The decision just made failed to append (the quorum stopped or
		// leadership went), which ended this controller's term: resigning
		// stopped the timer, and the next active controller arms its own.
		return
	}
	deadline, any := int64(0), false
	// order-independent: a minimum over the map.
	for id, ct := range c.brokers.contacts {
		if b, ok := c.latest.Broker(id); !ok || b.Fenced {
			continue
		}
		d := ct.lastContactNs + c.cfg.BrokerSessionTimeoutMs*1e6
		if !any || d < deadline {
			deadline, any = d, true
		}
	}
	bt := &c.brokers
	if !any || (bt.timer != nil && bt.timerDeadlineNs == deadline) {
		if !any {
			bt.stopTimer()
		}
		return
	}
	bt.stopTimer()
	bt.timerDeadlineNs = deadline
	bt.timer = c.clock.SetTimer(deadline-c.nowNs(), c.fenceExpiredBrokers)
}

// fenceExpiredBrokers fences every unfenced broker whose session expired,
// lowest id first, each in its own batch (as Kafka, so that each fencing's
// elections see the previous one).
func (c *Controller) fenceExpiredBrokers() {
	c.brokers.timer = nil
	if !c.Active() {
		return
	}
	now := c.nowNs()
	for _, id := range slices.Sorted(maps.Keys(c.brokers.contacts)) {
		if !c.Active() {
			return // the last fencing failed to append
		}
		b, ok := c.latest.Broker(id)
		if !ok || b.Fenced || c.sessionValid(id, now) {
			continue
		}
		c.cfg.Log.Info("fencing broker: its session timed out", slog.Int("broker", int(id)),
			slog.Int64("broker_epoch", b.Epoch), slog.Int64("broker_session_timeout_ms", c.cfg.BrokerSessionTimeoutMs))
		t := c.begin()
		c.fenceBroker(t, b)
		t.commit(func() {}, nil)
	}
	c.armExpiryTimer()
}

// fenceBroker adds the records that fence b: the fence itself, then every
// partition it is in the ISR of loses it, with a new leader where it led.
func (c *Controller) fenceBroker(t *txn, b metadata.Broker) {
	t.add(&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceFence})
	c.removeFromISRs(t, b.ID, false)
}

// removeFromISRs removes broker id from every ISR it is in, electing new
// leaders where it led. unclean also drops it from every ELR: it may have
// lost records it had acknowledged (KIP-966).
func (c *Controller) removeFromISRs(t *txn, id int32, unclean bool) {
	var uncleanIDs []int32
	if unclean {
		uncleanIDs = []int32{id}
	}
	for _, p := range c.partitionsWhere(func(s metadata.PartitionState) bool {
		return slices.Contains(s.ISR, id) || (unclean && slices.Contains(s.ELR, id))
	}) {
		if change := c.partitionChange(p.tp, p.state, without(p.state.ISR, id), uncleanIDs); change != nil {
			t.add(change)
		}
	}
}

// partitionAt is one partition and its state in the latest image.
type partitionAt struct {
	tp    metadata.TopicPartition
	state metadata.PartitionState
}

// partitionsWhere lists the partitions of the latest image whose state
// satisfies keep, sorted by topic and partition. Callers add records only
// after listing, so that no record is applied during the iteration.
func (c *Controller) partitionsWhere(keep func(metadata.PartitionState) bool) []partitionAt {
	var out []partitionAt
	c.latest.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		if keep(s) {
			out = append(out, partitionAt{tp: tp, state: s})
		}
	})
	return out
}

func (c *Controller) handleBrokerRegistration(req *kmsg.BrokerRegistrationRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if !c.Active() {
		fail(codeNotController)
		return
	}
	if c.cfg.ClusterID != "" && req.ClusterID != c.cfg.ClusterID {
		fail(kerr.InconsistentClusterID.Code)
		return
	}
	endpoints, ok := endpointsOf(req.Listeners)
	if req.BrokerID < 0 || !ok {
		fail(kerr.InvalidRequest.Code)
		return
	}
	now := c.nowNs()
	old, exists := c.latest.Broker(req.BrokerID)
	if exists && old.IncarnationID == req.IncarnationID {
		// A retry of a registration already made: same answer.
		resp.BrokerEpoch = old.Epoch
		c.afterCommitOf(c.latest.Offset(), func() { reply(resp) }, notController(req, reply))
		return
	}
	if exists && !old.Fenced && c.sessionValid(req.BrokerID, now) {
		// Another process still holds this id (Kafka's
		// DuplicateBrokerRegistrationException); a restarted broker
		// retries until its old session expires.
		fail(kerr.DuplicateBrokerRegistration.Code)
		return
	}
	t := c.begin()
	epoch := t.nextOffset()
	c.cfg.Log.Info("registering broker", slog.Int("broker", int(req.BrokerID)), slog.Int64("broker_epoch", epoch),
		slog.Bool("new_incarnation_of_registered_broker", exists))
	t.add(&metadata.RegisterBrokerRecord{
		BrokerID: req.BrokerID, IncarnationID: req.IncarnationID, BrokerEpoch: epoch,
		Endpoints: endpoints, Fenced: true,
	})
	if exists {
		// The new registration is fenced, so the broker leaves every ISR.
		// It shut down cleanly only if it says so by naming the epoch it
		// had (KAFKA-15586); otherwise it may have lost unflushed records
		// and must leave the ELR too.
		unclean := req.Version < 3 || req.PreviousBrokerEpoch != old.Epoch
		c.removeFromISRs(t, req.BrokerID, unclean)
	}
	ct := c.brokers.touch(req.BrokerID, now, -1)
	ct.metadataOffset, ct.shutdownOffset = -1, -1 // a new process
	resp.BrokerEpoch = epoch
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// endpointsOf converts registered listeners, sorted by name; ok is false if
// a name repeats or is empty.
func endpointsOf(listeners []kmsg.BrokerRegistrationRequestListener) ([]metadata.Endpoint, bool) {
	out := make([]metadata.Endpoint, 0, len(listeners))
	for _, l := range listeners {
		out = append(out, metadata.Endpoint{Listener: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	slices.SortFunc(out, func(a, b metadata.Endpoint) int { return cmp.Compare(a.Listener, b.Listener) })
	for i, e := range out {
		if e.Listener == "" || (i > 0 && out[i-1].Listener == e.Listener) {
			return nil, false
		}
	}
	return out, true
}

// handleBrokerHeartbeat runs Kafka's broker state machine
// (BrokerHeartbeatManager.calculateNextBrokerState):
//
//	fenced:    WantShutdown → shut down now; caught up and not WantFence → unfenced
//	unfenced:  WantFence → fenced; WantShutdown → controlled shutdown (or
//	           shut down now if it leads nothing)
//	controlled shutdown: once it leads nothing and has applied the records
//	           that moved its leadership away → fenced, shut down now
func (c *Controller) handleBrokerHeartbeat(req *kmsg.BrokerHeartbeatRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	if !c.Active() {
		resp.ErrorCode = codeNotController
		reply(resp)
		return
	}
	b, ok := c.latest.Broker(req.BrokerID)
	switch {
	case !ok:
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
	case b.Epoch != req.BrokerEpoch:
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
	}
	if resp.ErrorCode != 0 {
		reply(resp)
		return
	}
	ct := c.brokers.touch(b.ID, c.nowNs(), req.CurrentMetadataOffset)
	caughtUp := req.CurrentMetadataOffset >= b.Epoch
	t := c.begin()
	shutdownNow := false
	switch {
	case b.Fenced:
		shutdownNow = req.WantShutdown || b.InControlledShutdown
		if !shutdownNow && !req.WantFence && caughtUp {
			c.unfenceBroker(t, b)
		}
	case req.WantFence:
		c.fenceBroker(t, b)
	case req.WantShutdown || b.InControlledShutdown:
		if !b.InControlledShutdown {
			c.enterControlledShutdown(t, b)
			ct.shutdownOffset = t.nextOffset() - 1
		}
		if !c.leadsAny(b.ID) && ct.metadataOffset >= ct.shutdownOffset {
			c.fenceBroker(t, b)
			shutdownNow = true
		}
	}
	after, _ := c.latest.Broker(b.ID)
	resp.IsCaughtUp = caughtUp
	resp.IsFenced = after.Fenced
	resp.ShouldShutdown = shutdownNow
	t.commit(func() { reply(resp) }, notController(req, reply))
	c.armExpiryTimer()
}

// unfenceBroker adds the records that unfence b and elect leaders for the
// leaderless partitions it may now lead.
func (c *Controller) unfenceBroker(t *txn, b metadata.Broker) {
	c.cfg.Log.Info("unfencing broker: it caught up with the metadata log", slog.Int("broker", int(b.ID)),
		slog.Int64("broker_epoch", b.Epoch))
	t.add(&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceUnfence})
	for _, p := range c.partitionsWhere(func(s metadata.PartitionState) bool {
		return s.Leader == metadata.NoLeader && slices.Contains(s.Replicas, b.ID)
	}) {
		if change := c.partitionChange(p.tp, p.state, p.state.ISR, nil); change != nil {
			t.add(change)
		}
	}
}

// enterControlledShutdown marks b as shutting down and moves its leadership
// and ISR memberships away (Kafka's handleBrokerInControlledShutdown). A
// partition with no other eligible replica is left without a leader: the
// broker is about to stop anyway.
func (c *Controller) enterControlledShutdown(t *txn, b metadata.Broker) {
	c.cfg.Log.Info("broker entering controlled shutdown", slog.Int("broker", int(b.ID)), slog.Int64("broker_epoch", b.Epoch))
	t.add(&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: true})
	c.removeFromISRs(t, b.ID, false)
}

// leadsAny reports whether broker id leads a partition in the latest image.
func (c *Controller) leadsAny(id int32) bool {
	return len(c.partitionsWhere(func(s metadata.PartitionState) bool { return s.Leader == id })) > 0
}

// brokerRequestError is the error code for a request a broker sends about
// itself (AlterPartition, AllocateProducerIds): NOT_CONTROLLER on a standby,
// then the broker epoch check; 0 when the request may proceed.
func (c *Controller) brokerRequestError(id int32, epoch int64) int16 {
	if !c.Active() {
		return codeNotController
	}
	return c.checkBrokerEpoch(id, epoch)
}

// checkBrokerEpoch is Kafka's ClusterControlManager.checkBrokerEpoch for
// requests that carry the sender's broker epoch.
func (c *Controller) checkBrokerEpoch(id int32, epoch int64) int16 {
	b, ok := c.latest.Broker(id)
	if !ok || (epoch != -1 && b.Epoch != epoch) {
		return kerr.StaleBrokerEpoch.Code
	}
	return 0
}
