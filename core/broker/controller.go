package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/replica"
)

// controller is the controller role of the active controller node: a
// single-voter quorum (design-broker.md) holding the metadata log
// __cluster_metadata-0 on the node's first log directory.
//
// It is interim: core/controller (the controller helper's package, not yet
// landed) replaces it, behind the same RPCs, and Raft later replaces the
// quorum. Until then it does what brokers need: registration and heartbeats
// with fencing, topic creation with balanced placement, AlterPartition, and
// leader election on fencing with core/replica's pure election functions.
//
// Records are applied to a working image when proposed (so later proposals
// see them) and count as committed when the Sync of their append completes
// (persist before acknowledge). Brokers see only committed records.
type controller struct {
	n   *Node
	log *log.Log
	// image holds every record appended, committed or not.
	image *metadata.Image
	// committedOffset is the offset after the last committed record: the
	// metadata log's HW, up to which brokers may fetch.
	committedOffset int64
	pending         []proposal
	sessions        map[int32]*brokerSession
	metaWaiters     []*metadataWaiter
	// placementCursor rotates where each new topic's first replica goes,
	// so leaders spread across brokers.
	placementCursor int
	// failed is set when a metadata append or Sync failed: the controller
	// stops accepting proposals (no retried fsync, CLARIFICATIONS.md).
	failed error
}

// proposal is an appended batch waiting for its Sync.
type proposal struct {
	batch metadata.Batch
	done  func()
}

// brokerSession is the controller's liveness view of one broker.
type brokerSession struct {
	lastHeartbeatMs int64
}

// brokerRegistration is what a broker registers with.
type brokerRegistration struct {
	id          int32
	incarnation [16]byte
	endpoints   []metadata.Endpoint
}

// metadataWaiter is a broker's metadata fetch parked until new commits.
type metadataWaiter struct {
	conn  env.ConnID
	corr  int32
	req   *kmsg.FetchRequest
	timer env.Timer
}

// metadataWaitersMax bounds parked metadata fetches (one per broker is the
// normal load).
const metadataWaitersMax = 1024

// newController opens (recovering) the metadata log and replays it into
// its image. It returns the replayed batches, which the node's broker role
// applies too: everything that survived recovery counts as committed.
func newController(n *Node, disk env.Disk) (*controller, []metadata.Batch, error) {
	l, err := log.Open(disk, metadataTopic+"-0", log.DefaultConfig(), log.OpenOptions{NowMs: n.wallMs()})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: open metadata log: %w", err)
	}
	c := &controller{n: n, log: l, image: metadata.NewImage(), sessions: map[int32]*brokerSession{}}
	batches, err := c.readCommitted(0, l.LogEndOffset())
	if err != nil {
		return nil, nil, fmt.Errorf("controller: replay metadata log: %w", err)
	}
	for _, b := range batches {
		if err := c.image.ApplyBatch(b); err != nil {
			return nil, nil, fmt.Errorf("controller: replay metadata log at %d: %w", b.BaseOffset, err)
		}
	}
	c.committedOffset = l.LogEndOffset()
	now := n.nowMs()
	for _, id := range c.image.BrokerIDs() {
		c.sessions[id] = &brokerSession{lastHeartbeatMs: now}
	}
	c.scheduleSessionCheck()
	return c, batches, nil
}

// readCommitted decodes the metadata log between two offsets.
func (c *controller) readCommitted(from, to int64) ([]metadata.Batch, error) {
	var out []metadata.Batch
	for from < to {
		res, err := c.log.Read(from, replicaFetchResponseMaxBytes, to, true)
		if err != nil {
			return nil, err
		}
		raw, err := log.CopyRegions(res.Regions)
		if err != nil {
			return nil, err
		}
		batches, err := metadata.DecodeBatches(raw)
		if err != nil {
			return nil, err
		}
		if len(batches) == 0 {
			break
		}
		out = append(out, batches...)
		from = res.NextOffset
	}
	return out, nil
}

// propose appends records as one batch. They are applied to the working
// image at once and done runs once they are committed. It returns an error,
// appending nothing, if the records do not apply or the log has failed.
func (c *controller) propose(records []metadata.Record, done func()) error {
	if c.failed != nil {
		return c.failed
	}
	next := c.image.Clone()
	base := c.log.LogEndOffset()
	for i, rec := range records {
		if err := next.Apply(base+int64(i), rec); err != nil {
			return fmt.Errorf("controller: record %d (%s): %w", i, rec.Type(), err)
		}
	}
	res, err := c.log.AppendAsLeader(metadata.EncodeBatch(records, c.n.wallMs()), 0, c.n.wallMs())
	if err != nil {
		c.failed = err
		return err
	}
	if res.BaseOffset != base {
		panic(fmt.Sprintf("controller: metadata append at %d, expected %d", res.BaseOffset, base))
	}
	c.image = next
	c.pending = append(c.pending, proposal{
		batch: metadata.Batch{BaseOffset: base, NextOffset: res.LastOffset + 1, Records: records},
		done:  done,
	})
	c.log.Flush(res.LastOffset+1, c.onFlushed)
	return nil
}

// onFlushed commits every proposal the recovery point now covers.
func (c *controller) onFlushed(err error) {
	if err != nil {
		c.failed = err
		return
	}
	for len(c.pending) > 0 && c.pending[0].batch.NextOffset <= c.log.RecoveryPoint() {
		p := c.pending[0]
		c.pending = c.pending[1:]
		c.committedOffset = p.batch.NextOffset
		if c.n.cfg.Broker.Roles.Broker {
			c.n.applyMetadata([]metadata.Batch{p.batch})
		}
		if p.done != nil {
			p.done()
		}
	}
	c.wakeMetadataWaiters()
}

// policy is the election policy of every partition.
func (c *controller) policy() replica.ELRPolicy {
	b := c.n.cfg.Broker
	return replica.ELRPolicy{MinInsyncReplicas: int(b.MinInsyncReplicas), ELREnabled: true, UncleanEnabled: b.UncleanLeaderElectionEnable}
}

// usable reports whether broker id may lead or join an ISR: registered,
// unfenced, not shutting down (KIP-841).
func (c *controller) usable(id int32) bool {
	b, ok := c.image.Broker(id)
	return ok && !b.Fenced && !b.InControlledShutdown
}

// handleMetadataFetch serves a broker's fetch of __cluster_metadata-0 up to
// the commit offset, parking it while there is nothing new.
func (c *controller) handleMetadataFetch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.FetchRequest) {
	fp := req.Topics[0].Partitions
	if len(fp) != 1 || fp[0].Partition != 0 {
		c.n.net.Reply(conn, hdr.CorrelationID, fetchError(req, kerr.UnknownTopicOrPartition.Code))
		return
	}
	if fp[0].FetchOffset == c.committedOffset && req.MaxWaitMillis > 0 && len(c.metaWaiters) < metadataWaitersMax {
		w := &metadataWaiter{conn: conn, corr: hdr.CorrelationID, req: req}
		w.timer = c.n.after(int64(req.MaxWaitMillis), func() {
			if c.removeWaiter(w) {
				c.answerMetadataFetch(w.conn, w.corr, w.req)
			}
		})
		c.metaWaiters = append(c.metaWaiters, w)
		return
	}
	c.answerMetadataFetch(conn, hdr.CorrelationID, req)
}

func (c *controller) answerMetadataFetch(conn env.ConnID, corr int32, req *kmsg.FetchRequest) {
	resp := fetchError(req, 0)
	rp := &resp.Topics[0].Partitions[0]
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = c.committedOffset, c.committedOffset, c.log.LogStartOffset()
	from := req.Topics[0].Partitions[0].FetchOffset
	switch {
	case from > c.committedOffset || from < c.log.LogStartOffset():
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
	case from < c.committedOffset:
		res, err := c.log.Read(from, replicaFetchResponseMaxBytes, c.committedOffset, true)
		if err == nil {
			rp.RecordBatches, err = log.CopyRegions(res.Regions)
		}
		rp.ErrorCode = errorCodeOf(err)
	}
	c.n.net.Reply(conn, corr, resp)
}

func (c *controller) removeWaiter(w *metadataWaiter) bool {
	for i, x := range c.metaWaiters {
		if x == w {
			c.metaWaiters = append(c.metaWaiters[:i], c.metaWaiters[i+1:]...)
			return true
		}
	}
	return false
}

func (c *controller) wakeMetadataWaiters() {
	waiters := c.metaWaiters
	c.metaWaiters = nil
	for _, w := range waiters {
		w.timer.Stop()
		c.answerMetadataFetch(w.conn, w.corr, w.req)
	}
}
