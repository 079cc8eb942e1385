package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/quorum"
	"strand/models"
	"strand/sim/simnet"
)

// The forger is a host outside the cluster that tries its control plane
// (SPEC.md §10), as an attacker would against a real node: it
// registers fake brokers, asks for real brokers' controlled shutdown,
// shrinks ISRs in their leaders' names, votes, claims Raft leadership,
// reads the metadata log and, where replicas must authenticate, fetches in
// a replica's name. It knows what the strongest outsider could learn (the
// brokers' epochs, the partitions' epochs, the Raft epoch), so that a
// forged request that is served would take effect. Every request is
// recorded as a models.ForgedOp with the refusal its listener owes it;
// models.CheckForgeries holds the answers to that.

// ForgerConfig shapes the forger client.
type ForgerConfig struct {
	// IntervalNs is the mean time between two forged requests, while the
	// workload produces; 0: no forger.
	IntervalNs int64
	// Rand is the stream the forger draws from.
	Rand *rand.Rand
	// Principal is what the forger authenticates as on secured listeners:
	// never a member of the cluster.
	Principal string
	// Targets are the listeners it sends to.
	Targets []ForgeryTarget
	// Intel returns what the forger knows of the cluster now.
	Intel func() ForgeryIntel
}

// ForgeryTarget is one listener of one node the forger sends to.
type ForgeryTarget struct {
	Node     env.NodeID
	Listener string
	// Controller: a controller listener, which serves the control plane,
	// to members only (the harness names it only when secured: on
	// PLAINTEXT it admits anyone who reaches it, as Kafka's does, and an
	// operator must keep outsiders from reaching it).
	Controller bool
	// Secured: the listener authenticates its connections. On a secured
	// client listener, which is the inter-broker listener, replica
	// fetches are forged too (on a PLAINTEXT one they are allowed).
	Secured bool
}

// ForgeryIntel is what the forger knows of the cluster.
type ForgeryIntel struct {
	Brokers    []ForgeryBroker
	Partitions []ForgeryPartition
	// RaftEpoch is the metadata quorum's epoch; Voters its voters.
	RaftEpoch int32
	Voters    []int32
}

// ForgeryBroker is a registered broker and its epoch.
type ForgeryBroker struct {
	ID    int32
	Epoch int64
}

// ForgeryPartition is a partition's state in the controller's image.
type ForgeryPartition struct {
	TopicID                     [16]byte
	Partition                   int32
	Leader                      int32
	LeaderEpoch, PartitionEpoch int32
	Replicas                    []int32
}

// fakeBrokerIDBase numbers the fake brokers the forger registers: no
// simulated cluster has as many brokers.
const fakeBrokerIDBase = 100

// forgery is one request to forge: what it is, and the request itself.
type forgery struct {
	what string
	req  kmsg.Request
	// replicaFetch: a replica's Fetch, refused only on a secured plane.
	replicaFetch bool
}

// forger is the forger's client and what it has sent.
type forger struct {
	w      *Workload
	client *client
	cfg    ForgerConfig
	ops    []models.ForgedOp
	fakes  int32
}

func (w *Workload) newForger(cfg ForgerConfig) *forger {
	f := &forger{w: w, client: w.newClient("forger"), cfg: cfg}
	f.client.host.SetPrincipal(cfg.Principal)
	return f
}

// start sends a forged request every IntervalNs on average until the
// workload stops producing.
func (f *forger) start() {
	interval := f.cfg.IntervalNs
	f.client.proc.After(interval/2+f.cfg.Rand.Int64N(interval+1), func() {
		if f.w.stopped {
			return
		}
		f.start()
		f.forgeOne()
	})
}

// forgeOne picks a target and a request that makes sense there, sends it
// on a connection of its own and records what comes back.
func (f *forger) forgeOne() {
	target := f.cfg.Targets[f.cfg.Rand.IntN(len(f.cfg.Targets))]
	intel := f.cfg.Intel()
	candidates := f.forgeries(target, intel)
	if len(candidates) == 0 {
		return
	}
	fg := candidates[f.cfg.Rand.IntN(len(candidates))]
	expect := models.RefuseByClose
	if target.Controller || fg.replicaFetch {
		expect = models.RefuseUnauthorized
	}
	op := len(f.ops)
	f.ops = append(f.ops, models.ForgedOp{Request: fg.what, Node: int32(target.Node), Listener: target.Listener,
		Principal: f.principalOn(target), Expect: expect, CallNs: f.w.s.NowNs(), ReturnNs: models.NeverReturnedNs})
	cc, err := f.client.host.DialListener(target.Node, target.Listener, nil)
	if err != nil {
		return // outcome unknown
	}
	answered := false
	timer := f.client.proc.After(f.w.cfg.RequestTimeoutNs, func() {
		answered = true
		cc.Close()
	})
	cc.Send(fg.req, func(resp kmsg.Response, err error) {
		if answered {
			return
		}
		answered = true
		timer.Cancel()
		cc.Close()
		rec := &f.ops[op]
		rec.ReturnNs = f.w.s.NowNs()
		switch {
		case errors.Is(err, simnet.ErrConnClosed):
			rec.Outcome = models.ForgeryClosed
		case err == nil && resp != nil:
			rec.Outcome, rec.ErrorCode = models.ForgeryAnswered, errorCodeOf(resp)
		}
	})
}

// principalOn is what the forger is on target's connections.
func (f *forger) principalOn(target ForgeryTarget) string {
	if target.Secured {
		return f.cfg.Principal
	}
	return env.AnonymousPrincipal
}

// forgeries are the requests worth forging at target now.
func (f *forger) forgeries(target ForgeryTarget, intel ForgeryIntel) []forgery {
	var out []forgery
	f.fakes++
	fake := fakeBrokerIDBase + f.fakes
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.SetVersion(3)
	reg.BrokerID, reg.IncarnationID = fake, [16]byte{0xfa, 0x4e, byte(fake)}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "10.66.6.6", 9092
	reg.Listeners = append(reg.Listeners, l)
	out = append(out, forgery{what: fmt.Sprintf("BrokerRegistration of fake broker %d", fake), req: reg})
	if len(intel.Brokers) > 0 {
		b := intel.Brokers[f.cfg.Rand.IntN(len(intel.Brokers))]
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.SetVersion(1)
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset, hb.WantShutdown = b.ID, b.Epoch, 1<<40, true
		out = append(out, forgery{what: fmt.Sprintf("BrokerHeartbeat WantShutdown for broker %d epoch %d", b.ID, b.Epoch), req: hb})
		ids := kmsg.NewPtrAllocateProducerIDsRequest()
		ids.BrokerID, ids.BrokerEpoch = b.ID, b.Epoch
		out = append(out, forgery{what: fmt.Sprintf("AllocateProducerIds for broker %d", b.ID), req: ids})
	}
	if len(intel.Partitions) > 0 {
		p := intel.Partitions[f.cfg.Rand.IntN(len(intel.Partitions))]
		if leaderEpoch, ok := intel.brokerEpoch(p.Leader); ok {
			out = append(out, forgery{what: fmt.Sprintf("AlterPartition shrinking partition %d's ISR to leader %d", p.Partition, p.Leader),
				req: shrinkISR(p, leaderEpoch)})
		}
		if target.Secured && !target.Controller && len(p.Replicas) > 1 {
			out = append(out, forgery{what: fmt.Sprintf("replica Fetch of partition %d in replica %d's name", p.Partition, p.Replicas[1]),
				req: replicaFetch(p, p.Replicas[1]), replicaFetch: true})
		}
	}
	out = append(out, f.quorumForgeries(target, intel)...)
	return out
}

// quorumForgeries are Raft RPCs in a voter's name, in later epochs, and
// the metadata log's Fetch.
func (f *forger) quorumForgeries(target ForgeryTarget, intel ForgeryIntel) []forgery {
	var others []int32
	for _, v := range intel.Voters {
		if v != int32(target.Node) {
			others = append(others, v)
		}
	}
	if len(others) == 0 {
		return nil
	}
	other := others[f.cfg.Rand.IntN(len(others))]
	epoch := intel.RaftEpoch + 1 + f.cfg.Rand.Int32N(3)
	messages := []forgedMessage{
		{fmt.Sprintf("Vote for voter %d in epoch %d", other, epoch),
			quorum.Message{Type: quorum.MsgVote, From: other, To: int32(target.Node), Epoch: epoch, LastEpoch: epoch, LastOffset: 1 << 40}},
		{fmt.Sprintf("BeginQuorumEpoch naming voter %d leader of epoch %d", other, epoch),
			quorum.Message{Type: quorum.MsgBeginEpoch, From: other, To: int32(target.Node), Epoch: epoch, LeaderID: other}},
		{fmt.Sprintf("EndQuorumEpoch for voter %d in epoch %d", other, intel.RaftEpoch),
			quorum.Message{Type: quorum.MsgEndEpoch, From: other, To: int32(target.Node), Epoch: intel.RaftEpoch}},
	}
	if target.Controller {
		// A broker listener serves Fetch: there the metadata log is a
		// partition it does not host, an error without effect.
		messages = append(messages, forgedMessage{fmt.Sprintf("voter %d's Fetch of the metadata log", other),
			quorum.Message{Type: quorum.MsgFetch, From: other, To: int32(target.Node), Epoch: intel.RaftEpoch, LastFetchedEpoch: -1}})
	}
	var out []forgery
	for _, m := range messages {
		req, err := quorum.EncodeRequest(m.m)
		if err != nil {
			panic(fmt.Sprintf("workload: encode a forged %s: %v", m.what, err))
		}
		out = append(out, forgery{what: m.what, req: req})
	}
	return out
}

// forgedMessage is a Raft message to forge and what it is.
type forgedMessage struct {
	what string
	m    quorum.Message
}

// brokerEpoch is broker id's epoch, if registered.
func (in ForgeryIntel) brokerEpoch(id int32) (int64, bool) {
	for _, b := range in.Brokers {
		if b.ID == id {
			return b.Epoch, true
		}
	}
	return 0, false
}

// shrinkISR is an AlterPartition in p's leader's name, with the current
// epochs, leaving the leader alone in the ISR.
func shrinkISR(p ForgeryPartition, leaderBrokerEpoch int64) *kmsg.AlterPartitionRequest {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(2)
	req.BrokerID, req.BrokerEpoch = p.Leader, leaderBrokerEpoch
	t := kmsg.NewAlterPartitionRequestTopic()
	t.TopicID = p.TopicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = p.Partition, p.LeaderEpoch, p.PartitionEpoch, []int32{p.Leader}
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	return req
}

// replicaFetch is a Fetch v13 (by topic id) in replica's name, at an offset
// past any log end: served, it would tell the leader the replica caught up.
func replicaFetch(p ForgeryPartition, replica int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(13)
	req.ReplicaID, req.MaxBytes = replica, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = p.TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset, fp.PartitionMaxBytes = p.Partition, p.LeaderEpoch, 1<<40, 1<<20
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	return req
}

// errorCodeOf is a control-plane answer's top-level error code, or its
// first partition's for a Fetch version without one.
func errorCodeOf(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode
	case *kmsg.VoteResponse:
		return r.ErrorCode
	case *kmsg.BeginQuorumEpochResponse:
		return r.ErrorCode
	case *kmsg.EndQuorumEpochResponse:
		return r.ErrorCode
	case *kmsg.FetchResponse:
		if r.ErrorCode == 0 && len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
		return r.ErrorCode
	}
	panic(fmt.Sprintf("workload: the forger got a %T", resp))
}

// ForgedOps lists every request the forger sent, with what came back.
func (w *Workload) ForgedOps() []models.ForgedOp {
	if w.forger == nil {
		return nil
	}
	return w.forger.ops
}
