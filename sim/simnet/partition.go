package simnet

import (
	"fmt"

	"strand/sim/sched"
)

// Block stops frames from one host to another (one direction) until
// Unblock or Heal. Frames due meanwhile wait and are retransmitted; see the
// package comment.
func (n *Network) Block(from, to HostID) {
	n.checkHost(from)
	n.checkHost(to)
	n.link(from, to).blocked = true
	n.s.Trace(sched.Record{Kind: "net.block", Node: -1, A: int64(from), B: int64(to)})
}

// Unblock lets frames from one host to another through again.
func (n *Network) Unblock(from, to HostID) {
	n.checkHost(from)
	n.checkHost(to)
	n.link(from, to).blocked = false
	n.s.Trace(sched.Record{Kind: "net.unblock", Node: -1, A: int64(from), B: int64(to)})
}

// Partition blocks every link from a host in sideA to a host in sideB, and,
// if symmetric, every link back.
func (n *Network) Partition(sideA, sideB []HostID, symmetric bool) {
	for _, a := range sideA {
		for _, b := range sideB {
			n.Block(a, b)
			if symmetric {
				n.Block(b, a)
			}
		}
	}
}

// Isolate cuts host h off from every other host, both ways.
func (n *Network) Isolate(h HostID) {
	for _, other := range n.hosts {
		if other.id != h {
			n.Block(h, other.id)
			n.Block(other.id, h)
		}
	}
}

// Clog adds delayNs of latency to every frame sent from one host to another
// during the next durationNs: a congested link rather than a cut one.
func (n *Network) Clog(from, to HostID, durationNs, delayNs int64) {
	n.checkHost(from)
	n.checkHost(to)
	if durationNs < 0 || delayNs < 0 {
		panic(fmt.Sprintf("simnet: clog for %dns adding %dns", durationNs, delayNs))
	}
	l := n.link(from, to)
	l.clogUntilNs = n.s.NowNs() + durationNs
	l.clogDelayNs = delayNs
	n.s.Trace(sched.Record{Kind: "net.clog", Node: -1, A: int64(from), B: int64(to), C: delayNs})
}

// Heal removes every network fault, for the liveness phase: partitions and
// clogs end, chaos stops, frames stop breaking connections or taking the
// long tail, and black-holed connections break so both ends learn of them
// (as a keepalive eventually would). Base latency and jitter stay.
func (n *Network) Heal() {
	if n.chaos != nil {
		n.chaos.tick.Cancel()
		n.chaos = nil
	}
	for i := range n.links {
		n.links[i] = link{}
	}
	n.faults.BreakOneIn = 0
	n.faults.TailPerMille = 0
	n.faults.BlackholePerMille = 0
	n.faults.PartitionPerMille = 0
	n.faults.ClogPerMille = 0
	var blackholed []*conn
	for _, c := range n.conns {
		if c.toServer.blackholed || c.toClient.blackholed {
			blackholed = append(blackholed, c)
		}
	}
	for _, c := range blackholed {
		c.breakConn("heal")
	}
	n.s.Trace(sched.Record{Kind: "net.heal", Node: -1, A: int64(len(blackholed))})
}

func (n *Network) checkHost(h HostID) {
	if h < 0 || int(h) >= len(n.hosts) {
		panic(fmt.Sprintf("simnet: host %d does not exist (%d hosts)", h, len(n.hosts)))
	}
}

// chaos drives the partitions and clogs of Faults on a tick.
type chaos struct {
	n    *Network
	tick sched.Handle
	// partitionEndNs is when the current partition heals; 0 when none.
	partitionEndNs int64
}

// StartChaos starts partitioning and clogging links at random, at the rates
// of the network's Faults, until Heal. Partitions it makes and ends cover
// every link, so do not mix it with Block and Partition calls.
func (n *Network) StartChaos() {
	if n.chaos != nil {
		panic("simnet: chaos started twice")
	}
	if n.faults.PartitionPerMille == 0 && n.faults.ClogPerMille == 0 {
		return
	}
	n.chaos = &chaos{n: n}
	n.chaos.tick = n.s.After(n.faults.ChaosTickNs, n.chaos.step)
}

func (ch *chaos) step() {
	n := ch.n
	f := &n.faults
	nowNs := n.s.NowNs()
	if ch.partitionEndNs != 0 && nowNs >= ch.partitionEndNs {
		for i := range n.links {
			n.links[i].blocked = false
		}
		ch.partitionEndNs = 0
		n.s.Trace(sched.Record{Kind: "net.partition_end", Node: -1})
	} else if ch.partitionEndNs == 0 && sched.Chance(n.r, f.PartitionPerMille) {
		ch.partition()
	}
	if len(n.hosts) >= 2 && sched.Chance(n.r, f.ClogPerMille) {
		from := HostID(n.r.IntN(len(n.hosts)))
		to := HostID(n.r.IntN(len(n.hosts) - 1))
		if to >= from {
			to++
		}
		n.Clog(from, to, sched.Int64Between(n.r, 1, f.ClogNsMax), sched.Int64Between(n.r, 0, f.ClogDelayNsMax))
	}
	ch.tick = n.s.After(f.ChaosTickNs, ch.step)
}

// partition starts a partition: one node isolated, or the hosts split in
// two sides that each hold a node; one way only if asymmetric.
func (ch *chaos) partition() {
	n := ch.n
	f := &n.faults
	var nodes []HostID
	for _, h := range n.hosts {
		if h.isNode {
			nodes = append(nodes, h.id)
		}
	}
	if len(nodes) < 2 {
		return
	}
	symmetric := !sched.Chance(n.r, f.AsymmetricPerMille)
	var sideA, sideB []HostID
	if sched.Chance(n.r, f.IsolatePerMille) {
		isolated := nodes[n.r.IntN(len(nodes))]
		sideA = []HostID{isolated}
		for _, h := range n.hosts {
			if h.id != isolated {
				sideB = append(sideB, h.id)
			}
		}
	} else {
		// Two distinct nodes anchor the sides; every other host picks one.
		i := n.r.IntN(len(nodes))
		j := n.r.IntN(len(nodes) - 1)
		if j >= i {
			j++
		}
		for _, h := range n.hosts {
			switch {
			case h.id == nodes[i]:
				sideA = append(sideA, h.id)
			case h.id == nodes[j]:
				sideB = append(sideB, h.id)
			case n.r.IntN(2) == 0:
				sideA = append(sideA, h.id)
			default:
				sideB = append(sideB, h.id)
			}
		}
	}
	durationNs := sched.Int64Between(n.r, f.PartitionNsMin, f.PartitionNsMax)
	ch.partitionEndNs = n.s.NowNs() + max(durationNs, 1)
	n.s.Trace(sched.Record{Kind: "net.partition", Node: -1, A: int64(len(sideA)), B: int64(len(sideB)), C: durationNs})
	n.Partition(sideA, sideB, symmetric)
}
