package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/quorum"
)

// ObserverSessionTimeoutMs is how long the active controller remembers an
// observer (a broker following the metadata log) after its last fetch:
// Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS, 5 minutes, not
// configurable. A broker gone longer drops out of DescribeQuorum's
// observers, and the set stays bounded by the brokers that fetched within
// it (TestDescribeQuorumForgetsObserversAfterTheirSession).
const ObserverSessionTimeoutMs = 300_000

// VoterEndpoint is a voter's controller listener, from
// controller.quorum.voters: DescribeQuorum v2 names it (Nodes).
type VoterEndpoint struct {
	ID       int32
	Listener string
	Host     string
	Port     uint16
}

// observers are the active controller's view of the brokers following the
// metadata log (Kafka's observers): their fetches come to the controller,
// not to Raft, and show the committed log, so "caught up" is measured
// against the committed offset, all a broker can fetch.
type observers struct {
	byID map[int32]*quorum.ReplicaProgress
}

// fetched records replica id's metadata fetch from fetchOffset at nowMs,
// with the log committed up to committed. A new observer first forgets
// those whose session ended, so the set never outgrows the brokers that
// fetched within ObserverSessionTimeoutMs.
func (o *observers) fetched(id int32, nowMs, fetchOffset, committed int64) {
	p, ok := o.byID[id]
	if !ok {
		o.expire(nowMs)
		if o.byID == nil {
			o.byID = map[int32]*quorum.ReplicaProgress{}
		}
		np := quorum.NewReplicaProgress(id)
		p = &np
		o.byID[id] = p
	}
	p.Fetched(nowMs, fetchOffset, committed)
}

// expire forgets the observers whose last fetch is ObserverSessionTimeoutMs
// old or older.
func (o *observers) expire(nowMs int64) {
	for id, p := range o.byID { // order-independent: it only deletes
		if nowMs-p.LastFetchMs >= ObserverSessionTimeoutMs {
			delete(o.byID, id)
		}
	}
}

// list is the observers by id, voters left out (a voter that also follows
// as a broker is described as a voter).
func (o *observers) list(voters []int32) []quorum.ReplicaProgress {
	out := make([]quorum.ReplicaProgress, 0, len(o.byID))
	for id, p := range o.byID { // order-independent: sorted below
		if !slices.Contains(voters, id) {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b quorum.ReplicaProgress) int { return int(a.ReplicaID) - int(b.ReplicaID) })
	return out
}

// nowMs is the controller's monotonic time in milliseconds, the time base
// of Raft's progress.
func (c *Controller) nowMs() int64 { return c.clock.MonotonicNs() / 1e6 }

// wallMs turns a monotonic time of this node (ms) into the wall-clock
// timestamp DescribeQuorum reports (ms since the epoch), as the node's
// wall clock reads now; -1 (unknown) stays -1.
func (c *Controller) wallMs(monoMs, nowMonoMs int64) int64 {
	if monoMs < 0 {
		return -1
	}
	return c.clock.WallMs() - (nowMonoMs - monoMs)
}

// handleDescribeQuorum answers DescribeQuorum (KIP-595, KIP-836, KIP-853)
// for __cluster_metadata-0 from the quorum's leader: its id and epoch, the
// high watermark, every voter's and observer's log end offset, last fetch
// and last caught-up timestamps, and from v2 the voters' controller
// listeners. A node that does not lead answers NOT_LEADER_OR_FOLLOWER
// for the partition, naming the leader it knows; any other partition is
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Controller) handleDescribeQuorum(req *kmsg.DescribeQuorumRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !isMetadataPartitionOnly(req) {
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeQuorumResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.UnknownTopicOrPartition.Code
				rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
		return
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = MetadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	nowMs := c.nowMs()
	desc, leads := c.quorum.Describe()
	if !leads || c.failed != nil {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = c.quorum.LeaderID(), c.quorum.Epoch(), -1
	} else {
		rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = desc.LeaderID, desc.LeaderEpoch, desc.HighWatermark
		c.observers.expire(nowMs)
		rp.CurrentVoters = c.replicaStates(desc.Voters, nowMs)
		rp.Observers = c.replicaStates(c.observers.list(c.cfg.Voters), nowMs)
		if req.Version >= 2 {
			resp.Nodes = c.voterNodes()
		}
	}
	rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{rp}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{rt}
	reply(resp)
}

// isMetadataPartitionOnly reports whether req asks for exactly
// __cluster_metadata-0, as Kafka's hasValidTopicPartition requires.
func isMetadataPartitionOnly(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == MetadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
}

// replicaStates is progress as DescribeQuorum reports it, with wall-clock
// timestamps. ReplicaDirectoryID (v2) stays zero, Kafka's "no directory
// id": Strand's voters do not send one (Fetch v17 is not served).
func (c *Controller) replicaStates(progress []quorum.ReplicaProgress, nowMs int64) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(progress))
	for _, p := range progress {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset = p.ReplicaID, p.LogEndOffset
		s.LastFetchTimestamp, s.LastCaughtUpTimestamp = c.wallMs(p.LastFetchMs, nowMs), c.wallMs(p.LastCaughtUpMs, nowMs)
		out = append(out, s)
	}
	return out
}

// voterNodes are the voters' controller listeners, by id (v2's Nodes).
func (c *Controller) voterNodes() []kmsg.DescribeQuorumResponseNode {
	eps := slices.Clone(c.cfg.VoterEndpoints)
	slices.SortStableFunc(eps, func(a, b VoterEndpoint) int { return int(a.ID) - int(b.ID) })
	out := make([]kmsg.DescribeQuorumResponseNode, 0, len(eps))
	for _, ep := range eps {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = ep.ID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = ep.Listener, ep.Host, ep.Port
		n.Listeners = []kmsg.DescribeQuorumResponseNodeListener{l}
		out = append(out, n)
	}
	return out
}
