package quorum

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// Applier is the replicated state machine a Node feeds, on the event loop.
type Applier interface {
	// LoadSnapshot replaces the state with snap's: at start (the latest
	// durable snapshot) and when the leader sends one.
	LoadSnapshot(snap *Snapshot)
	// Apply applies committed entries, in offset order.
	Apply(entries []Entry)
	// Failed reports that the node stopped: its storage failed. Nothing is
	// called after it.
	Failed(err error)
}

// Node runs one Raft voter (or observer) on a node's environment: it
// persists each Ready through Storage, and only when that completes sends
// its messages over env.Network, applies its committed entries and calls
// Advance; it answers peers' quorum requests, and ticks Raft on env.Clock
// at Raft's next deadline (not on a fixed period: an idle node wakes a few
// times per fetch wait, not 100 times a second). Everything runs on the
// node's event loop.
type Node struct {
	raft    *Raft
	storage *Storage
	clock   env.Clock
	net     env.Network
	apply   Applier
	// timer, if not nil, fires at timerAtMs, at or before Raft's next
	// deadline. It is moved only to an earlier deadline: a deadline pushed
	// later (a follower's, at every Fetch answer) leaves it, and when it
	// fires early Tick does nothing and the timer is armed again.
	timer     env.Timer
	timerAtMs int64
	// inbound are the requests stepped in and not yet answered, by Ref.
	inbound    map[uint64]inboundRequest
	nextRef    uint64
	persisting bool
	stopped    bool
	// onStateChange, if set, runs whenever the node may have changed role,
	// epoch or leader (MetadataQuorum filters real changes).
	onStateChange func()
}

type inboundRequest struct {
	conn          env.ConnID
	correlationID int32
	version       int16
}

// StartNode recovers the quorum's storage in dir, hands the latest snapshot
// to apply, and starts the voter.
func StartNode(cfg Config, clock env.Clock, net env.Network, disk env.Disk, dir string, apply Applier) (*Node, error) {
	storage, rec, err := OpenStorage(disk, dir)
	if err != nil {
		return nil, err
	}
	r, err := New(cfg, rec.Hard, rec.Snapshot, rec.Entries, clock.MonotonicNs()/1e6)
	if err != nil {
		storage.Close()
		return nil, fmt.Errorf("quorum: restart from %s: %w", dir, err)
	}
	n := &Node{raft: r, storage: storage, clock: clock, net: net, apply: apply, inbound: map[uint64]inboundRequest{}}
	if rec.Snapshot != nil {
		apply.LoadSnapshot(rec.Snapshot)
	}
	n.armTimer()
	return n, nil
}

// Raft is the node's state machine, for reading its state.
func (n *Node) Raft() *Raft { return n.raft }

func (n *Node) nowMs() int64 { return n.clock.MonotonicNs() / 1e6 }

// armTimer makes sure a timer fires by Raft's next deadline: it arms one
// if none is armed or the deadline is earlier than the armed one.
func (n *Node) armTimer() {
	deadlineMs := n.raft.NextDeadlineMs()
	if n.stopped || deadlineMs == NoDeadlineMs || (n.timer != nil && deadlineMs >= n.timerAtMs) {
		return
	}
	if n.timer != nil {
		n.timer.Stop()
	}
	// Fired at or after deadlineMs in whole milliseconds, nowMs (the
	// milliseconds floored) has reached the deadline.
	delayNs := deadlineMs*1e6 - n.clock.MonotonicNs()
	n.timer, n.timerAtMs = n.clock.SetTimer(delayNs, n.timerFired), deadlineMs
}

func (n *Node) timerFired() {
	n.timer = nil
	if n.stopped {
		return
	}
	n.raft.Tick(n.nowMs())
	n.pump() // arms the timer for the next deadline
}

func (n *Node) stopTimer() {
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
}

// IsQuorumRequest reports whether req is one a Node answers: Vote,
// BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, and Fetch of
// __cluster_metadata-0.
func IsQuorumRequest(req kmsg.Request) bool {
	switch req := req.(type) {
	case *kmsg.VoteRequest, *kmsg.BeginQuorumEpochRequest, *kmsg.EndQuorumEpochRequest, *kmsg.FetchSnapshotRequest:
		return true
	case *kmsg.FetchRequest:
		return len(req.Topics) == 1 && (req.Topics[0].Topic == MetadataTopic || req.Topics[0].TopicID == MetadataTopicID)
	}
	return false
}

// IsVoterRequest reports whether req is Raft traffic between voters: Vote,
// BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, and a voter's Fetch of
// __cluster_metadata-0 (v15+, naming the replica in ReplicaState; a broker
// following the log fetches with v12 instead). Networks give this traffic
// connections of its own, as KRaft's Raft client has its own: on a
// connection shared with controller RPCs, whose answers wait for a commit,
// a follower's Fetch answer would queue behind an answer that waits for
// that very Fetch (Kafka answers a connection's requests in order).
func IsVoterRequest(req kmsg.Request) bool {
	if f, ok := req.(*kmsg.FetchRequest); ok {
		return f.Version >= 15 && f.ReplicaState.ID >= 0 && IsQuorumRequest(f)
	}
	return IsQuorumRequest(req)
}

// HandleRequest steps a peer's quorum request in; the answer goes out once
// what it depends on is durable. A malformed request closes the connection.
func (n *Node) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request, self env.NodeID) {
	if n.stopped {
		return
	}
	m, err := DecodeRequest(int32(self), req)
	if err != nil {
		if resp := invalidRequestAnswer(req); resp != nil {
			n.net.Reply(conn, header.CorrelationID, resp)
			return
		}
		n.net.Close(conn, header.CorrelationID)
		return
	}
	n.nextRef++
	m.Ref = n.nextRef
	n.inbound[m.Ref] = inboundRequest{conn: conn, correlationID: header.CorrelationID, version: header.APIVersion}
	n.raft.Step(n.nowMs(), m)
	n.pump()
}

// invalidRequestAnswer answers a Raft request that names no partition of
// the metadata log (or several) with INVALID_REQUEST in its top-level
// error, as Kafka's KafkaRaftClient does; nil for a Fetch, whose sender
// gets its connection closed.
func invalidRequestAnswer(req kmsg.Request) kmsg.Response {
	return ErrorAnswer(req, kerr.InvalidRequest.Code)
}

// ErrorAnswer is the answer to a Raft request (Vote, BeginQuorumEpoch,
// EndQuorumEpoch, FetchSnapshot) refused whole with code, in its top-level
// error code; nil for any other request.
func ErrorAnswer(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.VoteRequest:
		resp := r.ResponseKind().(*kmsg.VoteResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.BeginQuorumEpochRequest:
		resp := r.ResponseKind().(*kmsg.BeginQuorumEpochResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndQuorumEpochRequest:
		resp := r.ResponseKind().(*kmsg.EndQuorumEpochResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.FetchSnapshotRequest:
		resp := r.ResponseKind().(*kmsg.FetchSnapshotResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}

// HandleClosed forgets the requests of a closed connection.
func (n *Node) HandleClosed(conn env.ConnID) {
	for ref, in := range n.inbound { // order-independent: deletes only
		if in.conn == conn {
			delete(n.inbound, ref)
		}
	}
}

// Propose appends data if this node leads; see Raft.Propose.
func (n *Node) Propose(data []byte) (int64, error) {
	if n.stopped {
		return 0, fmt.Errorf("quorum: node stopped")
	}
	offset, err := n.raft.Propose(n.nowMs(), data)
	n.pump()
	return offset, err
}

// TakeSnapshot records a snapshot of the applied state; see Raft.TakeSnapshot.
func (n *Node) TakeSnapshot(endOffset int64, data []byte) error {
	if err := n.raft.TakeSnapshot(endOffset, data); err != nil {
		return err
	}
	n.pump()
	return nil
}

// Resign hands leadership on before a controlled shutdown; see Raft.Resign.
func (n *Node) Resign() {
	n.raft.Resign(n.nowMs())
	n.pump()
}

// Stopped reports whether the node has stopped: Stop was called, or its
// storage failed.
func (n *Node) Stopped() bool { return n.stopped }

// Stop stops ticking and answering; pending completions are ignored.
func (n *Node) Stop() {
	n.stopped = true
	n.stopTimer()
	n.storage.Close()
}

// pump persists the next Ready, then sends, applies and advances. Every
// input to Raft (a message, a Tick, a proposal, an Advance) is followed by
// a pump, so it is also where the timer follows Raft's next deadline.
func (n *Node) pump() {
	if n.onStateChange != nil && !n.stopped {
		n.onStateChange()
	}
	n.armTimer()
	if n.persisting || n.stopped || !n.raft.HasReady() {
		return
	}
	rd := n.raft.Ready()
	n.persisting = true
	n.storage.Persist(rd, func(err error) {
		n.persisting = false
		if n.stopped {
			return
		}
		if err != nil {
			n.stopped = true
			n.stopTimer()
			n.apply.Failed(err)
			return
		}
		obs := n.raft.cfg.Observer
		if h := rd.HardState; obs != nil && h != nil && h.VotedFor >= 0 {
			obs.VotePersisted(n.raft.cfg.ID, h.Epoch, h.VotedFor)
		}
		for _, m := range rd.Messages {
			n.send(m)
		}
		if rd.SnapshotInstall {
			n.apply.LoadSnapshot(rd.Snapshot)
		}
		if len(rd.Committed) > 0 {
			if obs != nil {
				obs.Applied(n.raft.cfg.ID, rd.Committed)
			}
			n.apply.Apply(rd.Committed)
		}
		n.raft.Advance(n.nowMs(), rd)
		n.pump()
	})
}

func (n *Node) send(m Message) {
	if m.Type.IsResponse() {
		in, ok := n.inbound[m.Ref]
		if !ok {
			return // the connection closed
		}
		delete(n.inbound, m.Ref)
		resp, err := EncodeResponse(m)
		if err != nil {
			panic(fmt.Sprintf("quorum: %v", err)) // Raft made a message the codec lacks
		}
		resp.SetVersion(in.version)
		n.net.Reply(in.conn, in.correlationID, resp)
		return
	}
	req, err := EncodeRequest(m)
	if err != nil {
		panic(fmt.Sprintf("quorum: %v", err))
	}
	n.net.Send(env.NodeID(m.To), req, func(resp kmsg.Response, err error) {
		if err != nil || n.stopped {
			return // Raft's own timeouts retry
		}
		answer, err := DecodeResponse(m, resp)
		if err != nil {
			return // a malformed answer counts as lost: Raft retries
		}
		n.raft.Step(n.nowMs(), answer)
		n.pump()
	})
}
