package cluster

import (
	"fmt"
	"math/rand/v2"

	"strand/core/env"
	"strand/core/metadata"
	"strand/models"
	"strand/sim/workload"
)

// forgerIntervalNs is the mean time between two forged control-plane
// requests (SPEC.md §6.1): some 15 to 80 a run, by the length of its
// fault phase.
const forgerIntervalNs = 400e6

// forgerConfig aims the forger at every node's client listener and, where
// the control plane is secured, at every voter's controller listener. A
// PLAINTEXT controller listener admits anyone who reaches it, as Kafka's
// does, so the run assumes outsiders cannot reach it, as an operator must
// ensure, and the forger does not try it.
func (c *Cluster) forgerConfig(r *rand.Rand) workload.ForgerConfig {
	var targets []workload.ForgeryTarget
	for _, n := range c.Nodes {
		targets = append(targets, workload.ForgeryTarget{Node: env.NodeID(n.ID), Listener: clientListener, Secured: c.Security.InterBrokerSecured})
		if n.cfg.Broker.Roles.Controller && c.Security.ControllerSecured {
			targets = append(targets, workload.ForgeryTarget{Node: env.NodeID(n.ID), Listener: controllerListener, Controller: true, Secured: true})
		}
	}
	return workload.ForgerConfig{IntervalNs: forgerIntervalNs, Rand: r, Principal: forgerPrincipals[r.IntN(len(forgerPrincipals))],
		Targets: targets, Intel: c.forgeryIntel}
}

// forgeryIntel is what the strongest outsider could know: the brokers'
// and partitions' epochs in the active controller's image (else the first
// running node's) and the Raft epoch of the first running voter.
func (c *Cluster) forgeryIntel() workload.ForgeryIntel {
	var in workload.ForgeryIntel
	in.Voters = c.VoterIDs()
	var im *metadata.Image
	if a := c.ActiveController(); a != nil {
		im = a.Core.Image()
	}
	for _, n := range c.Nodes {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		if im == nil {
			im = n.Core.Image()
		}
		if raft := n.Core.QuorumRaft(); raft != nil && in.RaftEpoch == 0 {
			in.RaftEpoch = raft.Epoch()
		}
	}
	if im == nil {
		return in
	}
	for _, id := range im.BrokerIDs() {
		if b, ok := im.Broker(id); ok {
			in.Brokers = append(in.Brokers, workload.ForgeryBroker{ID: id, Epoch: b.Epoch})
		}
	}
	im.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		in.Partitions = append(in.Partitions, workload.ForgeryPartition{TopicID: tp.TopicID, Partition: tp.Partition,
			Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch, Replicas: s.Replicas})
	})
	return in
}

// checkForgeries holds the forger's answers to models.CheckForgeries, and
// the nodes' images to "no fake broker is registered": a registration
// whose answer was lost would show there.
func (r *run) checkForgeries() []models.Violation {
	vs := models.CheckForgeries(r.w.ForgedOps())
	for _, n := range r.c.Nodes {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		for _, id := range n.Core.Image().BrokerIDs() {
			if id < 1 || int(id) > len(r.c.Nodes) {
				vs = append(vs, models.Violation{Check: "forgery", Detail: fmt.Sprintf("node %d's metadata registers broker %d, which is no node of the cluster", n.ID, id)})
			}
		}
	}
	return vs
}
