package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
)

// Controller is the metadata controller of one node. It is driven by the
// node's event loop (core/env's contract) and is not safe for concurrent use.
type Controller struct {
	cfg        Config
	clock      env.Clock
	newTopicID func() [16]byte

	// quorum is nil on a node that is not the active controller.
	quorum quorum
	// latest has every appended record applied; committed only the
	// committed ones. Decisions read latest; brokers see committed.
	latest    *metadata.Image
	committed *metadata.Image
	// uncommitted are the records in latest but not yet in committed, in
	// offset order.
	uncommitted []offsetRecord
	// commitWaiters run once the offset they wait for is committed; their
	// offsets never decrease along the queue.
	commitWaiters []commitWaiter
	// applying guards against re-entering applyCommitted.
	applying bool
	// failed is set when the quorum failed: the controller stops serving.
	failed error

	brokers brokerTracker
	fetches fetchWaiters
	// rebalanceTimer runs preferred-leader elections periodically.
	rebalanceTimer env.Timer
}

type offsetRecord struct {
	offset int64
	record metadata.Record
}

type commitWaiter struct {
	// offset must be committed (offset < CommittedOffset) before fn runs.
	offset int64
	fn     func()
}

// New returns the controller of node cfg.NodeID. metadataLog is the opened
// __cluster_metadata-0 log (OpenMetadataLog); it is replayed into the image
// now. newTopicID returns a fresh random topic id: the environment seeds it
// (the simulator from the run's seed, realnet from crypto/rand). On a node
// that is not the active controller metadataLog may be nil.
func New(cfg Config, clock env.Clock, metadataLog *MetadataLog, newTopicID func() [16]byte) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if newTopicID == nil {
		return nil, fmt.Errorf("controller: newTopicID is nil")
	}
	c := &Controller{
		cfg: cfg, clock: clock, newTopicID: newTopicID,
		latest: metadata.NewImage(), committed: metadata.NewImage(),
		brokers: newBrokerTracker(),
	}
	if !cfg.active() {
		return c, nil
	}
	if metadataLog == nil {
		return nil, fmt.Errorf("controller: node %d is the active controller but has no metadata log", cfg.NodeID)
	}
	q := newLocalQuorum(metadataLog, clock, c.onCommit, c.onQuorumFailure)
	c.quorum = q
	if err := q.Replay(c.replayBatch); err != nil {
		return nil, err
	}
	c.brokers.resumeAll(c.latest, c.nowNs())
	c.armExpiryTimer()
	c.armRebalanceTimer()
	q.start()
	return c, nil
}

// replayBatch applies a batch read back from the log at start.
func (c *Controller) replayBatch(b metadata.Batch) error {
	for i, rec := range b.Records {
		offset := b.BaseOffset + int64(i)
		if err := c.latest.Apply(offset, rec); err != nil {
			return err
		}
		c.uncommitted = append(c.uncommitted, offsetRecord{offset: offset, record: rec})
	}
	return nil
}

// Image returns the committed image. Callers must not modify it; it changes
// as records commit.
func (c *Controller) Image() *metadata.Image { return c.committed }

// Active reports whether this node is the active controller.
func (c *Controller) Active() bool { return c.quorum != nil && c.failed == nil }

// Err returns the failure that stopped the controller, or nil.
func (c *Controller) Err() error { return c.failed }

// CommittedOffset is the offset after the last committed record, or 0 on a
// node that is not the active controller.
func (c *Controller) CommittedOffset() int64 {
	if c.quorum == nil {
		return 0
	}
	return c.quorum.CommittedOffset()
}

func (c *Controller) nowNs() int64 { return c.clock.MonotonicNs() }

// Handles reports whether req is a controller request: one HandleRequest
// answers. A node routes these to its controller.
func Handles(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.AlterPartitionRequest,
		*kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest, *kmsg.CreatePartitionsRequest,
		*kmsg.AllocateProducerIDsRequest:
		return true
	case *kmsg.FetchRequest:
		return isMetadataFetch(r)
	}
	return false
}

// HandleRequest handles one controller request (Handles(req) must be true)
// and calls reply once with its response, now or after the records it
// caused commit (never if the controller stops first, see Close). On a node that is not the active controller every
// request is answered NOT_CONTROLLER (NOT_LEADER_OR_FOLLOWER for Fetch).
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
	case *kmsg.FetchRequest:
		c.handleFetch(r, reply)
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
// record appended before them, are committed.
func (t *txn) commit(then func()) {
	c := t.c
	if len(t.records) > 0 {
		base, err := c.quorum.Append(t.records)
		if err != nil {
			// onQuorumFailure has stopped the controller; the caller's
			// client times out, as with a crashed controller.
			return
		}
		if base != t.base {
			panic(fmt.Sprintf("controller: batch appended at %d, expected %d", base, t.base))
		}
		for i, rec := range t.records {
			c.uncommitted = append(c.uncommitted, offsetRecord{offset: base + int64(i), record: rec})
		}
	}
	c.afterCommitOf(c.latest.Offset(), then)
	c.applyCommitted()
}

// afterCommitOf runs fn once offset is committed (at once if it is).
func (c *Controller) afterCommitOf(offset int64, fn func()) {
	if offset < c.quorum.CommittedOffset() {
		fn()
		return
	}
	if n := len(c.commitWaiters); n > 0 && c.commitWaiters[n-1].offset > offset {
		panic(fmt.Sprintf("controller: commit waiter for %d queued after one for %d", offset, c.commitWaiters[n-1].offset))
	}
	c.commitWaiters = append(c.commitWaiters, commitWaiter{offset: offset, fn: fn})
}

// onCommit is the quorum's commit callback.
func (c *Controller) onCommit(int64) { c.applyCommitted() }

// applyCommitted applies newly committed records to the committed image,
// then answers the requests waiting for them and wakes metadata fetches.
func (c *Controller) applyCommitted() {
	if c.applying || c.quorum == nil {
		return
	}
	c.applying = true
	defer func() { c.applying = false }()
	committedEnd := c.quorum.CommittedOffset()
	n := 0
	for ; n < len(c.uncommitted) && c.uncommitted[n].offset < committedEnd; n++ {
		r := c.uncommitted[n]
		if err := c.committed.Apply(r.offset, r.record); err != nil {
			panic(fmt.Sprintf("controller: committed record does not apply: %v", err))
		}
	}
	c.uncommitted = c.uncommitted[n:]
	w := 0
	for ; w < len(c.commitWaiters) && c.commitWaiters[w].offset < committedEnd; w++ {
	}
	ready := c.commitWaiters[:w]
	c.commitWaiters = c.commitWaiters[w:]
	for _, waiter := range ready {
		waiter.fn()
	}
	if n > 0 {
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
	c.commitWaiters = nil
	c.brokers.stopTimer()
	if c.rebalanceTimer != nil {
		c.rebalanceTimer.Stop()
	}
	c.fetches.dropAll()
}
