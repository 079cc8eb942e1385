package controller

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
	"strand/core/quorum"
)

// Controller is the metadata controller of one voter. It is driven by the
// node's event loop (core/env's contract) and is not safe for concurrent use.
type Controller struct {
	cfg        Config
	clock      env.Clock
	newTopicID func() [16]byte

	quorum Quorum
	// active is set while this node leads the quorum and its epoch's
	// leader-change entry has committed: only then does it decide.
	active bool
	// activeEpochStart is the offset of the leader-change entry of the
	// epoch this controller is active in.
	activeEpochStart int64
	// latest has every record this active controller appended applied
	// (nil when not active); committed only the committed ones, read back
	// from the quorum. Decisions read latest; brokers see committed.
	latest    *metadata.Image
	committed *metadata.Image
	// appliedEnd is the quorum offset up to which committed decisions have
	// been applied to committed (aborted decisions count as applied).
	appliedEnd int64
	// commitWaiters run once the offset they wait for is committed; their
	// offsets never decrease along the queue.
	commitWaiters []commitWaiter
	// applying guards against re-entering applyCommitted.
	applying bool
	// failed is set when the quorum failed: the controller stops serving.
	failed error
	// snapshotEnd is the end offset of the latest snapshot taken or
	// loaded; snapshotTimer is set while a snapshot is scheduled.
	snapshotEnd   int64
	snapshotTimer env.Timer

	brokers brokerTracker
	fetches fetchWaiters
	// observers are the brokers following the metadata log, as this
	// active controller has seen them fetch (DescribeQuorum).
	observers observers
	// rebalanceTimer runs preferred-leader elections periodically.
	rebalanceTimer env.Timer
}

type commitWaiter struct {
	// offset must be committed (offset < CommittedOffset) before fn runs.
	offset int64
	fn     func()
	// abort, if not nil, runs instead of fn when this controller stops
	// being active first: it answers NOT_CONTROLLER.
	abort func()
}

// New returns the controller of voter cfg.NodeID over its quorum, which it
// follows from now on: committed decisions build the committed image, and
// the controller becomes active when its node leads and the epoch's first
// entry commits. newTopicID returns a fresh random topic id: the
// environment seeds it (the simulator from the run's seed, realnet from
// crypto/rand).
func New(cfg Config, clock env.Clock, q Quorum, newTopicID func() [16]byte) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if newTopicID == nil {
		return nil, fmt.Errorf("controller: newTopicID is nil")
	}
	if q == nil {
		return nil, fmt.Errorf("controller: no quorum")
	}
	c := &Controller{
		cfg: cfg, clock: clock, newTopicID: newTopicID, quorum: q,
		committed: metadata.NewImage(), appliedEnd: q.LogStartOffset(),
		brokers: newBrokerTracker(),
	}
	q.Listen(c.onCommit, c.onQuorumChange, c.onQuorumFailure, c.onSnapshot)
	c.applyCommitted()
	return c, nil
}

// onSnapshot is the quorum's snapshot callback: at start, the latest
// durable snapshot; later, one the leader sent because this voter fell
// behind its log start. It replaces the committed image.
func (c *Controller) onSnapshot(snap *quorum.Snapshot) {
	im, err := metadata.DecodeSnapshot(snap.Data)
	if err != nil {
		c.stop(fmt.Errorf("controller: load snapshot %d-%d: %w", snap.EndOffset, snap.Epoch, err))
		return
	}
	if c.active {
		c.resign() // a leader is never sent a snapshot; be safe
	}
	c.committed, c.appliedEnd, c.snapshotEnd = im, snap.EndOffset, snap.EndOffset
}

// maybeScheduleSnapshot schedules a snapshot once enough records committed
// since the last. It runs as its own event: the quorum accepts a snapshot
// only of entries it has handed out completely, which is so between events.
func (c *Controller) maybeScheduleSnapshot() {
	if c.snapshotTimer != nil || c.appliedEnd-c.snapshotEnd < c.cfg.SnapshotIntervalRecords {
		return
	}
	c.snapshotTimer = c.clock.SetTimer(0, func() {
		c.snapshotTimer = nil
		if c.failed != nil || c.appliedEnd <= c.snapshotEnd {
			return
		}
		if err := c.quorum.TakeSnapshot(c.appliedEnd, c.committed.EncodeSnapshot()); err == nil {
			c.snapshotEnd = c.appliedEnd
		}
		// Otherwise the previous snapshot is still being persisted: the
		// next commit schedules another try.
	})
}

// onQuorumChange follows leadership: a controller whose node no longer
// leads the epoch it became active in resigns.
func (c *Controller) onQuorumChange() {
	if !c.active {
		return
	}
	if start, ok := c.quorum.LeaderEpochStart(); !ok || start != c.activeEpochStart {
		c.resign()
	}
}

// maybeActivate makes this controller active once its node leads and its
// epoch's leader-change entry is committed: then every earlier entry is
// committed too, so the latest image starts as the committed one.
func (c *Controller) maybeActivate() {
	if c.active || c.failed != nil {
		return
	}
	start, ok := c.quorum.LeaderEpochStart()
	if !ok || c.appliedEnd <= start || c.appliedEnd != c.quorum.EndOffset() {
		return
	}
	c.active, c.activeEpochStart = true, start
	c.cfg.Log.Info("became the active controller", slog.Int64("leader_epoch_start_offset", start),
		slog.Int64("committed_offset", c.quorum.CommittedOffset()))
	c.latest = c.committed.Clone()
	c.brokers = newBrokerTracker()
	c.observers = observers{}
	c.brokers.resumeAll(c.latest, c.nowNs())
	c.armExpiryTimer()
	c.armRebalanceTimer()
	c.maybeWriteBootstrap()
}

// resign stops deciding: records not yet committed are forgotten (the new
// leader's log decides whether they survive), waiting requests are answered
// NOT_CONTROLLER so their senders retry at the new controller, and held
// metadata fetches NOT_LEADER_OR_FOLLOWER.
func (c *Controller) resign() {
	c.cfg.Log.Info("resigning as the active controller: the quorum's leadership moved",
		slog.Int("quorum_leader", int(c.quorum.LeaderID())))
	c.active, c.latest = false, nil
	c.brokers.stopTimer()
	if c.rebalanceTimer != nil {
		c.rebalanceTimer.Stop()
		c.rebalanceTimer = nil
	}
	waiters := c.commitWaiters
	c.commitWaiters = nil
	for _, w := range waiters {
		if w.abort != nil {
			w.abort()
		}
	}
	c.fetches.answerAll(c)
}

// Image returns the committed image. Callers must not modify it; it changes
// as records commit.
func (c *Controller) Image() *metadata.Image { return c.committed }

// Active reports whether this node is the active controller.
func (c *Controller) Active() bool { return c.active && c.failed == nil }

// LeaderID is the quorum leader as this node knows it (the active
// controller, or about to be), -1 if unknown.
func (c *Controller) LeaderID() int32 { return c.quorum.LeaderID() }

// Err returns the failure that stopped the controller, or nil.
func (c *Controller) Err() error { return c.failed }

// CommittedOffset is the offset after the last committed decision.
func (c *Controller) CommittedOffset() int64 { return c.quorum.CommittedOffset() }

func (c *Controller) nowNs() int64 { return c.clock.MonotonicNs() }

// Handles reports whether req is a controller request: one HandleRequest
// answers. A node routes these to its controller.
func Handles(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.AlterPartitionRequest,
		*kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest, *kmsg.CreatePartitionsRequest,
		*kmsg.AllocateProducerIDsRequest, *kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest,
		*kmsg.ElectLeadersRequest, *kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest,
		*kmsg.DescribeQuorumRequest:
		return true
	case *kmsg.FetchRequest:
		return isMetadataFetch(r)
	case *kmsg.FetchSnapshotRequest:
		return len(r.Topics) == 1 && r.Topics[0].Topic == MetadataTopic && len(r.Topics[0].Partitions) == 1 &&
			r.Topics[0].Partitions[0].Partition == 0
	}
	return false
}

// HandleRequest handles one controller request (Handles(req) must be true)
// and calls reply once with its response, now or after the records it
// caused commit (never if the controller stops first, see Close). On a node that is not the active controller every
// request is answered NOT_CONTROLLER (NOT_LEADER_OR_FOLLOWER for Fetch and
// DescribeQuorum).
func (c *Controller) HandleRequest(req kmsg.Request, reply func(kmsg.Response)) {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		c.handleBrokerRegistration(r, reply)
	case *kmsg.BrokerHeartbeatRequest:
		c.handleBrokerHeartbeat(r, reply)
	case *kmsg.AlterPartitionRequest:
		c.handleAlterPartition(r, reply)
	case *kmsg.CreateTopicsRequest:
		c.handleCreateTopics(r, reply)
	case *kmsg.DeleteTopicsRequest:
		c.handleDeleteTopics(r, reply)
	case *kmsg.CreatePartitionsRequest:
		c.handleCreatePartitions(r, reply)
	case *kmsg.AllocateProducerIDsRequest:
		c.handleAllocateProducerIDs(r, reply)
	case *kmsg.AlterConfigsRequest:
		c.handleAlterConfigs(r, reply)
	case *kmsg.IncrementalAlterConfigsRequest:
		c.handleIncrementalAlterConfigs(r, reply)
	case *kmsg.ElectLeadersRequest:
		c.handleElectLeaders(r, reply)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		c.handleAlterUserScramCredentials(r, reply)
	case *kmsg.CreateACLsRequest:
		c.handleCreateAcls(r, reply)
	case *kmsg.DeleteACLsRequest:
		c.handleDeleteAcls(r, reply)
	case *kmsg.FetchRequest:
		c.handleFetch(r, reply)
	case *kmsg.FetchSnapshotRequest:
		c.handleFetchSnapshot(r, reply)
	case *kmsg.DescribeQuorumRequest:
		c.handleDescribeQuorum(r, reply)
	default:
		panic(fmt.Sprintf("controller: HandleRequest called with %T, which Handles rejects", req))
	}
}

var codeNotController = kerr.NotController.Code

// txn collects the records of one decision. Each record is applied to the
// latest image as it is added, at the offset it will get, so that later
// records of the same decision see its effect.
type txn struct {
	c       *Controller
	base    int64
	records []metadata.Record
}

func (c *Controller) begin() *txn {
	return &txn{c: c, base: c.quorum.EndOffset()}
}

// add applies rec to the latest image and queues it. The controller built
// rec from that image, so a rejection is a bug in the controller.
func (t *txn) add(rec metadata.Record) {
	offset := t.base + int64(len(t.records))
	if err := t.c.latest.Apply(offset, rec); err != nil {
		panic(fmt.Sprintf("controller: generated a record its own image rejects: %v", err))
	}
	t.records = append(t.records, rec)
}

// nextOffset is the offset the next added record will get.
func (t *txn) nextOffset() int64 { return t.base + int64(len(t.records)) }

// commit appends the records (if any) and runs then once they, and every
// record appended before them, are committed; abort (if not nil) runs
// instead if this controller stops being active first.
func (t *txn) commit(then, abort func()) {
	c := t.c
	if len(t.records) > 0 {
		base, err := c.quorum.Append(t.records)
		if err != nil {
			// Leadership is gone (or the quorum failed, which stopped
			// the controller): the records are dropped with latest.
			if c.active {
				c.resign()
			}
			if abort != nil {
				abort()
			}
			return
		}
		if !c.Active() {
			// The quorum's callbacks, run inside the Append, ended this
			// term (its storage failed, or leadership went): the records
			// went with latest, and the new controller's log decides.
			if abort != nil {
				abort()
			}
			return
		}
		if base != t.base {
			panic(fmt.Sprintf("controller: batch appended at %d, expected %d", base, t.base))
		}
	}
	c.afterCommitOf(c.latest.Offset(), then, abort)
	c.applyCommitted()
}

// afterCommitOf runs fn once offset is committed (at once if it is), or
// abort if this controller resigns first.
func (c *Controller) afterCommitOf(offset int64, fn, abort func()) {
	if offset < c.quorum.CommittedOffset() {
		fn()
		return
	}
	if n := len(c.commitWaiters); n > 0 && c.commitWaiters[n-1].offset > offset {
		panic(fmt.Sprintf("controller: commit waiter for %d queued after one for %d", offset, c.commitWaiters[n-1].offset))
	}
	c.commitWaiters = append(c.commitWaiters, commitWaiter{offset: offset, fn: fn, abort: abort})
}

// notController returns an abort for a waiting request: it answers
// NOT_CONTROLLER.
func notController(req kmsg.Request, reply func(kmsg.Response)) func() {
	return func() { reply(notControllerResponse(req)) }
}

// onCommit is the quorum's commit callback.
func (c *Controller) onCommit() { c.applyCommitted() }

// applyCommitted applies newly committed decisions to the committed image,
// then answers the requests waiting for them, wakes metadata fetches, and
// activates the controller if its epoch's first entry is now committed.
func (c *Controller) applyCommitted() {
	if c.applying || c.failed != nil {
		return
	}
	c.applying = true
	defer func() { c.applying = false }()
	committedEnd := c.quorum.CommittedOffset()
	before := c.appliedEnd
	if committedEnd > c.appliedEnd {
		err := c.quorum.CommittedBatches(c.appliedEnd, func(b metadata.Batch) error {
			for i, rec := range b.Records {
				if err := c.committed.Apply(b.BaseOffset+int64(i), rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			c.stop(fmt.Errorf("controller: committed metadata does not apply: %w", err))
			return
		}
		c.appliedEnd = committedEnd
		c.maybeScheduleSnapshot()
	}
	w := 0
	for ; w < len(c.commitWaiters) && c.commitWaiters[w].offset < committedEnd; w++ {
	}
	ready := c.commitWaiters[:w]
	c.commitWaiters = c.commitWaiters[w:]
	for _, waiter := range ready {
		waiter.fn()
	}
	c.maybeActivate()
	if c.appliedEnd > before {
		c.fetches.wake(c)
	}
}

// errClosed is the failure of a controller stopped by Close.
var errClosed = errors.New("controller closed")

// Close stops the controller: its timers are cancelled, waiting requests
// are dropped, and later requests are answered NOT_CONTROLLER. It does not
// close the metadata log, which the caller opened.
func (c *Controller) Close() {
	if c.failed == nil {
		c.stop(errClosed)
	}
}

// onQuorumFailure stops the controller: the metadata log can no longer be
// written, so no decision can commit. Waiting requests are dropped (their
// clients time out) and new ones are answered NOT_CONTROLLER.
func (c *Controller) onQuorumFailure(err error) { c.stop(err) }

func (c *Controller) stop(err error) {
	c.failed = err
	c.active, c.latest = false, nil
	c.commitWaiters = nil
	c.brokers.stopTimer()
	if c.rebalanceTimer != nil {
		c.rebalanceTimer.Stop()
	}
	c.fetches.dropAll()
	if c.snapshotTimer != nil {
		c.snapshotTimer.Stop()
		c.snapshotTimer = nil
	}
}
