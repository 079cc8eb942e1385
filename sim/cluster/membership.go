package cluster

import (
	"fmt"

	"strand/core/metadata"
	"strand/sim/memdisk"
	"strand/sim/sched"
)

// Membership changes the cluster's brokers during a run (shape topology):
// a new broker joins, registers, and is given replicas of the topics
// created after it (the churned topic's re-creations); a broker that is
// no controller voter is shut down for good, as an operator
// decommissioning it does: a controlled shutdown, then it never comes
// back, and the controller fences it once its session expires, so that
// its partitions are led elsewhere.
type Membership struct {
	// JoinAfterNs: a broker (node id Brokers+1) starts this long after the
	// faults start; 0: none joins.
	JoinAfterNs int64
	// RemoveAfterNs: a broker that is no voter is removed this long after
	// the faults start; 0: none is.
	RemoveAfterNs int64
}

// membershipStream is the stream membership changes are drawn from, so
// that drawing them changes no other draw of the topology.
const membershipStream = "topology/membership"

// drawMembership draws, for the shape topology, a join in half the seeds
// and a removal in half, each within the first half of the fault phase
// (the heal comes no earlier).
func drawMembership(shape Shape, seed uint64) Membership {
	r := sched.NewStreams(seed).Get(membershipStream)
	var m Membership
	if r.IntN(2) == 0 {
		m.JoinAfterNs = sched.Int64Between(r, 1e9, shape.FaultPhaseNs/2)
	}
	if r.IntN(2) == 0 {
		m.RemoveAfterNs = sched.Int64Between(r, shape.FaultPhaseNs/4, shape.FaultPhaseNs/2)
	}
	return m
}

// nodes is how many nodes the run builds: the brokers, and the one that
// joins later.
func (s Shape) nodes() int {
	if s.Membership.JoinAfterNs > 0 {
		return s.Brokers + 1
	}
	return s.Brokers
}

// membershipHits counts what the membership changes did.
type membershipHits struct {
	joined, removed, removalsRefused int
}

// startMembership schedules the shape's membership changes.
func (f *faults) startMembership() {
	c, m := f.c, f.c.shape.Membership
	if m.JoinAfterNs > 0 {
		c.S.After(m.JoinAfterNs, f.join)
	}
	if m.RemoveAfterNs > 0 {
		c.S.After(m.RemoveAfterNs, f.remove)
	}
}

// join starts the node that joins: it formats its empty disk, registers
// with the controller and becomes a member.
func (f *faults) join() {
	c := f.c
	if f.healed {
		return
	}
	n := c.Nodes[c.shape.Brokers] // node id Brokers+1
	n.absent = false
	c.members = append(c.members, n)
	f.membership.joined++
	c.S.Trace(sched.Record{Kind: "fault.broker_join", Node: n.ID})
	c.restart(n)
	f.chaosNodes = append(f.chaosNodes, n)
	f.processChaos.Add(n.Proc) // it is paused and crashed as the others
}

// remove decommissions a running broker that is no voter, if one may go:
// every partition it holds a replica of keeps min.insync.replicas
// replicas without it (else acks=all writes would stop for good: an
// operator reassigns first), and, as for any fault that may cost a replica
// (admitLoss), its partitions stay within their budget; its replicas then
// count as unrecovered for the rest of the run. Over budget no broker is
// removed: a partition that lost its other replicas could never get a
// leader back. The broker shuts down through a controlled shutdown, or,
// past cleanRestartWaitNs, is stopped; either way it never restarts.
func (f *faults) remove() {
	c := f.c
	if f.healed {
		return
	}
	var n *Node
	for _, m := range c.Brokers() {
		if m.ID > int32(len(c.VoterIDs())) && m.Proc.Up() && m.Core != nil && !m.leaving {
			n = m
			break
		}
	}
	if n == nil || f.overBudget || !f.keepsMinInsync(n) || !f.admitLoss(n, "fault.remove_refused") {
		f.membership.removalsRefused++
		id := int32(-1)
		if n != nil {
			id = n.ID
		}
		c.S.Trace(sched.Record{Kind: "fault.remove_refused", Node: id})
		return
	}
	n.leaving = true
	c.S.Trace(sched.Record{Kind: "fault.broker_remove", Node: n.ID})
	incarnation := n.Proc.Incarnation()
	gone := false
	stop := func() {
		if gone {
			return
		}
		gone = true
		n.absent = true
		for i, m := range c.members {
			if m == n {
				c.members = append(c.members[:i:i], c.members[i+1:]...)
				break
			}
		}
		f.membership.removed++
		if n.Proc.Up() && n.Proc.Incarnation() == incarnation {
			n.nextCrash = memdisk.CrashKeepAll
			n.Proc.Crash()
		}
		c.S.Trace(sched.Record{Kind: "fault.broker_removed", Node: n.ID})
	}
	core := n.Core
	core.BeginShutdown(func() {
		core.Close(func(error) { c.S.After(0, stop) })
	})
	c.S.After(cleanRestartWaitNs, stop)
}

// keepsMinInsync says whether every partition with a replica on n keeps
// at least its min.insync.replicas replicas without n.
func (f *faults) keepsMinInsync(n *Node) bool {
	for _, tp := range f.budgeted {
		replicas := f.replicasOf(tp)
		if containsID(replicas, n.ID) && len(replicas)-1 < effectiveMinInsync(f.c.shape.minInsync(tp.Topic), replicas) {
			return false
		}
	}
	return true
}

// memberReplicas are those of replicas on brokers that are members now.
func (c *Cluster) memberReplicas(replicas []int32) []int32 {
	var out []int32
	for _, id := range replicas {
		if !c.Nodes[id-1].absent {
			out = append(out, id)
		}
	}
	return out
}

// joinedBrokerHosts says whether the joined broker holds a replica of some
// partition in the active controller's metadata.
func (c *Cluster) joinedBrokerHosts() bool {
	a := c.ActiveController()
	if c.shape.Membership.JoinAfterNs == 0 || a == nil {
		return false
	}
	joined := int32(c.shape.Brokers + 1)
	hosts := false
	a.Core.Image().EachPartition(func(_ metadata.TopicPartition, st metadata.PartitionState) {
		hosts = hosts || containsID(st.Replicas, joined)
	})
	return hosts
}

func (h membershipHits) String() string {
	return fmt.Sprintf(" joined=%d removed=%d removals_refused=%d", h.joined, h.removed, h.removalsRefused)
}

// checkMembership returns what the metadata image im gets wrong about
// the removals, or "": a broker removed is fenced and leads no partition.
// (That every member, a broker that joined too, is registered and
// unfenced is part of convergence: membersUnfenced.)
func (c *Cluster) checkMembership(im *metadata.Image) string {
	for _, n := range c.Nodes {
		if !n.absent || !n.leaving {
			continue
		}
		if b, ok := im.Broker(n.ID); ok && !b.Fenced {
			return fmt.Sprintf("broker %d was removed but is not fenced", n.ID)
		}
		why := ""
		im.EachPartition(func(tp metadata.TopicPartition, st metadata.PartitionState) {
			if st.Leader == n.ID && why == "" {
				why = fmt.Sprintf("broker %d was removed but leads %s-%d", n.ID, tp.Topic, tp.Partition)
			}
		})
		if why != "" {
			return why
		}
	}
	return ""
}

// membersUnfenced returns a member broker that im does not have
// registered and unfenced, or "": convergence waits for every member,
// one that joined or restarted late too.
func (c *Cluster) membersUnfenced(im *metadata.Image) string {
	for _, n := range c.Brokers() {
		if b, ok := im.Broker(n.ID); !ok || b.Fenced {
			return fmt.Sprintf("broker %d is not registered and unfenced (registered %v)", n.ID, ok)
		}
	}
	return ""
}
